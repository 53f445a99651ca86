"""The `ort-transformers` target's runner: ONNX Runtime's Python graph optimizer
(`onnxruntime.transformers.optimizer.optimize_model`), called from the worker process through pyo3 (see
src/compiler/ortx.rs), and embedded in every repro.py of the target (it needs only onnx, numpy and onnxruntime).

`run(model_bytes, inputs, level, disabled, threads, options)` runs one configuration of one model:
- `disable`: the original model in ONNX Runtime with graph optimizations off (the reference);
- `basic`: `optimize_model` (its Python fusions; `opt_level` 0 unless the option `opt_level` says 1, 2 or 99),
  the result checked with `onnx.checker` (when the checker accepts the original model; the ops ORT registers in the
  default domain where ONNX has none pass), then run in ONNX Runtime with graph optimizations off: only the Python
  fusions differ from the reference;
- `extended`, `all`: the same optimized model run in ONNX Runtime at that level.
The model type is the option `model_type`, else the model's metadata `oatest.model_type`, else `bert`; options
`num_heads` and `hidden_size` (else metadata `oatest.num_heads`, `oatest.hidden_size`) go to `optimize_model`
(0: detect). The option `oatest.save_optimized` names a file the optimizer's output is saved to.

The passes are the optimizer's Fusion classes and OnnxModel clean-ups, listed with the FusionOptions switch of
each fusion in data/ort-transformers-passes.json (module `oatest_ortx_passes`, loaded before this one). Every
Fusion's `apply` and every listed clean-up method is wrapped in memory (the installed package is not changed):
a pass "ran" when it was called, "fired" when the model's graph differs after the call; a disabled pass is
skipped (see the data file). A Python exception inside `optimize_model` is a crash (status `crash`, its type and
innermost frame), an optimized model that onnx.checker or ONNX Runtime refuses an error.

`optimize_model` at `opt_level` > 0 runs ONNX Runtime's optimizer first through a function that imports
`torch.version` only to choose a GPU provider; on CPU it is never read. Without torch installed, a placeholder
`torch` module (its `version.hip` None) stands in sys.modules during that call only.

Tensors cross the boundary as (name, ONNX dtype code, dims, raw little-endian bytes).
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import sys
import tempfile
import traceback
import types

import numpy as np
import onnx
import onnxruntime
from onnx import helper

import onnxruntime.transformers.optimizer as _optimizer  # noqa: E402  (adds the package's directory to sys.path)

from oatest_ortx_passes import PASSES

fusion_base = sys.modules["fusion_base"]
FusionOptions = sys.modules["fusion_options"].FusionOptions

ORT_LEVELS = {
    "basic": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "layout": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_LAYOUT,
    "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
FUSIONS: dict = PASSES["fusions"]
CLEANUPS: dict = PASSES["cleanups"]
MODEL_TYPES: list = PASSES["model_types"]
CPU_KERNEL_MISSING: list = PASSES["cpu_kernel_missing"]

# the optimizer logs every fusion at INFO and many warnings (a model type's missing num_heads): not findings
logging.disable(logging.WARNING)


class _State:
    """What the wrapped passes see during one optimize_model call."""

    def __init__(self):
        self.active = False
        self.disabled: set = set()
        self.ran: list = []
        self.fired: list = []
        self.depth = 0
        self.fusions = 0  # fusions on the call stack (a clean-up called by one is the fusion's own work)
        self.fault: tuple | None = None  # test-only (pass, kind)


STATE = _State()


def _proto(obj):
    """The ModelProto a fusion, FusionUtils or OnnxModel works on."""
    for _ in range(4):
        if isinstance(obj, onnx.ModelProto):
            return obj
        obj = getattr(obj, "model", None)
    return None


def _graph_bytes(obj) -> bytes:
    m = _proto(obj)
    return m.graph.SerializeToString() if m is not None else b""


def _inject(name: str, obj) -> None:
    """Test-only faults (OATEST_ORTX_TEST_FAULTS=1 and the model's metadata `oatest.fault` = `raise:<pass>` or
    `break:<pass>`): after the pass fired, raise inside it, or rename the last node of the ONNX domain (a fusion
    appends what it adds) to an operator ONNX does not have (onnx.checker refuses the model)."""
    if STATE.fault is None or STATE.fault[0] != name:
        return
    if STATE.fault[1] == "raise":
        raise RuntimeError(f"oatest injected fault in {name}")
    node = next((n for n in reversed(_proto(obj).graph.node) if n.domain in ("", "ai.onnx")), None)
    if node is not None:
        node.op_type = "OatestNoSuchOp"


def _wrap(name: str, method, outer_only: bool):
    """`method` recording `name` as ran/fired and skipped when disabled. A fusion counts only when no other pass
    called it; a clean-up (`outer_only`) counts, and is skipped, wherever the optimizer calls it but inside a
    fusion (not a fusion's own tidying): `postprocess` -> `prune_graph` -> `remove_unused_constant` fires all
    three, and disabling the last skips it there too."""

    def wrapped(self, *args, **kwargs):
        if not STATE.active:
            return method(self, *args, **kwargs)
        outer = STATE.fusions == 0 if outer_only else STATE.depth == 0
        if name in STATE.disabled and (outer or not outer_only):
            return None
        fusion = not outer_only
        if not outer:
            STATE.depth += 1
            STATE.fusions += fusion
            try:
                return method(self, *args, **kwargs)
            finally:
                STATE.depth -= 1
                STATE.fusions -= fusion
        if name not in STATE.ran:
            STATE.ran.append(name)
        before = _graph_bytes(self)
        STATE.depth += 1
        STATE.fusions += fusion
        try:
            result = method(self, *args, **kwargs)
        finally:
            STATE.depth -= 1
            STATE.fusions -= fusion
        if _graph_bytes(self) != before:
            if name not in STATE.fired:
                STATE.fired.append(name)
            _inject(name, self)
        return result

    wrapped.__oatest_wrapped__ = True
    wrapped.__name__ = getattr(method, "__name__", name)
    return wrapped


def _fusion_classes(cls=None):
    cls = cls or fusion_base.Fusion
    for sub in cls.__subclasses__():
        yield sub
        yield from _fusion_classes(sub)


def _install() -> None:
    """Wraps Fusion.apply (per class, by the class of the object) and the listed clean-ups, once."""
    base_apply = fusion_base.Fusion.apply
    if getattr(base_apply, "__oatest_wrapped__", False):
        return

    def apply(self, *args, **kwargs):
        return _wrap(type(self).__name__, base_apply, outer_only=False)(self, *args, **kwargs)

    apply.__oatest_wrapped__ = True
    fusion_base.Fusion.apply = apply
    for cls in set(_fusion_classes()):
        own = cls.__dict__.get("apply")
        if own is not None and not getattr(own, "__oatest_wrapped__", False):
            cls.apply = _wrap(cls.__name__, own, outer_only=False)
    for name, paths in CLEANUPS.items():
        for path in paths:
            module, cls_name, method = path.split(".")
            cls = getattr(sys.modules.get(module), cls_name, None)
            own = cls.__dict__.get(method) if cls is not None else None
            if own is None:
                raise RuntimeError(f"data/ort-transformers-passes.json: {path} is not in onnxruntime {version()}")
            setattr(cls, method, _wrap(name, own, outer_only=True))


_install()


def version() -> str:
    return onnxruntime.__version__


def optional_passes() -> list:
    """Every pass a configuration may leave out: the fusions (but those skipped on CPU), then the clean-ups
    (data file order)."""
    return [f for f in FUSIONS if f not in CPU_KERNEL_MISSING] + list(CLEANUPS)


def fusion_options(model_type: str, disabled: list):
    """FusionOptions of `model_type` with the switches off whose every fusion is disabled."""
    opts = FusionOptions(model_type)
    switches = {s for s in FUSIONS.values() if s}
    for switch in switches:
        fusions = [f for f, s in FUSIONS.items() if s == switch]
        if hasattr(opts, switch) and all(f in disabled for f in fusions):
            setattr(opts, switch, False)
    return opts


@contextlib.contextmanager
def _torch_placeholder():
    """optimize_by_onnxruntime imports `torch.version` (read only to pick a GPU provider): a placeholder when torch
    is absent, for this call only."""
    try:
        import torch  # noqa: F401

        yield
        return
    except ImportError:
        pass
    torch = types.ModuleType("torch")
    torch.version = types.ModuleType("torch.version")
    torch.version.hip = None
    sys.modules["torch"], sys.modules["torch.version"] = torch, torch.version
    try:
        yield
    finally:
        sys.modules.pop("torch", None)
        sys.modules.pop("torch.version", None)


def model_type_of(model: onnx.ModelProto, options: dict) -> str:
    meta = {p.key: p.value for p in model.metadata_props}
    mt = options.get("model_type") or meta.get("oatest.model_type") or "bert"
    if mt not in _optimizer.MODEL_TYPES:
        raise ValueError(f"unknown model_type {mt!r} (onnxruntime.transformers knows {sorted(_optimizer.MODEL_TYPES)})")
    return mt


def _innermost(e: BaseException) -> str:
    """`Type in file:function (line)`: the exception's type and innermost frame, the file by its base name."""
    tb = traceback.extract_tb(e.__traceback__)
    if not tb:
        return type(e).__name__
    f = tb[-1]
    return f"{type(e).__name__} in {os.path.basename(f.filename)}:{f.name} ({f.lineno})"


def optimize(model: onnx.ModelProto, disabled: list, options: dict) -> onnx.ModelProto:
    """The optimizer's output for `model` (a copy is optimized) as `save_model_to_file` writes it for users
    (sorted, ORT's contrib domain imported), its passes recorded in STATE."""
    model_type = model_type_of(model, options)
    meta = {p.key: p.value for p in model.metadata_props}
    opt_level = int(options.get("opt_level", "0"))
    opts = fusion_options(model_type, disabled)
    with _torch_placeholder():
        optimizer = _optimizer.optimize_model(
            copy.deepcopy(model),
            model_type=model_type,
            num_heads=int(options.get("num_heads") or meta.get("oatest.num_heads") or 0),
            hidden_size=int(options.get("hidden_size") or meta.get("oatest.hidden_size") or 0),
            optimization_options=opts,
            opt_level=opt_level,
            use_gpu=False,
        )
        with tempfile.TemporaryDirectory(prefix="oatest-ortx-") as tmp:
            path = os.path.join(tmp, "optimized.onnx")
            optimizer.save_model_to_file(path)
            return onnx.load(path)


# ops ONNX Runtime registers in the default domain where ONNX has none (its contrib LayerNormalization below opset
# 17, SimplifiedLayerNormalization): the fusions write them on purpose, ORT runs them, onnx.checker refuses them
ORT_CONVENTION = re.compile(r"No Op registered for (LayerNormalization|SimplifiedLayerNormalization) with domain_version")


def checker_accepts(model: onnx.ModelProto) -> bool:
    """Whether onnx.checker accepts the model as given (before optimizing)."""
    try:
        onnx.checker.check_model(model)
    except Exception:  # noqa: BLE001
        return False
    return True


def _session(model_bytes: bytes, level: str, threads: int):
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = ORT_LEVELS[level]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return onnxruntime.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def _to_numpy(t):
    name, code, dims, raw = t
    dtype = helper.tensor_dtype_to_np_dtype(code)
    return name, np.frombuffer(raw, dtype=dtype).reshape(dims).copy()


def _from_numpy(name, a):
    a = np.asarray(a, order="C")
    return (name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape), a.tobytes())


