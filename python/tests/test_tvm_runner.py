"""The TVM runner (python/oatest_tvm.py) and its pattern check (python/oatest_tvm_check.py): the pipeline's
optional passes, which the worker reports, and how a pattern too large is shrunk."""
from __future__ import annotations

import pytest

pytest.importorskip("tvm", reason="apache-tvm is installed by scripts/setup.sh")

import oatest_tvm as T  # noqa: E402
import oatest_tvm_check as C  # noqa: E402


def test_the_optional_passes_are_the_pipeline_passes_a_configuration_may_leave_out_then_the_inserted_ones():
    optional = T.optional_passes()
    assert "FuseOps" in optional and "StaticPlanBlockMemory" in optional and "FuseOpsByPattern" in optional
    assert "LegalizeOps" not in optional, "required passes are not targets"
    in_pipeline = [n for n, _ in T.PIPELINE if n in optional]
    assert optional[: len(in_pipeline)] == in_pipeline, "pipeline order"
    assert set(T.passes_for("all", [])) - set(T.passes_for("disable", [])) == set(in_pipeline)
    assert set(optional[len(in_pipeline) :]) == set(T.oatest_tvm_passes.PLACEMENT)


def test_a_large_pattern_is_shrunk_by_the_smallest_power_of_two_that_fits():
    script = 'x: R.Tensor((2, 1024, 640), dtype="float32"), w: R.Tensor((640, 64), dtype="float32")'
    assert C.max_elems(script) > C.MAX_ELEMS
    small = C.shrink(script)
    assert small is not None and C.max_elems(small) <= C.MAX_ELEMS
    assert small == 'x: R.Tensor((2, 64, 40), dtype="float32"), w: R.Tensor((40, 4), dtype="float32")'


def test_every_pass_is_recorded_under_its_constructors_name():
    """The instrumentation sees PassInfo names; a pass whose PassInfo name differs from its constructor's
    (DecomposeOpsForInference runs as `DecomposeOps`) must be aliased, or it never counts as fired. A Sequential
    (`sequential`) is fine: the pass inside it carries the name."""
    import inspect

    import oatest_tvm_passes as P

    for name in [n for n, _ in P.PIPELINE] + sorted(P.PLACEMENT):
        ctor = P.constructor(name)
        params = inspect.signature(ctor).parameters.values()
        if any(p.default is inspect.Parameter.empty for p in params):
            continue  # built from a test's arguments only
        try:
            info = ctor().info.name
        except Exception:  # noqa: BLE001 - needs a target context (MetaScheduleApplyDatabase)
            continue
        assert info in (name, "sequential") or T.PASS_ALIASES.get(info) == name, (name, info)


def test_memoized_legalization_keeps_which_arguments_are_one_value():
    """The legalization memo serves one PrimFunc to every call of an op with the same types: `add(x, x)` and
    `add(x, y)` have the same types but not the same arguments, and mixing them up doubled a tensor once. The
    module is built under both configurations, with the memo warm from the first."""
    import numpy as np
    import tvm
    from tvm.script import relax as R

    @tvm.script.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            a = R.add(x, x)
            b = R.add(x, y)
            c = R.multiply(a, b)
            d = R.multiply(b, b)
            return R.subtract(c, d)

    x = np.arange(6, dtype="float32").reshape(2, 3)
    y = np.full((2, 3), 0.5, dtype="float32")
    want = (x + x) * (x + y) - (x + y) * (x + y)
    import oatest_tvm_memo as M

    before = len(M._LEGALIZED)
    for level in ("disable", "all", "disable"):
        ex = tvm.compile(Mod, target=T._target(), relax_pipeline=tvm.transform.Sequential(
            [T._make(n) for n in T.passes_for(level, [])]))
        vm = tvm.relax.VirtualMachine(T.load(ex), tvm.cpu())
        got = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(y)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=level)
    assert len(M._LEGALIZED) > before, "the calls were memoized"


