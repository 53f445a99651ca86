"""Writes data/onnx-op-since.tsv: for every ai.onnx op of opset 20, the lowest opset from which its schema's
inputs, outputs, attributes and type constraints (float8 and 4-bit types aside, which oatest never generates)
are those of opset 20. A test written at a lower opset (a pattern kept at its own opset) avoids the ops whose
entry is above it. Run with the project's .venv: .venv/bin/python scripts/onnx-op-since.py > data/onnx-op-since.tsv
"""
import onnx
from onnx import defs

TOP = 20
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
names = sorted({s.name for s in defs.get_all_schemas_with_history() if s.domain == ""})
for name in names:
    try:
        top = defs.get_schema(name, TOP, "")
    except Exception:
        continue
    if top.deprecated:
        continue
    since = top.since_version
    v = since - 1
    while v >= 1:
        try:
            s = defs.get_schema(name, v, "")
        except Exception:
            break
        if signature(s) != signature(top):
            break
        since = s.since_version
        v = s.since_version - 1
    print(f"{name}\t{since}")
