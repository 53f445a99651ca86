"""Each op spec's shape and dtype inference against what onnxruntime actually outputs (and onnx's checker)."""
from __future__ import annotations

import collections
import json

import numpy as np
import onnx
import pytest

import ortcheck


@pytest.fixture(scope="module")
def selftest(oatest, tmp_path_factory):
    out = tmp_path_factory.mktemp("ops")
    oatest("ops", "selftest", "--out", out, "--per-op", 6, "--seed", 11)
    return out, json.loads((out / "manifest.json").read_text())


def test_every_catalog_op_has_cases(oatest, selftest):
    _, cases = selftest
    listed = set(json.loads(oatest("ops", "list", "--json").stdout))
    assert len(listed) >= 40
    assert {c["op"] for c in cases} == listed


def test_inferred_output_types_match_onnxruntime(selftest):
    out, cases = selftest
    wrong = collections.defaultdict(list)
    for c in cases:
        path = out / c["file"]
        problem = ortcheck.check_one(path, levels=("disable",))
        if problem:
            wrong[c["op"]].append(f"{c['file']}: {problem}")
            continue
        for level in ("disable", "all"):
            got = ortcheck.run(path, level)
            for want, arr in zip(c["outputs"], got):
                arr = np.asarray(arr)
                if list(arr.shape) != want["shape"] or arr.dtype.name != want["dtype"]:
                    wrong[c["op"]].append(
                        f"{c['file']} ({level}) {want['name']}: inferred {want['dtype']}{want['shape']}, "
                        f"onnxruntime gave {arr.dtype.name}{list(arr.shape)}"
                    )
    assert not wrong, "\n".join(f"{op}: {msgs[:3]}" for op, msgs in sorted(wrong.items()))
