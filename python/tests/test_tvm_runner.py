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
