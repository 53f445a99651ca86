"""Passes called within their contracts (python/oatest_tvm_pipeline.json's `contracts`, oatest_tvm_passes.broken):
a pipeline pass whose contract a test's module breaks is left out of every configuration (`skipped_contract`), a
test whose inserted pass's contract its module breaks fails in every configuration (CONTRACT: an invalid test,
never a finding); and an inserted pass keeps its place when a configuration leaves its anchor out."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

tvm = pytest.importorskip("tvm", reason="apache-tvm is installed by scripts/setup.sh")
from tvm import relax  # noqa: E402
from tvm.relax.dpl import is_op, wildcard  # noqa: E402
from tvm.script import relax as RS  # noqa: E402

import oatest_tvm as T  # noqa: E402
import oatest_tvm_passes as P  # noqa: E402
import oatest_tvm_reduce as R  # noqa: E402

LIBRARY = os.path.join(os.path.dirname(__file__), "..", "..", "patterns", "tvm")


def _configs(name: str) -> list:
    """Every configuration of a test: each level, and delta debugging's probe that leaves pass `name` out."""
    return [(level, []) for level in T.LEVELS] + [("all", [name])]


def _module_test(mod, inputs: dict, level: str, disabled=(), pass_name=None, pass_args=None) -> dict:
    test = {"kind": R.MODULE_KIND, "script": R.script_of(mod), "pass": pass_name, "fault": {}}
    if pass_args is not None:
        test["pass_args"] = pass_args
    wire = [T._from_numpy(k, v) for k, v in inputs.items()]
    return T.run(json.dumps(test).encode(), wire, level, list(disabled))


def _outputs(r: dict) -> list:
    assert r["status"] == "ok", r["message"]
    return [T._to_numpy(t)[1] for t in r["outputs"]]


def _same(a: dict, b: dict):
    for x, y in zip(_outputs(a), _outputs(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _contract_error(r: dict, name: str):
    assert r["status"] == "error", r
    assert r["message"] == T.CONTRACT.format(name, P.CONTRACTS[name]["why"]), r["message"]
    assert r["raised_in"] is None and name not in r["ran"], r


def test_an_inserted_pass_keeps_its_place_when_its_anchor_is_left_out(monkeypatch):
    full = T.passes_for("all", [], "BindParams")
    assert full[full.index("BindParams") + 1] == "CanonicalizeBindings"
    out = T.passes_for("all", ["CanonicalizeBindings"], "BindParams")
    assert out[out.index("BindParams") + 1] == "ConvertToDataflow", "where the anchor was, not at the end"
    basic = T.passes_for("basic", [], "TopologicalSort")  # `basic` runs none of `extended`, the anchor's level
    assert basic[basic.index("TopologicalSort") - 1: basic.index("TopologicalSort") + 2] == [
        "DispatchSortScan", "TopologicalSort", "LegalizeOps"]
    monkeypatch.setitem(P.PLACEMENT, "AlterOpImpl", ("after", "FoldConstant"))
    out = T.passes_for("all", ["FoldConstant"], "AlterOpImpl")
    assert out[out.index("AlterOpImpl") - 1: out.index("AlterOpImpl") + 2] == [
        "AnnotateTIROpPattern", "AlterOpImpl", "FuseOps"]


@tvm.script.ir_module
class ExpAdd:
    @RS.function
    def main(x: RS.Tensor((2, 3), "float32")) -> RS.Tensor((2, 3), "float32"):
        with RS.dataflow():
            a = RS.exp(x)
            b = RS.add(a, x)
            RS.output(b)
        return b


def test_an_inserted_pass_runs_where_its_left_out_anchor_was():
    mod = ExpAdd
    x = {"x": np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)}
    r = _module_test(mod, x, "all", ["CanonicalizeBindings"], pass_name="TopologicalSort")
    assert r["status"] == "ok", r["message"]
    assert r["ran"].index("TopologicalSort") < r["ran"].index("ConvertToDataflow") < r["ran"].index("LegalizeOps")


def _float64_module():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float64"))
    w = relax.Var("w", relax.TensorType((3, 4), "float64"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(relax.op.matmul(x, w)))
            out = bb.emit_output(relax.op.add(a, relax.const(1.0, "float64")))
        bb.emit_func_output(out)
    return bb.get()


def test_to_mixed_precision_never_runs_on_a_float64_module():
    """TVM 0.27's ToMixedPrecision computes float64 in float16 and fails on the float64 constant."""
    rng = np.random.default_rng(0)
    feeds = {"x": rng.random((2, 3)), "w": rng.random((3, 4))}
    for level, disabled in _configs("ToMixedPrecision"):
        r = _module_test(_float64_module(), feeds, level, disabled, pass_name="ToMixedPrecision")
        _contract_error(r, "ToMixedPrecision")
        assert r["ran"] == [], "nothing compiled"
    assert P.broken("ToMixedPrecision", _float64_module()) is not None
    assert P.broken("ToMixedPrecision", ExpAdd) is None


def _seed(elem: int) -> bytes:
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])],
        "seed",
        [helper.make_tensor_value_info("x", elem, [4, 5])],
        [helper.make_tensor_value_info("y", elem, [4, 5])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9).SerializeToString()


