#!/usr/bin/env python3
"""Measures which (op, dtype) pairs of oatest's op catalog TVM's ONNX frontend and Relax build refuse, and
writes docs/tvm-unsupported.tsv, which the seed generator avoids for --target tvm.

    oatest ops selftest --out DIR --per-op 8
    oatest run DIR --target tvm --config disable --json --jobs 2 > runs.jsonl
    python scripts/measure-tvm-support.py DIR runs.jsonl > docs/tvm-unsupported.tsv

A dtype is blamed when a single-op model whose node touches it fails at the unoptimized reference and no
passing model of the same op touches it; an op whose every model fails is avoided entirely (dtype `*`).
"""
import collections
import json
import os
import sys

import onnx


def node_dtypes(path):
    m = onnx.load(path)
    types = {}
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        types[vi.name] = vi.type.tensor_type.elem_type
    for init in m.graph.initializer:
        types[init.name] = init.data_type
    n = m.graph.node[0]
    return {onnx.helper.tensor_dtype_to_np_dtype(types[v]).name if types.get(v) else None
            for v in list(n.input) + list(n.output) if v and types.get(v)} - {None}


def main(models_dir, runs):
    manifest = {c["file"]: c["op"] for c in json.load(open(os.path.join(models_dir, "manifest.json")))}
    ok, bad, example = collections.defaultdict(set), collections.defaultdict(set), {}
    total = collections.Counter()
    failed = collections.Counter()
    for line in open(runs):
        r = json.loads(line)
        if "status" not in r or r.get("config") != "disable":
            continue
        f = os.path.basename(r["model"])
        op = manifest.get(f)
        if op is None:
            continue
        dts = node_dtypes(r["model"])
        total[op] += 1
        if r["status"] == "ok":
            ok[op] |= dts
        else:
            failed[op] += 1
            bad[op] |= dts
            example.setdefault(op, r["message"].replace("\t", " ").replace("\n", " ")[:160])
    print("# op\tdtype\tfailed/total\texample message (TVM's from_onnx or Relax build at the reference)")
    for op in sorted(total):
        if failed[op] == 0:
            continue
        if failed[op] == total[op]:
            print(f"{op}\t*\t{failed[op]}/{total[op]}\t{example[op]}")
            continue
        for d in sorted(bad[op] - ok[op]):
            print(f"{op}\t{d}\t{failed[op]}/{total[op]}\t{example[op]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
