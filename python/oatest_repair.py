"""Cheap rewrites of ONNX models for pattern repair in extraction (`oatest extract ort`).

Usage: python oatest_repair.py OUT_DIR OPSET COMBINATIONS MODEL...

For every model, writes variants into OUT_DIR, one per set of rewrites (COMBINATIONS: `all`, every set below in
its order, or one set such as `opset` or `consume+concrete`), and prints one JSON object per variant
on stdout: {"model", "variant" (the file written, or null), "rewrites" (list), "error" (or null)}. Rewrites:

- ``consume``: every graph output gets a consumer (the value goes through ``Abs``, or ``Not`` for bool), so a
  fusion that refuses to rewrite a node producing a graph output can fire, and ``EliminateIdentity`` no longer
  removes a trailing Identity the test needed;
- ``concrete``: symbolic dims of the graph inputs become 2, intermediate types are dropped and inferred again;
- ``symbolic``: the dims of the graph inputs become symbolic (``d0``, ``d1``, ...), so shape computations are
  no longer folded to constants before a fusion over them (ReshapeFusion) sees them;
- ``opset``: the model is upgraded to ai.onnx OPSET with onnx's version converter (only below OPSET);
- ``unfold``: every integer scalar initializer a node reads, ``c``, is computed at run time as
  ``Clip(p, c, c)`` from a new scalar graph input ``p`` (``c`` whatever ``p`` holds), so a session's
  ConstantFolding leaves it to the fusion (a Range's operands: GatherToSliceFusion's test runs the fusion alone).

Every variant passes ``onnx.checker``; one that does not is reported with its error and not written.
"""

import copy
import json
import os
import sys

import onnx
from onnx import TensorProto, helper, shape_inference, version_converter

COMBINATIONS = [
    ["consume"],
    ["concrete"],
    ["consume", "concrete"],
    ["opset"],
    ["opset", "consume"],
    ["opset", "concrete"],
    ["opset", "consume", "concrete"],
    ["symbolic"],
    ["symbolic", "consume"],
    ["opset", "symbolic"],
    ["unfold"],
    ["opset", "unfold"],
]


def onnx_opset(m):
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def consume(m):
    g = m.graph
    for k, out in enumerate(g.output):
        pre = f"{out.name}__oatest_pre"
        for n in g.node:
            for i, x in enumerate(n.output):
                if x == out.name:
                    n.output[i] = pre
            for i, x in enumerate(n.input):
                if x == out.name:
                    n.input[i] = pre
        is_bool = out.type.tensor_type.elem_type == TensorProto.BOOL
        op = "Not" if is_bool else "Abs"
        g.node.append(helper.make_node(op, [pre], [out.name], name=f"oatest_consume_{k}"))
    return m


def concrete(m):
    g = m.graph
    for v in g.input:
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") or not d.HasField("dim_value"):
                d.dim_value = 2
    del g.value_info[:]
    for v in g.output:
        v.type.tensor_type.ClearField("shape")
    m = shape_inference.infer_shapes(m)
    # outputs take their inferred shapes back where inference knows them
    known = {v.name: v for v in m.graph.value_info}
    for v in m.graph.output:
        if v.name in known:
            v.type.CopyFrom(known[v.name].type)
    return m


def symbolic(m):
    g = m.graph
    inits = {t.name for t in g.initializer}
    k = 0
    for v in g.input:
        if v.name in inits:
            continue
        for d in v.type.tensor_type.shape.dim:
            d.dim_param = f"d{k}"
            k += 1
    if k == 0:
        raise ValueError("no input dims to make symbolic")
    del g.value_info[:]
    for v in g.output:
        for d in v.type.tensor_type.shape.dim:
            d.ClearField("dim_value")
            d.ClearField("dim_param")
    return m


def unfold(m):
    g = m.graph
    ints = {TensorProto.INT8, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT32,
            TensorProto.UINT64}
    read = {x for n in g.node for x in n.input}
    outputs = {o.name for o in g.output}
    scalars = [t for t in g.initializer
               if len(t.dims) == 0 and t.data_type in ints and t.name in read and t.name not in outputs]
    if not scalars:
        raise ValueError("no integer scalar initializer to unfold")
    if onnx_opset(m) < 12:
        raise ValueError("Clip takes integers from opset 12")
    front = []
    for t in scalars:
        p = f"oatest_unfold_{helper.tensor_dtype_to_np_dtype(t.data_type).name}"
        if p not in {i.name for i in g.input}:
            g.input.append(helper.make_tensor_value_info(p, t.data_type, []))
        c = t.name
        t.name = f"{c}__oatest_c"
        front.append(helper.make_node("Clip", [p, t.name, t.name], [c], name=f"oatest_unfold_{c}"))
    nodes = front + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    del g.value_info[:]
    return m