def test_a_primfunc_lowered_before_is_reused_under_its_new_symbol():
    """The lowering memo reuses a PrimFunc lowered for one build in another, where legalization named it
    differently (`exp` here, `exp1` there, beside another exp of its own); the VM finds each by its symbol."""
    import numpy as np
    import oatest_tvm_memo as M
    import tvm
    from tvm.script import relax as R

    @tvm.script.ir_module
    class One:
        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            return R.exp(x)

    @tvm.script.ir_module
    class Two:
        @R.function
        def main(x: R.Tensor((4,), "float32"), y: R.Tensor((2, 2), "float32")) -> R.Tensor((4,), "float32"):
            a = R.exp(y)
            b = R.reshape(a, (4,))
            return R.add(b, R.exp(x))

    x = np.linspace(-1, 1, 4, dtype="float32")
    y = np.arange(4, dtype="float32").reshape(2, 2)
    seq = tvm.transform.Sequential([T._make(n) for n in T.passes_for("disable", [])])
    got = []
    for mod, args in ((One, [x]), (Two, [x, y])):
        with tvm.transform.PassContext(opt_level=3, config=T.PASS_CONFIG), T._target():
            ex = tvm.compile(mod, target=T._target(), relax_pipeline=seq, tir_pipeline=M.CPU)
        vm = tvm.relax.VirtualMachine(T.load(ex), tvm.cpu())
        got.append(vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy())
        lowered = sum(len(v) for v in M._LOWERED.values())
    np.testing.assert_allclose(got[0], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(got[1], np.exp(y).reshape(4) + np.exp(x), rtol=1e-6)
    assert lowered >= 3, "exp (4,), exp (2, 2), reshape and add were lowered once each"


def _shared_constant_module():
    """A private `wrapper` calls the private `inner` with a constant; two public functions call `wrapper`. After
    InlinePrivateFunctions both hold the one constant object, which FuseOpsByPattern (run by FuseTransposeMatmul)
    refuses: "appears in multiple partitions" (apache-tvm 0.27)."""
    import tvm
    from tvm.script import ir as I, relax as R

    @I.ir_module
    class Mod:
        @R.function(private=True)
        def inner(x: R.Tensor((4,), "float32"), p0: R.Tensor((), "float32")) -> R.Tensor((4,), "float32"):
            with R.dataflow():
                y = R.add(x, p0)
                R.output(y)
            return y

        @R.function(private=True)
        def wrapper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = Mod
            with R.dataflow():
                y = cls.inner(x, R.const(1.0, "float32"))
                R.output(y)
            return y

        @R.function
        def f1(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = Mod
            with R.dataflow():
                y = cls.wrapper(x)
                R.output(y)
            return y

        @R.function
        def f2(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            cls = Mod
            with R.dataflow():
                y = cls.wrapper(x)
                R.output(y)
            return y

    assert isinstance(Mod, tvm.IRModule)
    return Mod


def test_an_error_out_of_a_pass_run_inside_the_configuration_pass_names_both():
    """The configuration pass is the one triage can leave out; the pass it runs that raised is the one a
    maintainer fixes (a review blamed FuseTransposeMatmul for FuseOpsByPattern's check)."""
    import tvm
    from tvm import relax

    mod = relax.transform.InlinePrivateFunctions()(_shared_constant_module())
    rec = T.Recorder(names={"FuseTransposeMatmul"})
    with pytest.raises(Exception, match="appears in multiple partitions") as raised:
        with tvm.transform.PassContext(opt_level=3, instruments=[rec]):
            relax.transform.FuseTransposeMatmul()(mod)
    assert (rec.running, rec.within(raised.value)) == ("FuseTransposeMatmul", "FuseOpsByPattern")
    # a pass that raised on its own names no other
    rec = T.Recorder(names={"FuseOpsByPattern"})
    with pytest.raises(Exception, match="appears in multiple partitions"):
        with tvm.transform.PassContext(opt_level=3, instruments=[rec]):
            relax.transform.FuseTransposeMatmul()(mod)
    assert (rec.running, rec.within()) == ("FuseOpsByPattern", None)


def test_an_error_of_the_configuration_passs_own_code_called_back_by_the_pass_it_runs_names_that_pass_alone():
    """FuseOpsByPattern calls FuseTransposeMatmul's pattern check, which indexes the axes of a 1-D transpose: the
    failing code is FuseTransposeMatmul's (a review called `FuseOpsByPattern (in FuseTransposeMatmul)` imprecise)."""
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    @tvm.script.ir_module
    class OneD:
        @R.function
        def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
            with R.dataflow():
                t = R.permute_dims(w)
                y = R.matmul(x, t)
                R.output(y)
            return y

    rec = T.Recorder(names={"FuseTransposeMatmul"})
    with pytest.raises(IndexError) as raised:
        with tvm.transform.PassContext(opt_level=3, instruments=[rec]):
            relax.transform.FuseTransposeMatmul()(OneD)
    assert (rec.running, rec.within()) == ("FuseTransposeMatmul", "FuseOpsByPattern")
    assert rec.within(raised.value) is None


def test_a_pass_fires_when_it_changes_a_function_not_when_it_rebuilds_the_module():
    import tvm
    from tvm import relax
    from tvm_ffi import structural_hash

    mod = _shared_constant_module()
    rebuilt = tvm.IRModule({gv: f for gv, f in mod.functions.items()})
    assert not rebuilt.same_as(mod) and not T._changed(mod, rebuilt, structural_hash)
    # the same answer as comparing the whole module's structural hash, pass by pass
    passes = [relax.transform.InlinePrivateFunctions(), relax.transform.CanonicalizeBindings(),
              relax.transform.ToNonDataflow(), relax.transform.DeadCodeElimination(), relax.transform.LegalizeOps(),
              relax.transform.LambdaLift(), relax.transform.ConvertToDataflow()]
    seen = set()
    for p in passes:
        after = p(mod)
        whole = structural_hash(mod) != structural_hash(after)
        assert T._changed(mod, after, structural_hash) == whole, p.info.name
        seen.add(whole)
        mod = after
    assert seen == {True, False}, "passes that change the module and passes that do not"


def test_the_cpu_lowering_runs_no_gpu_or_speed_pass_and_computes_what_the_default_lowering_does():
    """The runner's builds lower their PrimFuncs through the CPU lowering (`oatest_tvm_memo.CPU`), which leaves out
    TIR's passes for GPU constructs and those that only make code faster (simplification, if-hoisting). A module
    whose PrimFuncs hold padding conditions, a reduction, a strided slice and a select gives the default lowering's
    outputs bit for bit, and so does a constant FoldConstant evaluates."""
    import numpy as np
    import oatest_tvm_memo as M
    import tvm
    from tvm.script import relax as R

    @tvm.script.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((1, 3, 9, 9), "float32")) -> R.Tensor((1, 3, 2, 5), "float32"):
            p = R.nn.max_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
            s = R.sum(p, axis=[3], keepdims=True)
            c = R.add(R.const(np.full((1, 3, 1, 1), 0.25, "float32")), R.const(np.ones((1, 3, 1, 1), "float32")))
            q = R.strided_slice(R.multiply(p, R.add(s, c)), axes=[2], begin=[0], end=[5], strides=[2])
            return R.where(R.greater(q, R.const(0.5, "float32")), q, R.negative(q))

    @tvm.instrument.pass_instrument
    class Seen:
        def __init__(self):
            self.names = set()

        def run_before_pass(self, mod, info):
            self.names.add(info.name)

    x = np.random.default_rng(3).standard_normal((1, 3, 9, 9)).astype("float32")
    seq = tvm.transform.Sequential([T._make(n) for n in T.passes_for("all", [])])
    outs, seen = {}, {}
    for lowering in (M.CPU, "default"):
        T._FOLD_BUILDS.clear()
        seen[lowering] = Seen()
        with tvm.transform.PassContext(opt_level=3, config=T.PASS_CONFIG, instruments=[seen[lowering]]), T._target():
            ex = tvm.compile(Mod, target=T._target(), relax_pipeline=seq, tir_pipeline=lowering)
        vm = tvm.relax.VirtualMachine(T.load(ex), tvm.cpu())
        outs[lowering] = vm["main"](tvm.runtime.tensor(x)).numpy()
        folds = [how for entries in T._FOLD_BUILDS.values() for _, how, _ in entries]
        assert folds and all(pipeline == M.CPU for _, pipeline in folds), "FoldConstant's builds, assertions off"
    np.testing.assert_array_equal(outs[M.CPU], outs["default"])
    assert "FoldConstant" in seen[M.CPU].names and "tirx.MakePackedAPI" in seen[M.CPU].names
    left_out = {"s_tir.StmtSimplify", "s_tir.HoistIfThenElse", "s_tir.LoopPartition", "s_tir.ThreadSync"}
    assert not left_out & seen[M.CPU].names, "the CPU lowering leaves them out"
    assert left_out <= seen["default"].names, "the default lowering runs them"


def test_builds_are_libraries_unloaded_once_unused_and_constant_folding_builds_are_libraries_too():
    """A build is linked with `ld` and loaded so that it unloads once nothing holds it (tvm_ffi keeps a library it
    loads for the life of the process unless told otherwise: five mappings and ~120 KiB a build). FoldConstant's
    builds, which a memo keeps, are libraries as well (a JIT-compiled one holds its LLVM module, ~1 MiB)."""
    import gc

    import numpy as np
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    assert T._LD is not None, "the runner links builds with ld (binutils)"

    def mapped():
        with open("/proc/self/maps") as f:
            return sum(1 for line in f if "oatest-tvm-" in line)

    @tvm.script.ir_module
    class Twice:
        @R.function
        def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
            return R.add(x, x)

    gc.collect()
    before = mapped()
    for _ in range(3):
        lib = T.load(tvm.compile(Twice, target=T._target()))
        assert mapped() > before, "a build is a loaded library"
        out = relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(np.ones(4, "float32"))).numpy()
        np.testing.assert_array_equal(out, np.full(4, 2, "float32"))
        del lib
        gc.collect()
        assert mapped() == before, "a library nothing holds is unloaded"

    @tvm.script.ir_module
    class Folded:
        @R.function
        def main(x: R.Tensor((), "float32")) -> R.Tensor((), "float32"):
            c = R.add(R.const(1.5, "float32"), R.const(2.0, "float32"))
            return R.add(x, c)

    T._FOLD_BUILDS.clear()
    with T._target():
        folded = tvm.transform.Sequential([relax.transform.LegalizeOps(), relax.transform.FoldConstant()])(Folded)
    assert "3.5" in folded.script()
    built = [b for entries in T._FOLD_BUILDS.values() for _, _, b in entries]
    assert built and all(b.kind == "library" for b in built)


def test_object_files_are_written_without_debug_information_and_compute_the_same(tmp_path, capfd):
    """`_object` drops the debug information TVM's code generator writes (half of emitting an object file): the
    object has no DWARF sections, LLVM's warning about the renamed flag never reaches standard error, and the
    linked build computes what the JIT-compiled one does, bit for bit."""
    import numpy as np
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    @tvm.script.ir_module
    class Mixed:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((3,), "float32"):
            a = R.exp(R.multiply(x, y))
            return R.sum(R.divide(a, R.add(y, R.const(0.5, "float32"))), axis=[1])

    ex = tvm.compile(Mixed, target=T._target())
    (llvm,) = [m for m in ex.mod._collect_dso_modules() if m.kind == "llvm"]
    llvm.write_to_file(str(tmp_path / "plain.o"))
    capfd.readouterr()
    stripped = T._object(llvm, str(tmp_path / "stripped"))
    assert capfd.readouterr().err == ""
    assert b".debug_info" in (tmp_path / "plain.o").read_bytes()
    assert b".debug_info" not in (tmp_path / "stripped.o").read_bytes()
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal(4).astype("float32")]
    linked = T.load(ex)
    assert linked is not ex, "linked with ld"
    outs = [relax.VirtualMachine(m, tvm.cpu())["main"](*map(tvm.runtime.tensor, args)).numpy() for m in (linked, ex)]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_a_memo_keeps_the_entries_used_last():
    """The memos are bounded (a worker outgrowing its memory budget is replaced, memos and all): past its bound
    the entry used longest ago goes, a hit counting as a use."""
    import collections

    import oatest_tvm_memo as M

    memo = collections.OrderedDict()
    for key in ("a", "b", "a", "c"):
        memo.setdefault(key, key)
        M.used(memo, key, 2)
    assert list(memo) == ["a", "c"]