def test_a_to_mixed_precision_recipe_on_a_float64_seed_fails_in_every_configuration():
    with open(os.path.join(LIBRARY, "ToMixedPrecision", "00601254cd9b49df.json")) as f:
        d = json.load(f)
    x = np.linspace(-1, 1, 20).reshape(4, 5)
    for elem, dtype in ((TensorProto.DOUBLE, "float64"), (TensorProto.FLOAT, "float32")):
        recipe = {"seed_onnx": _seed(elem).hex(), "pattern": d["script"], "rng": 1, "pass": "ToMixedPrecision",
                  "pass_args": d["pass_args"]}
        wire = [T._from_numpy("x", x.astype(dtype))]
        runs = {(lvl, tuple(off)): T.run(json.dumps(recipe).encode(), wire, lvl, off)
                for lvl, off in _configs("ToMixedPrecision")}
        if dtype == "float64":
            for r in runs.values():
                _contract_error(r, "ToMixedPrecision")
        else:
            assert all(r["status"] == "ok" for r in runs.values()), [r["message"] for r in runs.values()]
            assert "ToMixedPrecision" in runs[("all", ())]["fired"]


def _batch_norm_module(training: bool):
    bb = relax.BlockBuilder()
    names = ("x", "gamma", "beta", "mean", "var")
    params = [relax.Var(n, relax.TensorType((2, 3, 4, 4) if n == "x" else (3,), "float32")) for n in names]
    with bb.function("main", params):
        with bb.dataflow():
            bn = bb.emit(relax.op.nn.batch_norm(*params, axis=1, epsilon=1e-5, training=training))
            out = bb.emit_output(relax.TupleGetItem(bn, 0))
        bb.emit_func_output(out)
    return bb.get()


def _batch_norm_feeds() -> dict:
    rng = np.random.default_rng(0)
    shapes = {"x": (2, 3, 4, 4), "gamma": (3,), "beta": (3,), "mean": (3,), "var": (3,)}
    return {k: (rng.random(s, dtype="float32") + 0.5).astype("float32") for k, s in shapes.items()}


def test_decompose_ops_for_training_never_runs_on_an_inference_batch_norm():
    """It would normalize by the batch's statistics where the op says the moving ones: results differ."""
    feeds = _batch_norm_feeds()
    for level, disabled in _configs("DecomposeOpsForTraining"):
        r = _module_test(_batch_norm_module(False), feeds, level, disabled, pass_name="DecomposeOpsForTraining")
        _contract_error(r, "DecomposeOpsForTraining")
    ref = _module_test(_batch_norm_module(True), feeds, "disable", pass_name="DecomposeOpsForTraining")
    opt = _module_test(_batch_norm_module(True), feeds, "all", pass_name="DecomposeOpsForTraining")
    assert "DecomposeOpsForTraining" in opt["fired"]
    _same(ref, opt)


