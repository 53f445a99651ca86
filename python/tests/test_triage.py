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


def test_repro_py_exits_2_when_it_fails_itself(crash_bug, tmp_path):
    """A failure of the script itself (here: a case without its time limit) is exit 2, never the 1 of a
    reproduced bug."""
    broken = tmp_path / "bug"
    shutil.copytree(crash_bug, broken)
    text = (broken / "repro.py").read_text()
    assert '"timeout_s": ' in text
    (broken / "repro.py").write_text(text.replace('"timeout_s": ', '"no_such_key": '))
    p = run_repro(broken / "repro.py")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "repro.py itself failed" in p.stdout


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


def report_snippet(report: str) -> str:
    """The onnxruntime-only Python snippet of an ORT report's "To reproduce" section."""
    section = report.split("### To reproduce", 1)[1].split("### Urgency", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_report_follows_ort_s_template_and_its_snippet_shows_the_crash(crash_bug):
    report = (crash_bug / "report.md").read_text()
    headings = ["### Describe the issue", "### To reproduce", "### Urgency", "### Platform", "### OS Version",
                "### ONNX Runtime Installation", "### ONNX Runtime Version or Commit ID", "### ONNX Runtime API",
                "### Architecture", "### Execution Provider", "<details>"]
    at = [report.find(h) for h in headings]
    assert -1 not in at and at == sorted(at), list(zip(headings, at))
    for level in ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL"):
        assert f"({level}) |" in report, level
    # the snippet runs the unoptimized session, then crashes in the optimized one (killed by a signal)
    script = crash_bug / "snippet.py"
    script.write_text(report_snippet(report))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=crash_bug)
    assert p.returncode < 0, (p.returncode, p.stdout, p.stderr)


def full_check(path: pathlib.Path) -> None:
    """onnx.checker with full_check (shape inference too). Only for models whose nodes are all in ONNX's own
    domains: ONNX Runtime's contrib ops (com.microsoft) are unknown to onnx, so a model using them can only be
    checked structurally; this helper refuses those rather than pretend."""
    import onnx

    m = onnx.load(str(path))
    domains = {n.domain for n in m.graph.node}
    assert domains <= {"", "ai.onnx"}, f"{path}: full_check only covers ai.onnx models, this one uses {domains}"
    onnx.checker.check_model(m, full_check=True)


def test_the_minimized_crash_passes_the_full_onnx_checker(crash_bug):
    full_check(crash_bug / "model.onnx")


def test_a_minimized_model_loses_unused_functions_and_imports_and_passes_the_full_checker(oatest, tmp_path):
    """A fault-target model (FuseSigmoid makes its optimized run wrong) carrying a local function nobody calls,
    imported at opset 18 while the model uses 20 (the checker refuses that), and an unused domain import:
    reduction must drop both, leaving a model onnx's full check accepts."""
    import onnx
    from onnx import TensorProto, helper

    f32 = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [4, 6])  # noqa: E731
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
         helper.make_node("Neg", ["b"], ["y"])],
        "g", [f32("x")], [f32("y")])
    unused = helper.make_function("lib", "Unused", ["t"], ["s"], [helper.make_node("Shape", ["t"], ["s"])],
                                  [helper.make_opsetid("", 18)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("lib", 1)],
                              functions=[unused], ir_version=9)
    for k, v in {"oatest.fault": "wrong", "oatest.fault.needs": "FuseSigmoid"}.items():
        model.metadata_props.add(key=k, value=v)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(tmp_path / "m.onnx"))
    oatest("reduce", tmp_path / "m.onnx", "--target", "fault", "--out", tmp_path / "bug")
    reduced = onnx.load(str(tmp_path / "bug" / "model.onnx"))
    assert [n.op_type for n in reduced.graph.node] == ["Sigmoid"]
    assert not reduced.functions and {o.domain for o in reduced.opset_import} == {""}
    full_check(tmp_path / "bug" / "model.onnx")


def test_a_bug_under_free_dimension_overrides_reduces_and_its_repro_sets_them(oatest, crash_bug, tmp_path):
    """The same crash with the model's input dims freed to the names `all+free_dims` overrides (n1..n5, as a
    campaign runs a test rotated to that configuration): reduction still works (the op catalog infers types at
    the override sizes), the minimized model keeps its symbolic input dims, and repro.py and the report's snippet
    set the overrides, so a maintainer runs what the campaign ran (FreeDimensionOverrideTransformer included)."""
    import onnx

    m = onnx.load(str(crash_bug.parent / "seeds" / "seed_23303.onnx"))
    for i in m.graph.input:
        for d in i.type.tensor_type.shape.dim:
            if 1 <= d.dim_value <= 5:
                d.dim_param = f"n{d.dim_value}"  # setting dim_param clears dim_value (a oneof)
    onnx.save(m, str(tmp_path / "free.onnx"))
    out = tmp_path / "bug"
    oatest("reduce", tmp_path / "free.onnx", "--target", "ort", "--config", "disable", "--config", "all+free_dims",
           "--out", out)
    t = json.loads((out / "bug.json").read_text())["triage"]
    assert t["nodes"] <= 5 < t["original_nodes"], t
    reduced = onnx.load(str(out / "model.onnx"))
    params = {d.dim_param for i in reduced.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    assert params and params <= {f"n{k}" for k in range(1, 6)}, reduced.graph.input
    text = (out / "repro.py").read_text()
    assert '"free_dims": [' in text and '"n3",' in text, text[:2000]
    p = run_repro(out / "repro.py")
    assert p.returncode == 1 and "REPRODUCED: crash" in p.stdout, p.stdout + p.stderr
    snippet = report_snippet((out / "report.md").read_text())
    assert 'so.add_free_dimension_override_by_name("n3", 3)' in snippet, snippet