HOLD = "oatest.hold"


def held(m):
    """The nodes whose meaning the upgrade keeps but the converter cannot carry or rewrites needlessly: ONNX
    Runtime's LayerNormalization in the ONNX domain before opset 17 (ONNX's own since 17, same inputs and
    attributes; the converter has no adapter for it), and Softmax/LogSoftmax/Hardmax on the last axis (the same
    before and after opset 13, which the converter wraps in Flatten and Reshape anyway, hiding them from fusions)."""
    ranks = {}
    try:
        # shape inference stops at a LayerNormalization it has no schema for: infer with an Identity there
        probe = copy.deepcopy(m)
        for n in probe.graph.node:
            if n.op_type == "LayerNormalization" and n.domain in ("", "ai.onnx"):
                n.op_type, n.input[:], n.output[:] = "Identity", n.input[:1], n.output[:1]
                n.ClearField("attribute")
        inferred = shape_inference.infer_shapes(probe)
        for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
            if v.type.tensor_type.HasField("shape"):
                ranks[v.name] = len(v.type.tensor_type.shape.dim)
    except Exception:
        pass
    out = []
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        if n.op_type == "LayerNormalization":
            out.append(n)
        elif n.op_type in ("Softmax", "LogSoftmax", "Hardmax") and n.input[0] in ranks:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            if axis in (-1, ranks[n.input[0]] - 1):
                out.append(n)
    return out


def upgrade(m, opset):
    if onnx_opset(m) >= opset:
        raise ValueError(f"already at opset {onnx_opset(m)}")
    hold = held(m)
    if hold:
        m = copy.deepcopy(m)
        for n in held(m):
            n.domain = HOLD
        m.opset_import.append(helper.make_opsetid(HOLD, 1))
    up = version_converter.convert_version(m, opset)
    for n in up.graph.node:
        if n.domain == HOLD:
            n.domain = ""
            if n.op_type != "LayerNormalization":
                n.ClearField("attribute")
                n.attribute.append(helper.make_attribute("axis", -1))
    kept = [o for o in up.opset_import if o.domain != HOLD]
    del up.opset_import[:]
    up.opset_import.extend(kept)
    return constants_as_initializers(up)


def constants_as_initializers(m):
    """The converter writes moved attributes (Unsqueeze's axes, Slice's ends, ...) as Constant nodes; oatest's
    op catalog reads such operands from initializers."""
    g = m.graph
    keep = []
    for n in g.node:
        value = [a for a in n.attribute if a.name == "value"]
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(value) == 1 and len(n.output) == 1:
            t = onnx.TensorProto()
            t.CopyFrom(value[0].t)
            t.name = n.output[0]
            g.initializer.append(t)
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    return m


def toposort(m):
    """Nodes in dependency order (ORT accepts any order, the checker does not)."""
    g = m.graph
    known = {i.name for i in g.input} | {t.name for t in g.initializer} | {""}
    todo, done = list(g.node), []
    while todo:
        ready = [n for n in todo if all(x in known for x in n.input)]
        if not ready:
            return m  # a cycle or an outer-scope name: leave it to the checker
        for n in ready:
            known.update(n.output)
        done += ready
        todo = [n for n in todo if n not in ready]
    del g.node[:]
    g.node.extend(done)
    return m


def variants(path, out_dir, opset, index, combinations):
    base = toposort(onnx.load(path))
    for combo in combinations:
        row = {"model": path, "variant": None, "rewrites": combo, "error": None}
        try:
            m = copy.deepcopy(base)
            for r in combo:
                m = {"consume": consume, "concrete": concrete, "symbolic": symbolic, "unfold": unfold,
                     "opset": lambda x: upgrade(x, opset)}[r](m)
            # values a rewrite introduced get their types declared (oatest's splicing types every value)
            m = shape_inference.infer_shapes(m)
            onnx.checker.check_model(m)
            name = os.path.join(out_dir, f"{index}-{'+'.join(combo)}.onnx")
            onnx.save(m, name)
            row["variant"] = name
        except Exception as e:  # noqa: BLE001 - any failure of a rewrite is a reported verdict
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        print(json.dumps(row), flush=True)


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: oatest_repair.py OUT_DIR OPSET COMBINATIONS MODEL...")
    out_dir, opset = sys.argv[1], int(sys.argv[2])
    combinations = COMBINATIONS if sys.argv[3] == "all" else [sys.argv[3].split("+")]
    os.makedirs(out_dir, exist_ok=True)
    for i, path in enumerate(sys.argv[4:]):
        try:
            variants(path, out_dir, opset, i, combinations)
        except Exception as e:  # noqa: BLE001
            print(json.dumps({"model": path, "variant": None, "rewrites": [], "error": f"cannot load: {e}"}))


if __name__ == "__main__":
    main()
