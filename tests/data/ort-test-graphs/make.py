"""Writes ONNX transcriptions of graphs that ONNX Runtime's own C++ optimizer tests build in code (no model file
exists for them), each named after its test, so that `oatest extract ort --models tests/data/ort-test-graphs`
can extract patterns from them like from any corpus model. Each graph is the test's graph as its builder makes
it: the same ops, wiring, shapes, dtypes and attributes; initializer values are drawn as the test draws them
(ModelTestBuilder's uniform ranges), here from numpy's generator with seed 0. Written at ai.onnx opset 20 (the
campaigns' seed opset; the tests build at ORT's latest opset, and every op below means the same at 20 for
these dtypes). PAIRS-from-test-sources.tsv names the pass each test checks.

Sources (ONNX Runtime, MIT, see ../ort-transform-testdata/NOTICE):
  qdq_transformer_test/WhereDummyDqTest_*.onnx: onnxruntime/test/optimizer/qdq_transformer_test.cc,
    TEST(QDQTransformerTests, WhereDummyDqTest), TestWhereWithDqInput<float, uint8_t, uint8_t>(true, false, ...)
    and (false, true, ...): cond, DQ(xq), scalar -> Where -> Q, the cases where WhereDummyDq modifies the graph.

Run with the project's .venv: .venv/bin/python tests/data/ort-test-graphs/make.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def where_dummy_dq(is_dq_1: bool, is_dq_2: bool) -> onnx.ModelProto:
    """TestWhereWithDqInput<float, uint8_t, uint8_t>(is_dq_1, is_dq_2, ...)."""
    rng = np.random.default_rng(0)
    inits, nodes, inputs = [], [], []

    def scalar(name, dtype, value):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def branch(k: int, is_dq: bool) -> str:
        if not is_dq:
            # builder.MakeInitializer<float>({}, 0.0, 1.0)
            return scalar(f"where_in{k}", np.float32, rng.uniform(0.0, 1.0))
        # builder.MakeInput<uint8_t>({4, 3, 32}, 0, 1); MakeInitializer<float>({}, 0, 1); <uint8_t>({}, 0, 1)
        inputs.append(helper.make_tensor_value_info(f"dq_input{k}", TensorProto.UINT8, [4, 3, 32]))
        s = scalar(f"dq_scale{k}", np.float32, rng.uniform(0.0, 1.0))
        z = scalar(f"dq_zp{k}", np.uint8, rng.integers(0, 2))
        nodes.append(helper.make_node("DequantizeLinear", [f"dq_input{k}", s, z], [f"where_in{k}"], name=f"dq{k}"))
        return f"where_in{k}"

    x, y = branch(1, is_dq_1), branch(2, is_dq_2)
    inputs.append(helper.make_tensor_value_info("where_cond", TensorProto.BOOL, [4, 3, 32]))
    nodes.append(helper.make_node("Where", ["where_cond", x, y], ["where_out"], name="where"))
    qs = scalar("q_scale", np.float32, rng.uniform(0.0, 1.0))
    qz = scalar("q_zp", np.uint8, rng.integers(0, 2))
    nodes.append(helper.make_node("QuantizeLinear", ["where_out", qs, qz], ["q_out"], name="q"))
    out = helper.make_tensor_value_info("q_out", TensorProto.UINT8, [4, 3, 32])
    graph = helper.make_graph(nodes, "WhereDummyDqTester", inputs, [out], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    m.doc_string = (
        "onnxruntime/test/optimizer/qdq_transformer_test.cc TEST(QDQTransformerTests, WhereDummyDqTest): "
        f"TestWhereWithDqInput<float, uint8_t, uint8_t>({str(is_dq_1).lower()}, {str(is_dq_2).lower()}, ...)"
    )
    onnx.checker.check_model(m, full_check=True)
    return m


def main() -> None:
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else HERE, "qdq_transformer_test")
    os.makedirs(out, exist_ok=True)
    for name, dq1, dq2 in [("WhereDummyDqTest_dq_scalar", True, False), ("WhereDummyDqTest_scalar_dq", False, True)]:
        onnx.save(where_dummy_dq(dq1, dq2), os.path.join(out, f"{name}.onnx"))


if __name__ == "__main__":
    main()
