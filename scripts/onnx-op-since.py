"""Writes data/onnx-op-since.tsv: for every ai.onnx op of opset 20, the lowest opset from which its schema's
inputs, outputs, attributes and type constraints (float8 and 4-bit types aside, which oatest never generates)
are those of opset 20. A test written at a lower opset (a pattern kept at its own opset) avoids the ops whose
entry is above it. Run with the project's .venv: .venv/bin/python scripts/onnx-op-since.py > data/onnx-op-since.tsv
"""
import onnx
from onnx_schemas import TOP, ops_at_top, schemas_back
SKIP = ("float8", "float4", "int4", "uint4", "int2", "uint2")


def signature(s):
    types = tuple(
        (t.type_param_str, tuple(sorted(x for x in t.allowed_type_strs if not any(k in x for k in SKIP))))
        for t in s.type_constraints
    )
    ins = tuple((i.name, i.type_str, int(i.option)) for i in s.inputs)
    outs = tuple((o.name, o.type_str, int(o.option)) for o in s.outputs)
    return ins, outs, tuple(sorted(s.attributes)), types


print(f"# onnx {onnx.__version__}: op<TAB>lowest opset whose schema matches opset {TOP}'s (scripts/onnx-op-since.py)")
for name, top in ops_at_top():
    since = top.since_version
    for s in schemas_back(name):
        if signature(s) != signature(top):
            break
        since = s.since_version
    print(f"{name}\t{since}")
