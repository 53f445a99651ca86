"""Writes the hand-built test models of the ort-transformers target (tests/ortx.rs), built with onnx.helper:
a Gelu in its erf form (what FusionGelu fuses) followed by a layer normalization spelled out in ONNX ops (what
FusionLayerNormalization fuses), float32 [2, 8]. Variants carry test-only faults in their metadata, which the
runner honours only under OATEST_ORTX_TEST_FAULTS=1: `raise:<pass>` raises inside that fusion once it fired,
`break:<pass>` leaves the graph with a node reading a value nothing defines (onnx.checker refuses it).
gelu_layernorm_ai_onnx.onnx imports the default domain as `ai.onnx`: ORT takes it, onnx.checker does not.
constant_output.onnx has a Constant read only as a graph output (a clean-up nested in another deletes it).

Run with the project's .venv: .venv/bin/python tests/data/ort-transformers/make.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def model(fault=None, domain=""):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, np.float32), name)  # noqa: E731
    rng = np.random.default_rng(0)
    inits = [
        c("sqrt2", 1.4142135),
        c("one", 1.0),
        c("half", 0.5),
        c("two", 2.0),
        c("eps", 1e-5),
        c("gamma", rng.uniform(0.5, 1.5, 8)),
        c("beta", rng.uniform(-0.5, 0.5, 8)),
    ]
    nodes = [
        # Gelu (erf form)
        helper.make_node("Div", ["x", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["g"]),
        # LayerNormalization over the last axis
        helper.make_node("ReduceMean", ["g"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["g", "mean"], ["diff"]),
        helper.make_node("Pow", ["diff", "two"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["diff", "std"], ["n"]),
        helper.make_node("Mul", ["n", "gamma"], ["s"]),
        helper.make_node("Add", ["s", "beta"], ["y"]),
    ]
    g = helper.make_graph(nodes, "gelu_layernorm", [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(domain, 17)], ir_version=9)
    m.producer_name = "pytorch"
    if fault:
        helper.set_model_props(m, {"oatest.fault": fault})
    if domain == "":
        onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    for name, fault in [
        ("gelu_layernorm", None),
        ("gelu_layernorm_raise_in_gelu", "raise:FusionGelu"),
        ("gelu_layernorm_break_in_layernorm", "break:FusionLayerNormalization"),
    ]:
        onnx.save(model(fault), os.path.join(HERE, name + ".onnx"))
    # a Constant read only as a graph output: OnnxModel.remove_unused_constant deletes it (called by postprocess
    # through prune_graph), leaving the output without a producer
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("y", [2]), ("c", []))]
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Constant", [], ["c"], value_float=2.0)]
    m = helper.make_model(helper.make_graph(nodes, "constant_output", [x], outs), ir_version=9,
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(HERE, "constant_output.onnx"))
    # the default domain spelled `ai.onnx`, as in many of ORT's transformers tests: ORT runs it, onnx.checker
    # refuses it (and so its optimized model) whatever the fusions do
    onnx.save(model(domain="ai.onnx"), os.path.join(HERE, "gelu_layernorm_ai_onnx.onnx"))
