"""The pytest capture plugin records every model a test suite opens an ONNX Runtime session on."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import onnx

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_plugin_captures_models_options_and_survives_failing_tests(tmp_path):
    env = dict(os.environ, OATEST_CAPTURE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "python"))
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "oatest_capture", "-p", "no:cacheprovider",
         str(ROOT / "python" / "fixtures" / "ort_suite")],
        env=env, capture_output=True, text=True, cwd=ROOT,
    )
    assert p.returncode == 1, "the fixture suite has one failing test on purpose"
    lines = [json.loads(x) for x in (tmp_path / "captures.jsonl").read_text().splitlines()]
    tests = {x["test"].split("::")[-1] for x in lines}
    assert tests == {"test_identity_chain_from_bytes", "test_conv_relu_from_a_path_with_options", "test_that_fails_after_capturing"}
    conv = next(x for x in lines if x["test"].endswith("test_conv_relu_from_a_path_with_options"))
    assert conv["config"] == {"session.disable_prepacking": "1"}
    assert conv["level"] == 99
    for x in lines:
        m = onnx.load(str(tmp_path / x["model"]))
        onnx.checker.check_model(m)
    assert not list(tmp_path.glob(".tmp-*")), "captures are written atomically"


def test_without_the_environment_variable_the_plugin_does_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OATEST_CAPTURE_DIR"}
    env["PYTHONPATH"] = str(ROOT / "python")
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "oatest_capture", "-p", "no:cacheprovider", "-k", "bytes",
         str(ROOT / "python" / "fixtures" / "ort_suite")],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert not list(tmp_path.iterdir())
