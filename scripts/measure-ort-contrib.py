#!/usr/bin/env python3
"""Which dtypes ONNX Runtime's CPU provider runs for the com.microsoft ops in oatest's catalog (src/ops/contrib.rs,
src/ops/qcontrib.rs) and the quantized ai.onnx ops beside them (QLinearConv, QLinearMatMul).

Each op is built once per dtype (a small single-node model with graph inputs of that dtype), run with ORT at
ORT_DISABLE_ALL and ORT_ENABLE_ALL; the result is a TSV like docs/ort-cpu-dtypes.tsv:
op, dtype, disable_all, enable_all, note. A quantized op's dtype names its data inputs' types (`uint8,int8`: A is
uint8, B int8); its scales are float32 constants, its zero points and weights constants of their input's type.
Usage: .venv/bin/python scripts/measure-ort-contrib.py > docs/ort-contrib-dtypes.tsv
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h

DTYPES = {
    "float32": (T.FLOAT, np.float32),
    "float64": (T.DOUBLE, np.float64),
    "float16": (T.FLOAT16, np.float16),
    "int8": (T.INT8, np.int8),
    "uint8": (T.UINT8, np.uint8),
    "int32": (T.INT32, np.int32),
    "int64": (T.INT64, np.int64),
}

# op: (input shapes, attributes, output shape)
OPS = {
    "Gelu": ([[2, 3]], {}, [2, 3]),
    "FastGelu": ([[2, 3], [3]], {}, [2, 3]),
    "QuickGelu": ([[2, 3]], {"alpha": 1.702}, [2, 3]),
    "BiasGelu": ([[2, 3], [3]], {}, [2, 3]),
    "FusedMatMul": ([[2, 3], [3, 4]], {"alpha": 0.5}, [2, 4]),
    "FusedGemm": ([[2, 3], [3, 4], [4]], {"activation": "Relu"}, [2, 4]),
    "FusedConv": ([[1, 2, 4, 4], [3, 2, 3, 3], [3], [1, 3, 2, 2]], {"activation": "Relu"}, [1, 3, 2, 2]),
}


def model(op, dtype):
    shapes, attrs, out = OPS[op]
    names = [f"i{k}" for k in range(len(shapes))]
    node = h.make_node(op, names, ["y"], domain="com.microsoft", **attrs)
    ins = [h.make_tensor_value_info(n, DTYPES[dtype][0], s) for n, s in zip(names, shapes)]
    g = h.make_graph([node], op, ins, [h.make_tensor_value_info("y", DTYPES[dtype][0], out)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20), h.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    feeds = {n: (np.random.default_rng(0).standard_normal(s) * 2).astype(DTYPES[dtype][1]) for n, s in zip(names, shapes)}
    return m.SerializeToString(), feeds


QTYPES = ("uint8", "int8")
PAIRS = [f"{a},{b}" for a in QTYPES for b in QTYPES]


def _c(name, dtype, shape, values=None):
    """A constant of `dtype` (a DTYPES key): `values`, or small integers / positive scales."""
    rng = np.random.default_rng(1)
    np_type = DTYPES[dtype][1]
    if values is None:
        values = rng.integers(0, 5, shape) if np.issubdtype(np_type, np.integer) else rng.random(shape) + 0.5
    return h.make_tensor(name, DTYPES[dtype][0], shape, np.asarray(values, dtype=np_type).flatten().tolist())


def _q(prefix, dtype, shape=()):
    """(scale, zero point) constants of a quantized value: a float32 scale and a zero point of `dtype`."""
    return [_c(prefix + "_s", "float32", list(shape), np.full(shape, 0.05)), _c(prefix + "_z", dtype, list(shape))]


# op: (dtypes, builder(dtype) -> (node inputs, graph inputs [(name, dtype, shape)], constants, attrs, output dtype,
# output shape))
def _qlinear_matmul(t):
    a, b = t.split(",")
    consts = _q("a", a) + [_c("b", b, [3, 4])] + _q("b", b) + _q("y", a)
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "y_s", "y_z"]
    return names, [("a", a, [2, 3])], consts, {}, a, [2, 4]


def _qlinear_conv(t):
    x, w = t.split(",")
    consts = _q("x", x) + [_c("w", w, [3, 2, 3, 3])] + _q("w", w) + _q("y", x) + [_c("bias", "int32", [3])]
    names = ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z", "bias"]
    return names, [("x", x, [1, 2, 4, 4])], consts, {}, x, [1, 3, 2, 2]


def _qlinear_binary(t):
    consts = _q("a", t) + _q("b", t) + _q("c", t)
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"]
    return names, [("a", t, [2, 3]), ("b", t, [3])], consts, {}, t, [2, 3]


def _matmul_integer_to_float(t):
    a, b = t.split(",")
    consts = [_c("b", b, [3, 4]), _c("a_s", "float32", [], 0.05), _c("b_s", "float32", [4]), _c("a_z", a, []),
              _c("b_z", b, [4]), _c("bias", "float32", [4])]
    return ["a", "b", "a_s", "b_s", "a_z", "b_z", "bias"], [("a", a, [2, 3])], consts, {}, "float32", [2, 4]


def _dynamic_quantize_matmul(t):
    consts = [_c("b", t, [3, 4]), _c("b_s", "float32", [4]), _c("b_z", t, [4]), _c("bias", "float32", [4])]
    return ["a", "b", "b_s", "b_z", "bias"], [("a", "float32", [2, 3])], consts, {}, "float32", [2, 4]


def _qgemm(t):
    a, b = t.split(",")
    consts = _q("a", a) + [_c("b", b, [3, 4])] + _q("b", b) + [_c("c", "int32", [4])] + _q("y", a)
    names = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c", "y_s", "y_z"]
    return names, [("a", a, [2, 3])], consts, {}, a, [2, 4]


def _qlinear_pool(t):
    consts = _q("x", t) + _q("y", t)
    attrs = {"kernel_shape": [2, 2]}
    return ["x", "x_s", "x_z", "y_s", "y_z"], [("x", t, [1, 2, 4, 4])], consts, attrs, t, [1, 2, 3, 3]


def _qlinear_softmax(t):
    consts = _q("x", t) + _q("y", t)
    attrs = {"axis": -1, "opset": 13}
    return ["x", "x_s", "x_z", "y_s", "y_z"], [("x", t, [2, 3])], consts, attrs, t, [2, 3]


def _qlinear_concat(t):
    consts = _q("y", t) + _q("a", t) + _q("b", t)
    names = ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z"]
    return names, [("a", t, [2, 3]), ("b", t, [2, 1])], consts, {"axis": 1}, t, [2, 4]


def _nhwc_max_pool(t):
    return ["x"], [("x", t, [1, 4, 4, 2])], [], {"kernel_shape": [2, 2]}, t, [1, 3, 3, 2]


def _skip_layer_norm(t):
    consts = [_c("gamma", t, [4]), _c("beta", t, [4]), _c("bias", t, [4])]
    names = ["x", "skip", "gamma", "beta", "bias"]
    return names, [("x", t, [2, 3, 4]), ("skip", t, [2, 3, 4])], consts, {"epsilon": 1e-5}, t, [2, 3, 4]


def _attention(t):
    consts = [_c("w", t, [4, 12]), _c("bias", t, [12])]
    return ["x", "w", "bias"], [("x", t, [2, 3, 4])], consts, {"num_heads": 2}, t, [2, 3, 4]


QOPS = {
    "QLinearMatMul": ("", PAIRS, _qlinear_matmul),
    "QLinearConv": ("", PAIRS, _qlinear_conv),
    "QLinearAdd": ("com.microsoft", QTYPES, _qlinear_binary),
    "QLinearMul": ("com.microsoft", QTYPES, _qlinear_binary),
    "QLinearAveragePool": ("com.microsoft", QTYPES, _qlinear_pool),
    "QLinearSoftmax": ("com.microsoft", QTYPES, _qlinear_softmax),
    "QLinearConcat": ("com.microsoft", QTYPES, _qlinear_concat),
    "QGemm": ("com.microsoft", PAIRS, _qgemm),
    "MatMulIntegerToFloat": ("com.microsoft", PAIRS, _matmul_integer_to_float),
    "DynamicQuantizeMatMul": ("com.microsoft", QTYPES, _dynamic_quantize_matmul),
    "NhwcMaxPool": ("com.microsoft", QTYPES, _nhwc_max_pool),
    "SkipLayerNormalization": ("com.microsoft", ("float32", "float64", "float16"), _skip_layer_norm),
    "Attention": ("com.microsoft", ("float32", "float64", "float16"), _attention),
}


def qmodel(op, dtype):
    domain, _, build = QOPS[op]
    names, graph_inputs, consts, attrs, out_type, out_shape = build(dtype)
    node = h.make_node(op, names, ["y"], domain=domain, **attrs)
    ins = [h.make_tensor_value_info(n, DTYPES[t][0], s) for n, t, s in graph_inputs]
    out = h.make_tensor_value_info("y", DTYPES[out_type][0], out_shape)
    g = h.make_graph([node], op, ins, [out], initializer=consts)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20), h.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    rng = np.random.default_rng(0)
    feeds = {}
    for n, t, s in graph_inputs:
        np_type = DTYPES[t][1]
        feeds[n] = (rng.integers(0, 100, s) if np.issubdtype(np_type, np.integer) else rng.standard_normal(s)).astype(np_type)
    return m.SerializeToString(), feeds


def run(bytes_, feeds, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 3
    try:
        ort.InferenceSession(bytes_, so, providers=["CPUExecutionProvider"]).run(None, feeds)
        return "ok", ""
    except Exception as e:  # noqa: BLE001 - the message is the measurement
        text = str(e).splitlines()[0][:160]
        if "NOT_IMPLEMENTED" in text or "Could not find an implementation" in text:
            kind = "no-kernel"
        elif "Type Error" in text:
            kind = "spec-invalid"
        else:
            kind = "fails"
        return kind, text


def main():
    print(f"# ONNX Runtime {ort.__version__} CPU provider, com.microsoft ops: scripts/measure-ort-contrib.py")
    print("op\tdtype\tdisable_all\tenable_all\tnote")
    for op in OPS:
        for dtype in DTYPES:
            b, feeds = model(op, dtype)
            d, dm = run(b, feeds, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
            a, am = run(b, feeds, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
            print(f"{op}\t{dtype}\t{d}\t{a}\t{dm or am}")
    for op, (_, dtypes, _) in QOPS.items():
        for dtype in dtypes:
            b, feeds = qmodel(op, dtype)
            d, dm = run(b, feeds, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
            a, am = run(b, feeds, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
            print(f"{op}\t{dtype}\t{d}\t{a}\t{dm or am}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
