"""Relax-level synthesis into a host module with TVM's own structure (python/oatest_tvm_synth.py's
`_synthesize_hosted`): a pattern spliced into a dataflow block of either function of a host with R.If, a private
Relax function and a PrimFunc called with R.call_tir, run at every level against the reference."""
from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto

tvm = pytest.importorskip("tvm", reason="apache-tvm is installed by scripts/setup.sh")
from tvm import relax  # noqa: E402

import oatest_tvm as T  # noqa: E402
import oatest_tvm_synth as S  # noqa: E402
from test_tvm_synth import PATTERN, seed_model  # noqa: E402

HOST = """
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tirx as T

@I.ir_module
class Module:
    @T.prim_func(private=True, s_tir=True)
    def add_one(x: T.Buffer((T.int64(4), T.int64(5)), "float32"), y: T.Buffer((T.int64(4), T.int64(5)), "float32")):
        T.func_attr({"tirx.noalias": True})
        for i, j in T.grid(T.int64(4), T.int64(5)):
            with T.sblock("y"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(x[vi, vj])
                T.writes(y[vi, vj])
                y[vi, vj] = x[vi, vj] + T.float32(1.0)

    @R.function(private=True)
    def helper(x: R.Tensor((4, 5), dtype="float32")) -> R.Tensor((4, 5), dtype="float32"):
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.add_one, (x,), out_ty=R.Tensor((4, 5), dtype="float32"))
            z = R.exp(y)
            R.output(z)
        return z

    @R.function
    def main(x: R.Tensor((4, 5), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((4, 5), dtype="float32"):
        cls = Module
        with R.dataflow():
            a = cls.helper(x)
            b = R.multiply(a, x)
            R.output(b)
        if c:
            r = R.add(b, x)
        else:
            r = R.subtract(b, x)
        return r
"""

X = np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)
WIRE = [("x", TensorProto.FLOAT, [4, 5], X.tobytes())]


def test_the_host_is_structured_as_tvm_tests_write_modules():
    host = tvm.script.from_source(HOST)
    assert relax.analysis.well_formed(host) is not False
    assert "R.If" in host.script() or "if c" in host.script()
    assert {g.name_hint for g in S._host_candidates(host)} == {"helper", "main"}


def test_a_pattern_spliced_into_either_host_function_runs_at_every_level():
    chosen = set()
    for rng in range(8):
        mod = S.synthesize(seed_model(), PATTERN, rng, host=HOST)
        names = {g.name_hint for g in mod.get_global_vars()}
        assert {"main", S.HOST_NAME, S.HOST_MAIN, "helper", "add_one", S.PATTERN_NAME} <= names
        hosted = mod[S.HOST_NAME].script()
        assert S.PATTERN_NAME in hosted
        chosen.add("R.If" in hosted or "if " in hosted)  # main's copy holds the If, helper's does not
        recipe = json.dumps({"seed_onnx": seed_model().hex(), "pattern": PATTERN, "rng": rng, "host": HOST}).encode()
        ref = T.run(recipe, WIRE, "disable", [])
        assert ref["status"] == "ok", ref["message"]
        names = [o[0] for o in ref["outputs"]]
        assert names[0] == "y" and len(names) == 3, names  # the seed's output, the host's, the pattern's
        for level in T.LEVELS[1:]:
            opt = T.run(recipe, WIRE, level, [])
            assert opt["status"] == "ok", (level, opt["message"])
            assert [o[0] for o in opt["outputs"]] == names
            for (_, _, _, a), (_, _, _, b) in zip(ref["outputs"], opt["outputs"]):
                np.testing.assert_allclose(np.frombuffer(a, "float32"), np.frombuffer(b, "float32"), rtol=1e-5)
            if level == "all":
                assert "FuseOps" in opt["fired"] and "LegalizeOps" in opt["fired"]
    assert chosen == {True, False}, "both host functions were chosen across seeds"


def test_host_functions_called_inside_the_test_are_private_and_take_no_weights():
    """A host function the test calls from inside the module is no entry point: public, or with `num_input`,
    LiftTransformParams and LazyGetInput re-sign it by design and the call to it goes stale (a review found four
    such entries filed as bugs)."""
    public = HOST.replace("@R.function(private=True)\n    def helper", "@R.function\n    def helper")
    public = public.replace("        cls = Module\n        with R.dataflow():\n            y = R.call_tir",
                            "        R.func_attr({\"num_input\": 1})\n        cls = Module\n        with R.dataflow():\n"
                            "            y = R.call_tir")
    host = tvm.script.from_source(public)
    assert "global_symbol" in host["helper"].attrs and "num_input" in host["helper"].attrs
    for rng in range(4):
        mod = S.synthesize(seed_model(), PATTERN, rng, host=public)
        for name in ("helper", S.HOST_NAME, S.HOST_MAIN):
            attrs = mod[name].attrs or {}
            assert "global_symbol" not in attrs and "num_input" not in attrs, (name, rng)
        recipe = json.dumps({"seed_onnx": seed_model().hex(), "pattern": PATTERN, "rng": rng, "host": public})
        for level in ("disable", "all"):
            out = T.run(recipe.encode(), WIRE, level, [])
            assert out["status"] == "ok", (level, out["message"])
