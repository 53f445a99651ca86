"""pytest plugin: pattern extraction from TVM's own Relax tests by pass-call instrumentation.

Load with `-p oatest_tvm_capture` (python/ on sys.path) and OATEST_CAPTURE_DIR=<dir>. Every PassContext gets
an instrument that sees each Relax pass run while the tests run (directly, or nested in a Sequential). When a
pass changes the module, the plugin cuts subgraph-level patterns (each changed Relax function with every
function it calls, PrimFuncs included) and block-level patterns (the changed function's dataflow bindings up to
the first changed one, as a function of its own), closes each as its own IRModule, prints it as TVMScript
(tensor constants in its metadata section, within MAX_SCRIPT characters), parses it back, and keeps it only if
the same pass (the very pass object when the test called it
from Python, else the pass built with default arguments) still changes it. Kept patterns go to
<dir>/<pass>/<hash>.json with their provenance; tests that fail on the installed TVM are listed in
<dir>/failed.jsonl, never silently lost.

Each relax.transform constructor is wrapped so that a pass object remembers its arguments; a pattern found by the
test's own pass object records them (`pass_args`, oatest_tvm_passes' encoding) when the pass rebuilt from them
still changes the pattern, or why not (`pass_args_note`).
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import threading

import pytest
import tvm
from tvm import relax

import oatest_tvm_passes

try:
    from tvm_ffi import structural_equal, structural_hash
except ImportError:  # pragma: no cover
    from tvm.ir import structural_equal, structural_hash

OUT = os.environ.get("OATEST_CAPTURE_DIR")
MAX_SCRIPT = 64 * 1024


def _relax_pass_names() -> dict:
    """PassInfo name -> the relax.transform constructor's name (they differ for a few passes, e.g.
    DecomposeOps is built by DecomposeOpsForInference; relax.BindSymbolicVars by BindSymbolicVars)."""
    names = {n: n for n in dir(relax.transform) if n[:1].isupper()}
    names.update({"DispatchSampling": "DispatchSampling", "DispatchSortScan": "DispatchSortScan"})
    for ctor in list(names.values()):
        try:
            obj = getattr(relax.transform, ctor)()
            names.setdefault(obj.info.name, ctor)
        except Exception:  # noqa: BLE001 - constructors that need arguments, or are not passes
            pass
    return names


RELAX_PASSES = _relax_pass_names()
_state = threading.local()
_current = {"test": None, "file": None, "function": None}
_stats = {"pairs": 0, "candidates": 0, "verified": 0, "written": 0}
_seen: set[str] = set()
# id(pass object) -> (the object, its encoded constructor arguments or the Unexpressible message)
_ARGS: dict = {}


def _objs() -> list:
    if not hasattr(_state, "objs"):
        _state.objs = []
    return _state.objs


def _default_pass(name: str):
    try:
        return getattr(relax.transform, name)()
    except Exception:  # noqa: BLE001 - passes that need arguments
        return None


def _reachable(mod: tvm.IRModule, root) -> list:
    """GlobalVars a function needs (itself first), transitively."""
    out, stack = [], [root]
    while stack:
        gv = stack.pop()
        if any(g.same_as(gv) for g in out):
            continue
        out.append(gv)
        func = mod[gv]
        if isinstance(func, relax.Function):
            for callee in relax.analysis.all_global_vars(func):
                if callee.name_hint in [g.name_hint for g in mod.get_global_vars()]:
                    stack.append(mod.get_global_var(callee.name_hint))
    return out


def _submodule(mod: tvm.IRModule, gvs) -> tvm.IRModule:
    return tvm.IRModule({gv: mod[gv] for gv in gvs}, attrs=mod.attrs)


def _block_cut(mod: tvm.IRModule, gv, after: tvm.IRModule):
    """The function's first dataflow block, cut right after the first binding the pass changed: a smaller
    function returning that binding's value (None when there is nothing smaller to cut)."""
    func = mod[gv]
    if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
        return None
    blocks = [b for b in func.body.blocks if isinstance(b, relax.DataflowBlock)]
    if not blocks or len(blocks[0].bindings) < 3:
        return None
    bindings = list(blocks[0].bindings)
    new = after[gv.name_hint] if gv.name_hint in [g.name_hint for g in after.get_global_vars()] else None
    kept = set()
    if isinstance(new, relax.Function) and isinstance(new.body, relax.SeqExpr):
        for b in new.body.blocks:
            for nb in b.bindings:
                kept.add(structural_hash(nb.value, map_free_vars=True))
    cut = None
    for i, b in enumerate(bindings):
        if structural_hash(b.value, map_free_vars=True) not in kept:
            cut = i
            break
    if cut is None or cut + 1 >= len(bindings):
        return None
    region = bindings[: cut + 2]  # the changed binding and its first reader keep the rewrite's context
    last = region[-1].var
    try:
        bb = relax.BlockBuilder()
        params = list(func.params)
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"} if func.attrs else None
        with bb.function("main", params, attrs=attrs or None):
            with bb.dataflow():
                for b in region:
                    bb.emit_normalized(b)
                out = bb.emit_output(last)
            bb.emit_func_output(out)
        sub = bb.get()
        main = sub.get_global_var("main")
        for callee in relax.analysis.all_global_vars(sub[main]):
            if callee.name_hint in [g.name_hint for g in mod.get_global_vars()]:
                for g in _reachable(mod, mod.get_global_var(callee.name_hint)):
                    sub[g] = mod[g]
        return relax.transform.Normalize()(sub)
    except Exception:  # noqa: BLE001 - an uncuttable region (symbolic shapes, impure calls, ...)
        return None