def test_a_run_told_to_stop_after_a_pass_stops_there_once_it_ran_without_an_error():
    """Triage's checks of an error raised in a pass stop once that pass ran without raising (STOP_AFTER): no later
    pass, build or run; a run whose pass raises reports that error as always."""
    import json

    import numpy as np
    import oatest_tvm_reduce as R
    import tvm
    from tvm.script import relax as RS

    @tvm.script.ir_module
    class Exp:
        @RS.function
        def main(x: RS.Tensor((4,), "float32")) -> RS.Tensor((4,), "float32"):
            return RS.exp(x)

    test = json.dumps({"kind": R.MODULE_KIND, "script": R.script_of(Exp), "pass": None, "fault": {}}).encode()
    wire = [T._from_numpy("x", np.zeros(4, "float32"))]
    full = T.run(test, wire, "all", [])
    assert full["status"] == "ok" and full["outputs"]
    first = next(n for n in T.passes_for("all", []) if n not in T.passes_for("disable", []))
    stopped = T.run(test, wire, "all", [], 1, [(T.STOP_AFTER, first)])
    assert (stopped["status"], stopped["message"]) == ("error", T.STOPPED.format(first))
    assert stopped["ran"][-1] == first and not stopped["outputs"]
    assert len(stopped["ran"]) < len(full["ran"])


