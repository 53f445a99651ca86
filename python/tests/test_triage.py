"""Triage on a real ONNX Runtime bug: a SIGSEGV of onnxruntime 1.31.1 at ORT_ENABLE_ALL that oatest's random
campaign found (seed 1, test 23303). `oatest reduce` must shrink it to a few nodes and name its culprit passes;
the generated repro.py must exit 1 while the bug exists and 0 when it is gone; the exported regression suite
must pass unoptimized and fail optimized."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def crash_bug(oatest, tmp_path_factory) -> pathlib.Path:
    tmp = tmp_path_factory.mktemp("crash")
    oatest("seeds", "gen", "--count", "23304", "--seed", "1", "--out", tmp / "seeds")
    model = tmp / "seeds" / "seed_23303.onnx"
    out = tmp / "bug"
    oatest("reduce", model, "--target", "ort", "--out", out)
    return out


def test_the_crash_is_minimized_with_its_culprits(crash_bug):
    bug = json.loads((crash_bug / "bug.json").read_text())
    t = bug["triage"]
    assert bug["symptom"] == "crash"
    assert t["confirmed"]
    assert t["nodes"] <= 5 < t["original_nodes"], t
    # the crashing pass never logs that it fired: culprits come from every pass that runs at the level
    assert "MatmulTransposeFusion" in t["culprits"], t
    report = (crash_bug / "report.md").read_text()
    assert "crash" in report and "MatMul" in report


def run_repro(path: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)


def test_repro_py_exits_1_while_the_bug_exists_and_0_without_it(crash_bug, tmp_path):
    p = run_repro(crash_bug / "repro.py")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "REPRODUCED: crash" in p.stdout
    # the same script with the optimized configuration replaced by the reference: nothing to reproduce
    fixed = tmp_path / "bug"
    shutil.copytree(crash_bug, fixed)
    text = (fixed / "repro.py").read_text()
    assert '"level": "all"' in text
    (fixed / "repro.py").write_text(text.replace('"level": "all"', '"level": "disable"'))
    p = run_repro(fixed / "repro.py")
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_exported_suite_passes_unoptimized_and_catches_the_bug_optimized(oatest, crash_bug, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(crash_bug, run / "bugs" / "crash")
    oatest("export", run, "--out", tmp_path / "suite")
    suite = tmp_path / "suite"
    assert (suite / "bug_crash" / "test_data_set_0" / "output_0.pb").exists()
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite / "test_oatest_regression.py")]
    env = dict(os.environ)
    env.pop("OATEST_LEVEL", None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=suite)
    assert p.returncode == 0, p.stdout + p.stderr
    env["OATEST_LEVEL"] = "all"
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=suite)
    assert p.returncode == 1 and "bug_crash" in p.stdout, p.stdout + p.stderr