def _fires(pass_obj, mod: tvm.IRModule) -> bool:
    try:
        with tvm.transform.PassContext(opt_level=3):
            out = _ORIG_CALL(pass_obj, mod)
        return not structural_equal(out, mod)
    except Exception:  # noqa: BLE001
        return False


def _recorded_args(name: str, pass_obj, closed: tvm.IRModule):
    """(arguments, None) when the test's own pass object was built from arguments oatest can record and the
    pass rebuilt from them changes `closed`; else (None, why not)."""
    if pass_obj is None:
        return None, "the pass ran inside another pass (no call of its own to record)"
    hit = _ARGS.get(id(pass_obj))
    if hit is None or not hit[0].same_as(pass_obj):
        return None, "the pass object was not built by a relax.transform constructor the test called"
    args = hit[1]
    if isinstance(args, str):
        return None, args
    try:
        rebuilt = oatest_tvm_passes.make_pass(name, args)
    except Exception as e:  # noqa: BLE001
        return None, f"the recorded arguments do not rebuild the pass: {type(e).__name__}: {str(e)[:200]}"
    if not _fires(rebuilt, closed):
        return None, "the pass rebuilt from the recorded arguments does not change the pattern"
    return args, None


def _wrap_constructor(ctor_name: str) -> None:
    """Pass constructors that are plain functions only (wrapping a class would break isinstance)."""
    module = relax.backend if ctor_name in ("DispatchSampling", "DispatchSortScan") else relax.transform
    ctor = getattr(module, ctor_name, None)
    if not inspect.isfunction(ctor) or getattr(ctor, "_oatest_wrapped", False):
        return
    name = ctor_name

    def wrapped(*args, **kwargs):
        obj = ctor(*args, **kwargs)
        try:
            rec = oatest_tvm_passes.encode_args(name, args, kwargs)
        except oatest_tvm_passes.Unexpressible as e:
            rec = f"an argument oatest cannot express: {e}"
        except Exception as e:  # noqa: BLE001 - recording must never break the test
            rec = f"the arguments could not be recorded: {type(e).__name__}: {str(e)[:200]}"
        if isinstance(obj, tvm.ir.transform.Pass):
            _ARGS[id(obj)] = (obj, rec)
        return obj

    wrapped._oatest_wrapped = True
    wrapped.__wrapped__ = ctor
    wrapped.__signature__ = inspect.signature(ctor)
    setattr(module, ctor_name, wrapped)


def _keep(name: str, pass_obj, candidate: tvm.IRModule, granularity: str) -> None:
    _stats["candidates"] += 1
    try:
        text = candidate.script()
        # tensor constants print as references into a metadata section, which show_meta adds
        if "metadata[" in text:
            text = candidate.script(show_meta=True)
        if len(text) > MAX_SCRIPT:
            return
        closed = tvm.script.from_source(text)
    except Exception:  # noqa: BLE001 - not printable/parsable as a closed module
        return
    default = _default_pass(name)
    by_object = pass_obj is not None and _fires(pass_obj, closed)
    by_default = default is not None and _fires(default, closed)
    if not (by_object or by_default):
        return
    args, note = _recorded_args(name, pass_obj, closed)
    _stats["verified"] += 1
    key = f"{name}:{structural_hash(closed)}"
    if key in _seen:
        return
    _seen.add(key)
    digest = f"{structural_hash(closed) & 0xFFFFFFFFFFFFFFFF:016x}"
    record = {
        "format": 1,
        "kind": "tvm-relax",
        "pass": name,
        "granularity": granularity,
        # default: the pass built with no arguments fires on it (usable by oatest's pipelines); otherwise only
        # the test's own pass object (with its arguments, shown in pass_repr) did
        "fires_with_default_args": by_default,
        "pass_repr": str(pass_obj)[:500] if pass_obj is not None else None,
        # the test's own pass call's arguments (oatest_tvm_passes' encoding), verified to fire rebuilt
        "pass_args": args,
        "pass_args_note": note,
        "functions": sorted(g.name_hint for g in closed.get_global_vars()),
        "provenance": dict(_current),
        "tvm_version": tvm.__version__,
        "script": text,
    }
    path = os.path.join(OUT, name, digest + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, path)
    _stats["written"] += 1


