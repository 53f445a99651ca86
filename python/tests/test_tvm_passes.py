"""Passes as data (python/oatest_tvm_passes.py): a pass call's arguments recorded and rebuilt, and a pass
outside the pipeline inserted at its placement for a test carrying one of its patterns, run at every level and
left out when a configuration disables it (delta debugging's probes)."""
from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from onnx import TensorProto

tvm = pytest.importorskip("tvm", reason="apache-tvm is installed by scripts/setup.sh")
from tvm import relax  # noqa: E402
from tvm.relax.dpl import is_op, wildcard  # noqa: E402

import oatest_tvm as T  # noqa: E402
import oatest_tvm_passes as P  # noqa: E402
from test_tvm_synth import seed_model  # noqa: E402

LIBRARY = os.path.join(os.path.dirname(__file__), "..", "..", "patterns", "tvm")


def test_fusion_patterns_round_trip_and_python_checks_are_flagged():
    conv = is_op("relax.nn.conv2d")(wildcard(), wildcard())
    args = P.encode_args("FuseOpsByPattern", ([("dnnl.conv2d", conv)],), {"annotate_codegen": True})
    assert json.loads(json.dumps(args)) == args, "JSON"
    assert args["annotate_codegen"] is True and args["patterns"]["list"][0]["check_dropped"] is False
    rebuilt = P.make_pass("FuseOpsByPattern", args)
    assert rebuilt.info.name == "FuseOpsByPattern"
    checked = P.encode_args("FuseOpsByPattern", ([("dnnl.conv2d", conv, {}, lambda ctx: True)],), {})
    assert checked["patterns"]["list"][0]["check_dropped"] is True
    with pytest.raises(P.Unexpressible, match="callable"):
        P.encode_args("ConvertLayout", ({"relax.nn.conv2d": ["NHWC", "OHWI"]}, lambda call: None), {})
    tensors = P.encode_args("BindParams", ("main", {"w": np.arange(6, dtype="float32").reshape(2, 3)}), {})
    back = P._decode(tensors["params"])["w"]
    np.testing.assert_array_equal(back, np.arange(6, dtype="float32").reshape(2, 3))


def test_placement_puts_each_pass_where_the_data_says():
    base = T.passes_for("all", [])
    fused = P.insert(base, "FuseOpsByPattern")
    assert fused.index("FuseOpsByPattern") == fused.index("LegalizeOps") - 1
    altered = P.insert(base, "AlterOpImpl")
    assert altered.index("AlterOpImpl") == altered.index("LegalizeOps") + 1
    assert "FuseOpsByPattern" not in T.passes_for("disable", [], "FuseOpsByPattern"), "the reference leaves it out"
    assert "FuseOpsByPattern" not in T.passes_for("all", ["FuseOpsByPattern"], "FuseOpsByPattern"), "DD disables it"
    assert "FuseOpsByPattern" in T.passes_for("basic", [], "FuseOpsByPattern")
    for name in P.PLACEMENT:
        assert name not in dict(T.PIPELINE), name
        assert P.PLACEMENT[name][1] in dict(T.PIPELINE), name


def _library(pass_name: str, with_args: bool) -> list[dict]:
    out = []
    for f in sorted(glob.glob(os.path.join(LIBRARY, pass_name, "*.json"))):
        d = json.load(open(f))
        if (d.get("pass_args") is not None) == with_args:
            out.append(d)
    return out


X = np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)
WIRE = [("x", TensorProto.FLOAT, [4, 5], X.tobytes())]


def _run(d: dict, level: str, disabled=()):
    recipe = {"seed_onnx": seed_model().hex(), "pattern": d["script"], "rng": 1, "pass": d["pass"]}
    if d.get("pass_args") is not None:
        recipe["pass_args"] = d["pass_args"]
    return T.run(json.dumps(recipe).encode(), WIRE, level, list(disabled))


def _same(a, b):
    assert [o[0] for o in a["outputs"]] == [o[0] for o in b["outputs"]]
    for (_, code, dims, x), (_, _, _, y) in zip(a["outputs"], b["outputs"]):
        np.testing.assert_allclose(np.frombuffer(x, "float32"), np.frombuffer(y, "float32"), rtol=1e-5, atol=1e-6)


def test_a_fuse_ops_by_pattern_pattern_runs_through_its_own_pass_with_its_recorded_arguments():
    fired = 0
    for d in _library("FuseOpsByPattern", with_args=True)[:6]:
        ref = _run(d, "disable")
        if ref["status"] != "ok":
            continue  # the campaign's check leaves such patterns out
        for level in T.LEVELS[1:]:
            opt = _run(d, level)
            assert opt["status"] == "ok", opt["message"]
            assert "FuseOpsByPattern" in opt["ran"]
            fired += "FuseOpsByPattern" in opt["fired"]
            _same(ref, opt)
        off = _run(d, "all", ["FuseOpsByPattern"])
        assert "FuseOpsByPattern" not in off["ran"]
    assert fired > 0, "FuseOpsByPattern, built from a test's arguments, changes a spliced pattern"


def test_a_merge_composite_functions_pattern_runs_through_its_own_pass():
    """MergeCompositeFunctions' patterns hold the composite functions FuseOpsByPattern made in the test; spliced
    into a seed, the pass runs after the seed's graph rewrites. TVM 0.27's MergeCompositeFunctions fails on a
    main that also calls a plain private function (`Variable ... could not be found in any group`), so the
    pattern's body is inlined into main (`inline_pattern` in the pipeline data), its composite functions kept:
    the pass merges them, and leaving it out (delta debugging's probe) runs clean."""
    for d in _library("MergeCompositeFunctions", with_args=False)[:3]:
        ref = _run(d, "disable")
        assert ref["status"] == "ok", ref["message"]
        opt = _run(d, "all")
        assert opt["status"] == "ok" and "MergeCompositeFunctions" in opt["fired"], opt["message"]
        _same(ref, opt)
        off = _run(d, "all", ["MergeCompositeFunctions"])
        assert off["status"] == "ok", off["message"]
        assert "MergeCompositeFunctions" not in off["ran"]
        _same(ref, off)


def test_bind_params_binds_only_the_parameters_fed_their_constants():
    """Synthesis feeds a bound parameter its constant only when the two have one type; a shrunk pattern's
    parameters do not take its test's constants, and binding them anyway changed the pattern's output shapes
    (a campaign filed 10 such findings). Unshrunk, the pass binds and computes what the reference does."""
    import oatest_tvm_check as C

    fired = shrunk = 0
    for d in _library("BindParams", with_args=True)[:8]:
        ref = _run(d, "disable")
        if ref["status"] != "ok":
            continue  # the campaign's check leaves such patterns out
        opt = _run(d, "all")
        assert opt["status"] == "ok", opt["message"]
        fired += "BindParams" in opt["fired"]
        assert [o[2] for o in opt["outputs"]] == [o[2] for o in ref["outputs"]]
        small = C.shrink(d["script"])
        if small is None:
            continue
        d = {**d, "script": small}
        ref, opt = _run(d, "disable"), _run(d, "all")
        if ref["status"] == "ok":
            assert opt["status"] == "ok", opt["message"]
            assert [o[2] for o in opt["outputs"]] == [o[2] for o in ref["outputs"]], "a shrunk parameter was bound"
            shrunk += 1
    assert fired > 0 and shrunk > 0, (fired, shrunk)
