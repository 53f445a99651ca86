#!/usr/bin/env python3
"""Which dtypes ONNX Runtime's CPU provider runs for the com.microsoft ops in oatest's catalog (src/ops/contrib.rs).

Each op is built once per dtype (a small single-node model with graph inputs of that dtype), run with ORT at
ORT_DISABLE_ALL and ORT_ENABLE_ALL; the result is a TSV like docs/ort-cpu-dtypes.tsv:
op, dtype, disable_all, enable_all, note. Usage: .venv/bin/python scripts/measure-ort-contrib.py > docs/ort-contrib-dtypes.tsv
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