def _record(name: str, pass_obj, before: tvm.IRModule, after: tvm.IRModule) -> None:
    _stats["pairs"] += 1
    after_names = {g.name_hint: g for g in after.get_global_vars()}
    changed_relax = False
    for gv in before.get_global_vars():
        func = before[gv]
        if not isinstance(func, relax.Function):
            continue
        other = after_names.get(gv.name_hint)
        if other is not None and structural_equal(after[other], func):
            continue
        changed_relax = True
        _keep(name, pass_obj, _submodule(before, _reachable(before, gv)), "subgraph")
        cut = _block_cut(before, gv, after)
        if cut is not None:
            _keep(name, pass_obj, cut, "block")
    if not changed_relax:
        # the pass changed only PrimFuncs or module attributes (e.g. AnnotateTIROpPattern): the whole module
        _keep(name, pass_obj, before, "subgraph")


@tvm.instrument.pass_instrument
class _Capture:
    def __init__(self):
        self.stack = []

    def run_before_pass(self, mod, info):
        busy = getattr(_state, "busy", False)
        name = info.name[len("relax.") :] if info.name.startswith("relax.") else info.name
        if not busy and name in RELAX_PASSES and isinstance(mod, tvm.IRModule) and _current["test"]:
            self.stack.append((RELAX_PASSES[name], mod, structural_hash(mod), info.name))
        else:
            self.stack.append(None)

    def run_after_pass(self, mod, info):
        top = self.stack.pop() if self.stack else None
        if top is None:
            return
        name, before, h, info_name = top
        if structural_hash(mod) == h:
            return
        objs = _objs()
        pass_obj = objs[-1] if objs and objs[-1].info.name == info_name else None
        objs_snapshot = list(objs)
        _state.busy = True  # verification runs passes too: not captured
        try:
            _record(name, pass_obj, before, mod)
        except Exception:  # noqa: BLE001 - capture must never break the test under it
            pass
        finally:
            _state.busy = False
            objs[:] = objs_snapshot


_INSTRUMENT = _Capture()
_ORIG_CALL = tvm.ir.transform.Pass.__call__
_ORIG_CTX_INIT = tvm.transform.PassContext.__init__


def _call(self, mod):
    objs = _objs()
    objs.append(self)
    try:
        return _ORIG_CALL(self, mod)
    finally:
        objs.pop()


def _ctx_init(self, *args, **kwargs):
    instruments = list(kwargs.pop("instruments", None) or [])
    if _current["test"] and not any(i.same_as(_INSTRUMENT) for i in instruments):
        instruments.append(_INSTRUMENT)
    _ORIG_CTX_INIT(self, *args, instruments=instruments, **kwargs)


def pytest_configure(config):
    if not OUT:
        raise pytest.UsageError("oatest_tvm_capture needs OATEST_CAPTURE_DIR")
    os.makedirs(OUT, exist_ok=True)
    tvm.ir.transform.Pass.__call__ = _call
    tvm.transform.PassContext.__init__ = _ctx_init
    for ctor_name in sorted(set(RELAX_PASSES.values())):
        _wrap_constructor(ctor_name)


@pytest.fixture(autouse=True)
def _oatest_capture(request):
    _current.update(test=request.node.nodeid, file=str(request.node.path.name), function=request.node.name)
    # if TVM crashes the process inside this test, the extractor reruns the file without it
    with open(os.path.join(OUT, "current_test"), "w") as f:
        f.write(request.node.nodeid)
    with tvm.transform.PassContext(opt_level=tvm.transform.PassContext.current().opt_level):
        yield
    _current.update(test=None, file=None, function=None)


def pytest_runtest_logreport(report):
    if report.failed:
        with open(os.path.join(OUT, "failed.jsonl"), "a") as f:
            f.write(json.dumps({"test": report.nodeid, "when": report.when, "error": str(report.longrepr)[-600:]}))
            f.write("\n")


def pytest_sessionfinish(session, exitstatus):
    path = os.path.join(OUT, "capture_stats.json")
    total = dict(_stats)
    if os.path.exists(path):  # a rerun after a crash adds to the earlier run's counts
        with open(path) as f:
            for k, v in json.load(f).items():
                total[k] = total.get(k, 0) + v
    with open(path, "w") as f:
        json.dump(total, f, indent=1)
    with contextlib.suppress(FileNotFoundError):  # cleanup never raises
        os.remove(os.path.join(OUT, "current_test"))