def test_a_run_whose_main_returns_more_values_than_the_test_names_is_an_error(monkeypatch):
    """Outputs are never compared in part: a pattern's result once went unnamed, so unseen."""
    import json

    import numpy as np
    import oatest_tvm_reduce as R
    import tvm
    from tvm.script import relax as RS

    @tvm.script.ir_module
    class Two:
        @RS.function
        def main(x: RS.Tensor((4,), "float32")) -> RS.Tuple(RS.Tensor((4,), "float32"), RS.Tensor((4,), "float32")):
            return (RS.exp(x), RS.abs(x))

    test = json.dumps({"kind": R.MODULE_KIND, "script": R.script_of(Two), "pass": None, "fault": {}}).encode()
    wire = [T._from_numpy("x", np.zeros(4, "float32"))]
    assert [o[0] for o in T.run(test, wire, "disable", [])["outputs"]] == ["out_0", "out_1"]
    named = T._import_test
    monkeypatch.setattr(T, "_LAST_TEST", [None, None])
    monkeypatch.setattr(T, "_import_test", lambda *a: (*named(*a)[:3], ["out_0"]))
    out = T.run(test, wire, "disable", [])
    assert out["status"] == "error" and "main returned 2 values for 1 outputs: out_0" in out["message"]


def test_a_pattern_too_large_is_not_shrunk_when_it_has_primfuncs():
    """Shrinking rewrites the dims of annotations; a PrimFunc's loops and allocations would disagree with them."""
    script = (
        '@T.prim_func\ndef f(A: T.Buffer((T.int64(64), T.int64(1024)), "float32")):\n    T.evaluate(0)\n'
        'x: R.Tensor((64, 1024), dtype="float32")'
    )
    assert C.max_elems(script) > C.MAX_ELEMS
    with pytest.raises(ValueError, match="PrimFuncs cannot be shrunk"):
        C.check_pattern({"pattern": script, "seed_onnx": "", "rng": 0})
