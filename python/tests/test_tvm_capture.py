"""`oatest extract tvm` on a small fixture suite (python/fixtures/tvm_suite): the capture plugin sees passes
called directly and inside a Sequential, keeps only patterns whose pass still fires on the closed module,
records provenance, and reports the failing test."""
from __future__ import annotations

import json
import pathlib

from conftest import ROOT

SUITE = ROOT / "python" / "fixtures" / "tvm_suite"


def test_extract_tvm_on_the_fixture_suite(oatest, tmp_path):
    out = tmp_path / "patterns"
    p = oatest("extract", "tvm", "--tests", SUITE, "--out", out, "--jobs", "1")
    assert "unique verified patterns" in p.stdout, p.stdout + p.stderr
    pats = [json.loads(f.read_text()) for f in out.rglob("*.json") if f.name != "extraction.json"]
    passes = {x["pass"] for x in pats}
    assert {"LegalizeOps", "FuseOps", "AnnotateTIROpPattern"} <= passes, passes
    assert "DeadCodeElimination" in passes or "LegalizeOps" in passes  # the Sequential's passes are seen too
    # a pass that changed nothing yields no pattern; the FoldConstant patterns come from the constant-folding test
    # and carry their tensor constant in the script's metadata section, which parses back
    folds = [x for x in pats if x["pass"] == "FoldConstant"]
    assert folds and all(x["provenance"]["function"] == "test_fold_a_tensor_constant" for x in folds), folds
    assert any("metadata[" in x["script"] for x in folds)
    for x in pats:
        assert x["kind"] == "tvm-relax" and x["format"] == 1
        assert x["provenance"]["file"] == "test_transform_fixture.py"
        assert x["provenance"]["function"].startswith("test_")
        assert "def main" in x["script"] or "def " in x["script"]
        assert x["granularity"] in ("subgraph", "block")
    report = json.loads((out / "extraction.json").read_text())
    failed = [t["test"] for f in report["files"] for t in f["failed_tests"]]
    assert any("test_fails_on_purpose" in t for t in failed), report
    stats = json.loads(oatest("patterns", "stats", "--json", out).stdout)
    assert stats["total"] == len(pats) and stats["per_compiler"] == {"tvm": len(pats)}
