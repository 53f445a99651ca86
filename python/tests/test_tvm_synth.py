"""Relax-level synthesis (python/oatest_tvm_synth.py, run by python/oatest_tvm.py): every bridge turns a value
into the type a pattern parameter needs and computes what it should; a pattern spliced into an imported seed
graph yields a well-formed module that compiles, runs, and fires the pattern's pass."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

tvm = pytest.importorskip("tvm", reason="apache-tvm is installed by scripts/setup.sh")
from tvm import relax  # noqa: E402

import oatest_tvm as T  # noqa: E402
import oatest_tvm_synth as S  # noqa: E402


def run_bridge(x: np.ndarray, dst):
    bb = relax.BlockBuilder()
    v = relax.Var("x", relax.TensorType(x.shape, str(x.dtype)))
    with bb.function("main", [v]):
        with bb.dataflow():
            out = bb.emit_output(S.bridge(bb, v, (str(x.dtype), tuple(x.shape)), dst))
        bb.emit_func_output(out)
    mod = bb.get()
    assert relax.analysis.well_formed(mod) is not False
    ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    assert got.shape == dst[1] and str(got.dtype) == dst[0]
    return got


X = np.arange(12, dtype="float32").reshape(3, 4)


def test_reshape_bridge_keeps_the_elements():
    np.testing.assert_array_equal(run_bridge(X, ("float32", (4, 3))), X.reshape(4, 3))


def test_strided_slice_bridge_takes_the_leading_block():
    np.testing.assert_array_equal(run_bridge(X, ("float32", (2, 2))), X[:2, :2])


def test_pad_bridge_pads_with_zeros():
    got = run_bridge(X, ("float32", (4, 6)))
    np.testing.assert_array_equal(got[:3, :4], X)
    assert got[3:].sum() == 0 and got[:, 4:].sum() == 0


def test_zeros_concat_bridge_grows_across_ranks():
    got = run_bridge(X, ("float32", (2, 2, 4)))
    np.testing.assert_array_equal(got.reshape(-1)[:12], X.reshape(-1))
    assert got.reshape(-1)[12:].sum() == 0


def test_flatten_slice_bridge_shrinks_across_ranks():
    np.testing.assert_array_equal(run_bridge(X, ("float32", (5,))), X.reshape(-1)[:5])


def test_astype_bridge_casts_last():
    got = run_bridge(X, ("int32", (3, 4)))
    np.testing.assert_array_equal(got, X.astype("int32"))


@pytest.mark.parametrize(
    "dst",
    [("float32", (3, 4)), ("float32", (4, 3)), ("float32", (2, 2)), ("float32", (4, 6)), ("float32", (2, 2, 4)),
     ("float32", (5,)), ("int32", (3, 4)), ("float16", (2, 2, 4))],
)
def test_bridge_cost_counts_the_bindings_a_bridge_emits(dst):
    bb = relax.BlockBuilder()
    v = relax.Var("x", relax.TensorType(X.shape, "float32"))
    with bb.function("main", [v]):
        with bb.dataflow():
            out = bb.emit_output(S.bridge(bb, v, ("float32", (3, 4)), dst))
        bb.emit_func_output(out)
    emitted = len(bb.get()["main"].body.blocks[0].bindings) - 1  # the output binding
    assert S.bridge_cost(("float32", (3, 4)), dst) == emitted


PATTERN = """
# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        with R.dataflow():
            a = R.add(x, x)
            b = R.exp(a)
            c = R.multiply(b, a)
            R.output(c)
        return c
"""


def seed_model() -> bytes:
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])],
        "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    return m.SerializeToString()


def test_a_pattern_spliced_into_a_seed_compiles_runs_and_fires_its_pass():
    mod = S.synthesize(seed_model(), PATTERN, 3)
    names = {g.name_hint for g in mod.get_global_vars()}
    assert {"main", S.PATTERN_NAME} <= names
    assert S.PATTERN_NAME in mod["main"].script()
    recipe = json.dumps({"seed_onnx": seed_model().hex(), "pattern": PATTERN, "rng": 3}).encode()
    x = np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)
    wire = [("x", TensorProto.FLOAT, [4, 5], x.tobytes())]
    ref = T.run(recipe, wire, "disable", [])
    opt = T.run(recipe, wire, "all", [])
    assert ref["status"] == "ok" and opt["status"] == "ok", (ref["message"], opt["message"])
    assert [o[0] for o in opt["outputs"]] == ["y", S.EXTRA_OUTPUT]
    assert "FuseOps" in opt["fired"] and "FuseOps" not in ref["fired"]
    for (_, c, d, a), (_, _, _, b) in zip(ref["outputs"], opt["outputs"]):
        np.testing.assert_allclose(np.frombuffer(a, "float32"), np.frombuffer(b, "float32"), rtol=1e-5)


def test_a_pattern_with_symbolic_dims_is_called_with_static_tensors_and_stays_dynamic():
    dyn = PATTERN.replace("(2, 3)", '("n", 3)')
    S.pattern_usable(dyn)
    mod = S.synthesize(seed_model(), dyn, 3)
    pattern = mod[S.PATTERN_NAME]
    assert type(pattern.params[0].ty.shape.values[0]).__name__ == "Var", "the pattern keeps its symbolic dim"
    extra = mod["main"].ret_ty.fields[-1]
    assert S._static(extra) == ("float32", (3, 3)), "called with n = 3, its result is static"
    recipe = json.dumps({"seed_onnx": seed_model().hex(), "pattern": dyn, "rng": 3}).encode()
    x = np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)
    wire = [("x", TensorProto.FLOAT, [4, 5], x.tobytes())]
    ref = T.run(recipe, wire, "disable", [])
    opt = T.run(recipe, wire, "all", [])
    assert ref["status"] == "ok" and opt["status"] == "ok", (ref["message"], opt["message"])
    assert "FuseOps" in opt["fired"]
    for (_, c, d, a), (_, _, _, b) in zip(ref["outputs"], opt["outputs"]):
        np.testing.assert_allclose(np.frombuffer(a, "float32"), np.frombuffer(b, "float32"), rtol=1e-5)


def test_symbolic_dims_get_distinct_values_and_expressions_of_them_are_evaluated():
    mod = tvm.script.from_source(
        PATTERN.replace('def main(x: R.Tensor((2, 3), dtype="float32"))',
                        'def main(x: R.Tensor(("n", "m"), dtype="float32"), y: R.Tensor(("n * 2",), dtype="float32"))')
        .replace("-> R.Tensor((2, 3)", '-> R.Tensor(("n", "m")')
    )
    assert S._concrete_params(mod["main"]) == [("float32", (3, 4)), ("float32", (6,))]


def test_patterns_with_non_tensor_parameters_are_refused():
    shaped = PATTERN.replace('def main(x: R.Tensor((2, 3), dtype="float32"))',
                             'def main(x: R.Tensor((2, 3), dtype="float32"), s: R.Shape([2, 3]))')
    with pytest.raises(ValueError, match="non-tensor parameter"):
        S.pattern_usable(shaped)
