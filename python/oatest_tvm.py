"""The TVM Relax side of oatest's `tvm` target, called from the worker process through pyo3 (see
src/target/tvm.rs). One function, `run`, compiles an ONNX model under a configuration and runs it.

A configuration is a level plus passes to leave out. The pipeline is one explicit list of Relax passes; each
pass belongs to a level, and a level runs its passes and those of every lower level. `required` passes are
the smallest pipeline that still builds for the Relax VM (the unoptimized reference). A PassInstrument in the
PassContext records which pipeline passes ran and which changed the module (structural hash before/after).

Tensors cross the boundary as (name, ONNX dtype code, dims, raw little-endian bytes).
"""
from __future__ import annotations

import os

import numpy as np
import onnx
import tvm
from onnx import helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

try:  # TVM 0.27 moved structural hashing into tvm_ffi
    from tvm_ffi import structural_hash
except ImportError:  # pragma: no cover - older TVM
    from tvm.ir import structural_hash

LEVELS = ["disable", "basic", "extended", "layout", "all"]

# (pass name, lowest level that runs it; "required" = always). Order is pipeline order.
PIPELINE = [
    ("DispatchSampling", "required"),
    ("DispatchSortScan", "required"),
    ("CanonicalizeBindings", "extended"),
    ("ConvertToDataflow", "extended"),
    ("EliminateCommonSubexpr", "extended"),
    ("DecomposeOpsForInference", "extended"),
    ("FoldBatchnormToConv2D", "extended"),
    ("RemoveRedundantReshape", "extended"),
    ("FuseTransposeMatmul", "extended"),
    ("ReorderPermuteDimsAfterConcat", "extended"),
    ("ExpandMatmulOfSum", "extended"),
    ("AdjustMatmulOrder", "extended"),
    ("CombineParallelMatmul", "extended"),
    ("DeadCodeElimination", "extended"),
    ("LegalizeOps", "required"),
    ("AnnotateTIROpPattern", "basic"),
    ("FoldConstant", "basic"),
    ("FuseOps", "basic"),
    ("FuseTIR", "basic"),
    ("RewriteDataflowReshape", "all"),
    ("ToNonDataflow", "required"),
    ("RemovePurityChecking", "required"),
    ("CallTIRRewrite", "required"),
    ("StaticPlanBlockMemory", "all"),
    ("LowerAllocTensor", "required"),
    ("KillAfterLastUse", "all"),
    ("LowerRuntimeBuiltin", "required"),
    ("ComputePrimValue", "required"),
    ("VMShapeLower", "required"),
    ("AttachGlobalSymbol", "required"),
]
NAMES = {name for name, _ in PIPELINE}


def _make(name: str):
    if name in ("DispatchSampling", "DispatchSortScan"):
        return getattr(relax.backend, name)()
    return getattr(relax.transform, name)()


def passes_for(level: str, disabled: list[str]) -> list[str]:
    """The pipeline of a configuration, by name."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r} (one of {LEVELS})")
    rank = LEVELS.index(level)
    out = []
    for name, lowest in PIPELINE:
        if lowest == "required":
            out.append(name)
        elif LEVELS.index(lowest) <= rank and name not in disabled:
            out.append(name)
    return out


@tvm.instrument.pass_instrument
class Recorder:
    """Records the pipeline passes that ran and those that changed the module."""

    def __init__(self):
        self.stack = []
        self.ran = []
        self.fired = []

    def run_before_pass(self, mod, info):
        self.stack.append(structural_hash(mod) if info.name in NAMES else None)

    def run_after_pass(self, mod, info):
        before = self.stack.pop()
        if before is None:
            return
        if info.name not in self.ran:
            self.ran.append(info.name)
        if structural_hash(mod) != before and info.name not in self.fired:
            self.fired.append(info.name)


def version() -> str:
    return tvm.__version__


def _fault(model: onnx.ModelProto, level: str, fired: list[str]) -> str | None:
    """Test-only misbehaviour (OATEST_TVM_TEST_FAULTS=1): model metadata `oatest.fault` = segfault | wrong,
    with `oatest.fault.needs` = passes that must all have fired."""
    if os.environ.get("OATEST_TVM_TEST_FAULTS") != "1" or level == "disable":
        return None
    meta = {p.key: p.value for p in model.metadata_props}
    needs = [p for p in meta.get("oatest.fault.needs", "").split(";") if p]
    if all(p in fired for p in needs):
        return meta.get("oatest.fault")
    return None


def _to_numpy(t):
    name, code, dims, raw = t
    dtype = helper.tensor_dtype_to_np_dtype(code)
    return name, np.frombuffer(raw, dtype=dtype).reshape(dims).copy()


def _from_numpy(name, a):
    a = np.ascontiguousarray(a)
    return (name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape), a.tobytes())


def _flatten(out):
    if isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "Tuple"):
        res = []
        for x in out:
            res.extend(_flatten(x))
        return res
    return [out.numpy()]


def run(model_bytes: bytes, inputs: list, level: str, disabled: list[str], threads: int = 1) -> dict:
    """Compiles and runs; returns status ('ok' | 'error'), message, outputs, passes fired and ran."""
    rec = Recorder()
    result = {"status": "ok", "message": "", "outputs": [], "fired": rec.fired, "ran": rec.ran}
    try:
        model = onnx.load_from_string(model_bytes)
        mod = from_onnx(model, keep_params_in_input=False)
    except Exception as e:  # noqa: BLE001 - the frontend refusing a model is an outcome
        result.update(status="error", message=f"from_onnx: {type(e).__name__}: {e}")
        return result
    try:
        target = tvm.target.Target("llvm", host="llvm")
        seq = tvm.transform.Sequential([_make(n) for n in passes_for(level, disabled)])
        with tvm.transform.PassContext(opt_level=3, instruments=[rec]), target:
            ex = tvm.compile(mod, target=target, relax_pipeline=seq)
        fault = _fault(model, level, rec.fired)
        if fault == "segfault":
            import ctypes

            ctypes.string_at(0)
        vm = relax.VirtualMachine(ex, tvm.cpu())
        graph_inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        feeds = dict(_to_numpy(t) for t in inputs)
        args = [tvm.runtime.tensor(feeds[n]) for n in graph_inputs]
        outs = _flatten(vm["main"](*args))
        if fault == "wrong":
            outs = [o + 1 if o.dtype.kind == "f" else o for o in outs]
        names = [o.name for o in model.graph.output]
        result["outputs"] = [_from_numpy(n, a) for n, a in zip(names, outs)]
    except Exception as e:  # noqa: BLE001
        result.update(status="error", message=f"{type(e).__name__}: {str(e)[:4000]}")
    return result