_ORT_TYPES = {"tensor(int32)": np.int32, "tensor(int64)": np.int64}


def feeds_for(sess, feeds: dict) -> dict:
    """The feeds a session takes: inputs the optimizer pruned are left out, and an integer input it retyped
    (EmbedLayerNormalization takes int32 ids where the model had int64) gets the same values in its new type."""
    out = {}
    for i in sess.get_inputs():
        if i.name not in feeds:
            continue
        a = feeds[i.name]
        want = _ORT_TYPES.get(i.type)
        if want is not None and a.dtype != want and a.dtype.kind in "iu":
            a = a.astype(want)
        out[i.name] = a
    return out


def _fault_of(model: onnx.ModelProto):
    if os.environ.get("OATEST_ORTX_TEST_FAULTS") != "1":
        return None
    meta = {p.key: p.value for p in model.metadata_props}
    kind, _, name = meta.get("oatest.fault", "").partition(":")
    return (name, kind) if kind in ("raise", "break") and name else None


def run(model_bytes: bytes, inputs: list, level: str, disabled: list, threads: int = 1, options=None) -> dict:
    """Optimizes (unless `disable`), checks and runs; returns status ('ok' | 'error' | 'crash'), message,
    outputs, passes fired and ran."""
    options = dict(options or [])
    STATE.ran, STATE.fired = [], []
    result = {"status": "ok", "message": "", "outputs": [], "fired": STATE.fired, "ran": STATE.ran}
    try:
        model = onnx.load_from_string(model_bytes)
        if level not in ORT_LEVELS:
            raise ValueError(f"unknown level {level!r} (disable, basic, extended, all)")
        model_type_of(model, options)
    except Exception as e:  # noqa: BLE001 - a model or configuration this target cannot take
        result.update(status="error", message=f"cannot take the model: {type(e).__name__}: {e}")
        return result
    if level != "disable":
        # fusions into CUDA-only operators are off on CPU (data file: cpu_kernel_missing)
        if options.get("gpu_fusions") != "1":
            disabled = list(disabled) + CPU_KERNEL_MISSING
        STATE.active, STATE.disabled, STATE.depth, STATE.fault = True, set(disabled), 0, _fault_of(model)
        STATE.fusions = 0
        try:
            optimized = optimize(model, disabled, options)
        except Exception as e:  # noqa: BLE001 - an exception inside the optimizer is its crash
            result.update(status="crash", message=f"optimize_model raised {_innermost(e)}: {str(e)[:2000]}")
            return result
        finally:
            STATE.active = False
        if options.get("oatest.save_optimized"):
            # extraction diffs the optimizer's output against the model (`oatest extract ort-transformers`)
            onnx.save(optimized, options["oatest.save_optimized"])
        try:
            onnx.checker.check_model(optimized)
        except Exception as e:  # noqa: BLE001
            # only a model the checker accepted before optimizing blames the optimizer: ORT's own test models
            # often do not pass it (LayerNormalization below opset 17, the default domain spelled `ai.onnx`)
            if checker_accepts(model) and not ORT_CONVENTION.search(str(e)):
                result.update(status="error", message=f"onnx.checker refuses the optimized model: {str(e)[:2000]}")
                return result
        model_bytes = optimized.SerializeToString()
    try:
        sess = _session(model_bytes, level, threads)
    except Exception as e:  # noqa: BLE001
        what = "the model" if level == "disable" else "the optimized model"
        result.update(status="error", message=f"onnxruntime refuses {what}: {str(e)[:2000]}")
        return result
    try:
        names = [o.name for o in model.graph.output]
        outs = sess.run(names, feeds_for(sess, dict(_to_numpy(t) for t in inputs)))
        result["outputs"] = [_from_numpy(n, a) for n, a in zip(names, outs)]
    except Exception as e:  # noqa: BLE001
        result.update(status="error", message=f"onnxruntime run: {str(e)[:2000]}")
    return result
