"""Writes data/onnx-op-forms.tsv: for every ai.onnx op of opset 20, each schema version back from opset 20's with
the same form (input and output names and options, attribute names) and the dtypes each input and output allows
there. A node written for opset 20 is then also a node of an older opset X when its op's schema at X has that
form and allows its dtypes (Add on float32 at opset 9; not Add on int8, which came at 14): synthesis puts such
patterns into tests written at X. Softmax, LogSoftmax and Hardmax kept their form at 13 but changed meaning, so
they are left out, and Max, Min, Mean and Sum broadcast only from 8.
Run with the project's .venv: .venv/bin/python scripts/onnx-op-forms.py > data/onnx-op-forms.tsv
"""
import onnx
from onnx_schemas import TOP, ops_at_top, schemas_back
MEANING_CHANGED = {"Softmax", "LogSoftmax", "Hardmax"}
# same form, but no multidirectional broadcasting before 8
BROADCAST_SINCE = {"Max": 8, "Min": 8, "Mean": 8, "Sum": 8}
# onnx's type names -> TensorProto codes (what DType::from_onnx reads)
CODES = {
    name.lower(): getattr(onnx.TensorProto, name)
    for name in ("FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16",
                 "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16")
}


def form(s):
    ins = tuple((i.name, int(i.option)) for i in s.inputs)
    outs = tuple((o.name, int(o.option)) for o in s.outputs)
    return ins, outs, tuple(sorted(s.attributes))


def codes(s, type_str):
    allowed = {t.type_param_str: t.allowed_type_strs for t in s.type_constraints}.get(type_str, [type_str])
    out = set()
    for t in allowed:
        if t.startswith("tensor(") and t[7:-1] in CODES:
            out.add(CODES[t[7:-1]])
    return ",".join(str(c) for c in sorted(out)) or "-"


print(f"# onnx {onnx.__version__}: op<TAB>opset<TAB>input dtypes|...<TAB>output dtypes|... (TensorProto codes; the last")
print("# entry of a variadic list repeats): older schemas with opset 20's form (scripts/onnx-op-forms.py)")
for name, top in ops_at_top():
    if name in MEANING_CHANGED:
        continue
    rows = []
    for s in schemas_back(name):
        if s.deprecated or form(s) != form(top) or s.since_version < BROADCAST_SINCE.get(name, 0):
            break
        ins = "|".join(codes(s, i.type_str) for i in s.inputs) or "-"
        outs = "|".join(codes(s, o.type_str) for o in s.outputs) or "-"
        rows.append(f"{name}\t{s.since_version}\t{ins}\t{outs}")
    for r in reversed(rows):
        print(r)
