"""What scripts/onnx-op-since.py and scripts/onnx-op-forms.py share: the ai.onnx ops of opset 20 and, for one op,
its schemas from opset 20's back to the oldest."""
from onnx import defs

TOP = 20


def ops_at_top():
    """(name, schema) of every ai.onnx op opset TOP has and does not deprecate, by name."""
    for name in sorted({s.name for s in defs.get_all_schemas_with_history() if s.domain == ""}):
        try:
            top = defs.get_schema(name, TOP, "")
        except Exception:
            continue
        if not top.deprecated:
            yield name, top


def schemas_back(name):
    """The schemas of op `name` from opset TOP's back to its first, newest first."""
    v = TOP
    while v >= 1:
        try:
            s = defs.get_schema(name, v, "")
        except Exception:
            return
        yield s
        v = s.since_version - 1