def _onnx_batch_norm(training_mode: int) -> bytes:
    stats = [numpy_helper.from_array(np.array(v, dtype="float32"), n) for n, v in
             (("s", [1.0, 2.0, 0.5]), ("b", [0.0, 1.0, -1.0]), ("m", [0.5, -0.5, 0.0]), ("v", [1.0, 2.0, 0.25]))]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], training_mode=training_mode)
    g = helper.make_graph([node], "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 4])], initializer=stats)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)], ir_version=8).SerializeToString()


def test_decompose_ops_for_inference_is_left_out_of_every_configuration_for_a_training_batch_norm():
    """An ONNX BatchNormalization with training_mode=1: the reference normalizes by the batch's statistics;
    DecomposeOpsForInference, were it run, by the moving ones."""
    x = [T._from_numpy("x", np.linspace(-2, 3, 96, dtype="float32").reshape(2, 3, 4, 4))]
    for mode, skipped in ((1, ["DecomposeOpsForInference"]), (0, [])):
        runs = {level: T.run(_onnx_batch_norm(mode), x, level, []) for level in T.LEVELS}
        for level, r in runs.items():
            _same(runs["disable"], r)
        for level, r in runs.items():
            assert r["skipped_contract"] == skipped, r
            ran = "DecomposeOpsForInference" in r["ran"]
            assert ran == (not skipped and level not in ("disable", "basic")), (level, r["ran"])


def test_fuse_ops_by_pattern_keeps_constants_out_of_the_functions_tvm_lowers():
    """bind_constants=True (its default) with annotate_codegen=False: FuseTIR's 'Tensor constants are not
    supported in primitive functions'; oatest's override passes them in."""
    w = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.matmul(x, relax.const(w))))
        bb.emit_func_output(out)
    pattern = [("dnnl.matmul_relu", is_op("relax.nn.relu")(is_op("relax.matmul")(wildcard(), wildcard())))]
    feeds = {"x": np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)}
    for codegen in (False, True):
        args = P.encode_args("FuseOpsByPattern", (pattern,), {"bind_constants": True, "annotate_codegen": codegen})
        ref = _module_test(bb.get(), feeds, "disable", pass_name="FuseOpsByPattern", pass_args=args)
        for level in T.LEVELS[1:]:
            r = _module_test(bb.get(), feeds, level, pass_name="FuseOpsByPattern", pass_args=args)
            assert "FuseOpsByPattern" in r["fired"], r
            _same(ref, r)


def _composite(two_functions: bool):
    """main calls a relu (made a composite function) and, with `two_functions`, a private function with a
    binding of its own."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    if two_functions:
        y = relax.Var("y", relax.TensorType((2, 3), "float32"))
        with bb.function("f", [y], private=True):
            with bb.dataflow():
                e = bb.emit_output(relax.op.exp(y))
            bb.emit_func_output(e)
        f = bb.get().get_global_var("f")
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(x))
            b = bb.emit(relax.Call(f, [a]) if two_functions else relax.op.exp(a))
            out = bb.emit_output(b)
        bb.emit_func_output(out)
    patterns = [("dnnl.relu", is_op("relax.nn.relu")(wildcard()))]
    return relax.transform.FuseOpsByPattern(patterns, bind_constants=False, entry_functions=["main"])(bb.get())


def test_merge_composite_functions_takes_only_a_module_whose_main_is_its_one_function():
    """TVM 0.27: 'Variable ... could not be found in any group' on a module with a second function."""
    feeds = {"x": np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)}
    for level, disabled in _configs("MergeCompositeFunctions"):
        r = _module_test(_composite(True), feeds, level, disabled, pass_name="MergeCompositeFunctions")
        _contract_error(r, "MergeCompositeFunctions")
    ref = _module_test(_composite(False), feeds, "disable", pass_name="MergeCompositeFunctions")
    opt = _module_test(_composite(False), feeds, "all", pass_name="MergeCompositeFunctions")
    assert "MergeCompositeFunctions" in opt["fired"]
    _same(ref, opt)


def test_contracts_are_data_with_reasons():
    """Each contract names a pass oatest runs and says why; its message never reads as a filter's 'unsupported'
    (src/oracle/filters.rs), so its test's invalid reason is the reference's error."""
    fragments = ("not implemented", "Not implemented", "unimplemented", "Unimplemented", "not supported",
                 "unsupported", "Unsupported", "Could not find an implementation for", "NOT_IMPLEMENTED")
    assert {"ToMixedPrecision", "DecomposeOpsForTraining", "DecomposeOpsForInference",
            "MergeCompositeFunctions"} <= set(P.CONTRACTS)
    for name, c in P.CONTRACTS.items():
        assert name in dict(T.PIPELINE) or name in P.PLACEMENT, name
        assert set(c) - {"pass", "why"} <= set(P.CHECKS) and set(c) - {"pass", "why"}, c
        assert not any(f in T.CONTRACT.format(name, c["why"]) for f in fragments), name
    assert P.OVERRIDES["FuseOpsByPattern"] == {"annotate_codegen": False, "bind_constants": False}
