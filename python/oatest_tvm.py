"""The TVM Relax side of oatest's `tvm` target, called from the worker process through pyo3 (see
src/compiler/tvm.rs): the request entry points and the compile-and-run machinery. `run` compiles an ONNX model
(or a Relax-level recipe, see oatest_tvm_synth) under a configuration and runs it; `version` and
`optional_passes` describe the target to the worker's greeting.

A configuration is a level plus passes to leave out. The pipeline is one explicit list of Relax passes; each
pass belongs to a level, and a level runs its passes and those of every lower level. `required` passes are
the smallest pipeline that still builds for the Relax VM (the unoptimized reference). A PassInstrument in the
PassContext records which pipeline passes ran and which changed the module (structural hash before/after). A
pipeline pass whose contract (the pipeline data's `contracts`) the test's module breaks is left out of every
configuration; a test whose inserted pass's contract it breaks fails in every configuration (CONTRACT).

Tensors cross the boundary as (name, ONNX dtype code, dims, raw little-endian bytes).

A model may also be a recipe (JSON): oatest_tvm_synth turns it into a Relax module, and oatest_tvm_check
answers the campaign's pattern check. Recipe keys: `seed_onnx` (hex), `pattern` (TVMScript), `pattern_ir` (the
same module as TVM JSON, loaded instead of parsing when present), `rng`, `pass` and `provenance` (information),
`check_only` (the campaign's pattern check: splice only, answer with the module JSON and the possibly shrunk
script), `strict` (compile with TIR's argument assertions on), `pattern_shrunk` (information).
A model may also be a module test (kind `oatest-relax-module`, from triage's Relax-level reduction: the module's
TVMScript, the pass it inserts, test-only fault metadata; main's parameters are its inputs, by name), or a request
to that reduction's tool (kind `oatest-relax-tool`, answered by oatest_tvm_reduce as one uint8 output `json`).

Builds are for speed, identically for every configuration of a test: LLVM at -O0 (F16C when the host has it), TIR
argument assertions, CSE and storage rewriting off, lowered by oatest_tvm_memo's CPU lowering, object files written
without debug information, linked with `ld -shared` rather than JIT-compiled.

The worker loads oatest_tvm_passes, oatest_tvm_feeds, oatest_tvm_vary, oatest_tvm_synth, oatest_tvm_check,
oatest_tvm_reduce, oatest_tvm_memo and this module, in that order, from the sources compiled into the binary
(RUNNER_SOURCES in src/compiler/tvm.rs); a TVM bug's repro.py embeds them all. onnx is imported only for tests
that are ONNX models or recipes.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import subprocess
import tempfile
import traceback
from collections import OrderedDict

import numpy as np
import tvm
from tvm import relax

import tvm.tirx
import tvm_ffi
from tvm_ffi import structural_hash

import oatest_tvm_memo
import oatest_tvm_passes
import oatest_tvm_reduce
import oatest_tvm_synth
from oatest_tvm_check import check_pattern
from oatest_tvm_synth import _imported, leaf_count

# the pipeline is data (python/oatest_tvm_pipeline.json), shared with `oatest patterns stats`
LEVELS = oatest_tvm_passes.LEVELS
PIPELINE = oatest_tvm_passes.PIPELINE
NAMES = {name for name, _ in PIPELINE} | set(oatest_tvm_passes.PLACEMENT)


# Tests compile with LLVM at -O0: oatest tests the Relax passes, and -O0 makes codegen ~5x faster (0.04 s
# instead of 0.19 s for a 16-PrimFunc module). The reference and the optimized configuration share it.
LLVM: dict = {"kind": "llvm", "opt-level": 0}


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


# float16 arithmetic otherwise goes through libgcc's conversion calls (a third of the run time of float16 tests)
if {"avx", "f16c"} <= _cpu_flags():
    LLVM["mattr"] = ["+avx", "+f16c"]


# TIR argument assertions off: they are most of each PrimFunc's code and made the JIT at VM start 3x slower.
# They only check calls a correct program never makes; a pass that breaks a call still shows as a crash or a
# wrong result (and the pattern check runs with them on). TIR's own CSE and storage rewriting are off too:
# oatest tests Relax passes, and both builds of a test are lowered the same way.
PASS_CONFIG = {"tirx.disable_assert": True, "tirx.disable_cse_tir": True, "tirx.disable_storage_rewrite": True}


def _target():
    return tvm.target.Target(LLVM, host=LLVM)


# Loading a build: the Relax VM JIT-compiles its LLVM module with MCJIT, which always generates code at -O3
# (2-3 ms per PrimFunc). Emitting the object file at the target's -O0 and linking it with `ld -shared` takes half
# as long, so builds are loaded that way when `ld` exists (and through the JIT otherwise).
_LD = shutil.which("ld")


def _memory_tmpdir() -> str | None:
    """Each build writes object files and a shared library into a fresh temporary directory: on a disk that costs
    a few ms of wall time per build (the rmdir alone), in memory a tenth of a millisecond. /dev/shm when it is
    writable with at least 256 MiB free and TMPDIR does not say otherwise."""
    if "TMPDIR" in os.environ or not os.access("/dev/shm", os.W_OK):
        return None
    st = os.statvfs("/dev/shm")
    return "/dev/shm" if st.f_bavail * st.f_frsize >= 256 << 20 else None


tempfile.tempdir = _memory_tmpdir()


def _ld_shared(output, objects, options=None, cc=None, cwd=None, ccache_env=None):
    subprocess.run([_LD, "-shared", "-o", output, *objects], check=True, capture_output=True)


_ld_shared.output_format = "so"


def _unloadable(path: str):
    """A shared library (or an LLVM module file) as a runtime module that is freed once nothing holds it.
    `tvm.runtime.load_module` keeps every module it loads for the life of the process (tvm_ffi's
    `keep_module_alive`): five mappings and about 120 KiB a build, which made the worker reach its memory budget
    sooner (and, for `_object`'s modules, an LLVM context of several MB each)."""
    try:
        return tvm_ffi.load_module(path, keep_module_alive=False)
    except (AttributeError, TypeError):  # a tvm_ffi without it (older apache-tvm wheels)
        return tvm.runtime.load_module(path)


def load(ex):
    """A runtime module for a build (an executable, or a module of PrimFuncs), linked with `ld` and loaded as a
    shared library; the build itself (JIT-compiled when called) when that is not possible."""
    if _LD is None or os.environ.get("OATEST_TVM_JIT") == "1":
        return ex
    fd, path = tempfile.mkstemp(prefix="oatest-tvm-", suffix=".so")
    os.close(fd)
    try:
        try:
            _export(ex, path)
        except Exception:  # noqa: BLE001 - a module this export does not handle: TVM's own
            ex.export_library(path, fcompile=_ld_shared)
        return _unloadable(path)
    except Exception:  # noqa: BLE001 - whatever failed, the JIT path gives the build its own error
        return ex
    finally:
        # a failed export may have removed the file already (a build without LLVM code exports C sources, which
        # `ld` cannot link): cleanup never raises
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _export(ex, path: str) -> None:
    """`ex.export_library(path, fcompile=_ld_shared)` for a build whose code is all LLVM modules, each module's
    object file written without debug information (`_object`); the executable's imports packed into an object
    file as export_library packs them."""
    # an executable holds its runtime module; a module's missing attribute is a function lookup (`getattr(ex,
    # "mod")` on an LLVM module JIT-compiles it to look for "mod")
    mod = ex if isinstance(ex, tvm_ffi.Module) else ex.mod
    with tempfile.TemporaryDirectory(prefix="oatest-tvm-") as work:
        files, target, system, prefix = [], None, False, ""
        for i, m in enumerate(mod._collect_dso_modules()):
            if m.kind != "llvm":
                raise ValueError(f"a {m.kind} module")
            files.append(_object(m, os.path.join(work, f"lib{i}")))
            system = bool(m.get_function("__tvm_is_system_module")())
            target = m.get_function("_get_target_string")()
            prefix = m.get_function("__tvm_get_system_lib_prefix")() or ""
        if mod.imports:
            if target is None:
                raise ValueError("imports without an LLVM module")
            devc = os.path.join(work, f"{prefix}devc.o")
            tvm.runtime._ffi_api.ModulePackImportsToLLVM(mod, system, target, prefix).write_to_file(devc)
            files.append(devc)
        _ld_shared(path, files)


# TVM's LLVM code generator always writes debug information (a subprogram per PrimFunc, a declared variable per
# parameter and let), which made emitting an object file take twice as long. LLVM drops a module's debug
# information when it reads one whose "Debug Info Version" flag it does not know, so `_object` writes the module
# as bitcode with that flag renamed and emits the object file from the module read back: 30% less time, the same
# code (docs/BENCHMARKS.md, "TVM throughput: object files without debug information").
_DEBUG_FLAG = b"Debug Info Version"


def _object(module, stem: str) -> str:
    """Writes `module`'s object file without debug information to `stem`.o (with it when the flag is not there
    to rename) and returns its path."""
    obj = stem + ".o"
    module.write_to_file(stem + ".bc")
    with open(stem + ".bc", "rb") as f:
        code = f.read()
    if code.count(_DEBUG_FLAG) != 1:
        module.write_to_file(obj)
        return obj
    # TVM reads LLVM modules from files named .ll; LLVM's parser reads bitcode under any name
    with open(stem + ".ll", "wb") as f:
        f.write(code.replace(_DEBUG_FLAG, b"Debug Info Vers1on"))
    with _quiet_stderr():  # LLVM says that it ignores the debug information
        stripped = _unloadable(stem + ".ll")  # freed with its LLVM context once written (load_module keeps it)
    stripped.write_to_file(obj)
    return obj


@contextlib.contextmanager
def _quiet_stderr():
    """Standard error (the file descriptor: native code writes it) sent to /dev/null for the duration."""
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


_FOLD_BUILDS: OrderedDict = OrderedDict()
FOLD_MAX = 1024  # builds kept, the ones used last (a shared library each, about 100 KiB)


def _fold_build(mod, target=None, pipeline="default"):
    """FoldConstant evaluates constant calls by building each PrimFunc through the global `tirx.build` with a
    plain `llvm` target (-O3), which made it 70% of a pipeline's time. This build uses -O0 for such targets, and
    the runner's CPU lowering when its assertions are off, links it as a shared library (`load`: a JIT-compiled
    module holds its LLVM module, about 1 MiB, which made these builds half of a worker's memory growth) and keeps
    the FOLD_MAX builds used last, by structural equality (in a campaign 4 in 10 builds are hits)."""
    if target is not None:
        t = tvm.target.Target(target)
        if t.kind.name == "llvm" and "opt-level" not in t.attrs:
            target = _target()
            if pipeline == "default" and tvm.transform.PassContext.current().config.get("tirx.disable_assert"):
                pipeline = oatest_tvm_memo.CPU
    key = structural_hash(mod)
    how = (str(target), pipeline)
    for m, h, built in _FOLD_BUILDS.get(key, []):
        if h == how and tvm_ffi.structural_equal(m, mod):
            oatest_tvm_memo.used(_FOLD_BUILDS, key, FOLD_MAX)
            return built
    built = load(tvm.tirx.build(mod, target, pipeline))
    _FOLD_BUILDS.setdefault(key, []).append((mod, how, built))
    oatest_tvm_memo.used(_FOLD_BUILDS, key, FOLD_MAX)
    return built


tvm.register_global_func("tirx.build", _fold_build, override=True)
oatest_tvm_memo.install()


def _make(name: str, extra: tuple | None = None):
    if extra is not None and name == extra[0]:
        return oatest_tvm_passes.make_pass(name, extra[1])
    return oatest_tvm_passes.constructor(name)()


def passes_for(level: str, disabled: list[str], extra: str | None = None, lift: bool = False,
               skip=()) -> list[str]:
    """The pipeline of a configuration, by name. `extra`: a pass outside the pipeline (the test's pattern's
    pass), inserted at its placement (oatest_tvm_passes.PLACEMENT) in every configuration above `disable`
    that does not leave it out. `lift`: the module has local functions, which the VM cannot build
    (VMShapeLower: "make sure to run it after LambdaLift"), so every configuration, the reference too, runs
    LambdaLift first unless it runs it at its placement (a LambdaLift test's `disable` runs it as well).
    `skip`: pipeline passes whose contract the module breaks (oatest_tvm_passes.skipped_by_contract), left out
    of every configuration."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r} (one of {LEVELS})")
    rank = LEVELS.index(level)
    out = []
    for name, lowest in PIPELINE:
        if name in skip:
            continue
        if lowest == "required":
            out.append(name)
        elif LEVELS.index(lowest) <= rank and name not in disabled:
            out.append(name)
    if extra is not None and rank > 0 and extra not in disabled:
        out = oatest_tvm_passes.insert(out, extra)
    if lift and "LambdaLift" not in out:
        out = ["LambdaLift"] + out
    return out


_LOCAL_FUNCTIONS: list = [None, False]  # the last module asked about (both configurations of a test ask)


def has_local_functions(mod) -> bool:
    """Whether a Relax function of `mod` defines a function inside its body."""
    if _LOCAL_FUNCTIONS[0] is not None and _LOCAL_FUNCTIONS[0].same_as(mod):
        return _LOCAL_FUNCTIONS[1]
    _LOCAL_FUNCTIONS[:] = [mod, _has_local_functions(mod)]
    return _LOCAL_FUNCTIONS[1]


def _has_local_functions(mod) -> bool:
    found = []

    def visit(e):
        if isinstance(e, relax.Function):
            found.append(e)

    for gv in mod.get_global_vars():
        f = mod[gv]
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f.body, visit)
            if found:
                return True
    return False


def optional_passes() -> list[str]:
    """The passes a configuration may leave out, in pipeline order (every pipeline pass but the required ones),
    then the passes a test may insert: what a synthesized test can target."""
    return [name for name, lowest in PIPELINE if lowest != "required"] + sorted(oatest_tvm_passes.PLACEMENT)


def _extra_pass(recipe: dict | None) -> tuple | None:
    """(name, arguments) of the pass a recipe's pattern came from, when it is not a pipeline pass."""
    if recipe is None or recipe.get("pass") not in oatest_tvm_passes.PLACEMENT:
        return None
    if recipe.get("kind") == oatest_tvm_reduce.MODULE_KIND:
        return recipe["pass"], recipe.get("pass_args")
    # the pass was called on the pattern's entry by its name in the test (`func_name="main"`); spliced, the
    # entry is oatest_tvm_synth.PATTERN_NAME, and `main` is the seed's
    return recipe["pass"], oatest_tvm_synth.spliced_pass_args(recipe)


# Passes whose PassInfo name is not their constructor's: the instrumentation sees the former, configurations
# and reports use the latter (DecomposeOpsForInference never fired in a 1-hour campaign for this)
PASS_ALIASES = {"DecomposeOps": "DecomposeOpsForInference"}


@tvm.instrument.pass_instrument
class Recorder:
    """Records the pipeline passes that ran and those that changed the module, and the one running now
    (`running`: the pass in flight when an exception comes out of the pipeline; None between passes). Hashing a
    module costs ~0.25 ms, so a pass that returns the very same module object did not change it, and the module a
    pass returns keeps its hash for the next pass. Only the configuration's own passes count (`names`), and only
    where the configuration calls them: a pass nested in another (FuseTransposeMatmul runs FuseOpsByPattern,
    FuseOps runs RemoveUnusedParameters) is part of that pass, and leaving the nested one out of a configuration
    would not stop it."""

    def __init__(self, names=NAMES):
        self.names = set(names)
        self.stack = []  # (name, module before it: None unless a counted pass) of each pass in flight
        self.ran = []
        self.fired = []
        self.running = None
        self.known = None  # (module, its structural hash)
        self.stop_after = None  # a pass whose last run without an error ends the run (STOP_AFTER)
        self.stop_runs = 0  # how many times the configuration runs it
        self.stopped = False

    def _hash(self, mod):
        if self.known is not None and self.known[0].same_as(mod):
            return self.known[1]
        h = structural_hash(mod)
        self.known = (mod, h)
        return h

    def run_before_pass(self, mod, info):
        nested = any(m is not None for _, m in self.stack)
        name = PASS_ALIASES.get(info.name, info.name)
        counted = name in self.names and not nested
        self.stack.append((name, mod if counted else None))
        if counted:
            self.running = name

    def within(self, error: BaseException | None = None) -> str | None:
        """The innermost Relax pass in flight inside the running configuration pass (at an error), if any; none
        when the innermost Python code of `error`'s traceback is the configuration pass's own (FuseOpsByPattern
        calling back FuseTransposeMatmul's pattern check, which raised: a review called that pass imprecise)."""
        if error is not None and self.running and _own_code(error, self.running):
            return None
        for name, _ in reversed(self.stack):
            if name == self.running:
                return None
            if hasattr(relax.transform, name):
                return name
        return None

    def run_after_pass(self, mod, info):
        name = PASS_ALIASES.get(info.name, info.name)
        if all(n != name for n, _ in self.stack):
            return
        # a nested pass that raised, caught by the pass around it, never came back: its entries go too
        while self.stack[-1][0] != name:
            self.stack.pop()
        before = self.stack.pop()[1]
        if before is None:
            return
        self.running = None
        if name not in self.ran:
            self.ran.append(name)
        if name == self.stop_after:
            self.stop_runs -= 1
            if self.stop_runs <= 0:
                self.stopped = True
                raise RuntimeError(STOPPED.format(name))
        if before.same_as(mod) or name in self.fired:
            return
        if _changed(before, mod, self._hash):
            self.fired.append(name)


def _own_code(error: BaseException, name: str) -> bool:
    """Whether the innermost Python frame of `error`'s traceback is in the file that defines pass `name`."""
    try:
        own = inspect.getsourcefile(getattr(relax.transform, name))
    except (AttributeError, TypeError):
        return False
    frames = [f.filename for f in traceback.extract_tb(error.__traceback__) if f.filename.endswith(".py")]
    return own is not None and bool(frames) and os.path.abspath(frames[-1]) == os.path.abspath(own)


def _changed(before, after, module_hash) -> bool:
    """Whether a pass changed the module: function by function (a pass keeps the functions it leaves alone, so
    most are the same objects and need no comparison); a function added, removed or renamed is a change (a
    module's structural equality compares its functions by name); the whole module's structural hash where other
    module attributes are new objects."""
    old = {gv.name_hint: f for gv, f in before.functions.items()}
    new = {gv.name_hint: f for gv, f in after.functions.items()}
    if old.keys() != new.keys():
        return True
    same_attrs = before.attrs is after.attrs or (before.attrs is not None and before.attrs.same_as(after.attrs))
    if not same_attrs:
        return module_hash(before) != module_hash(after)
    return any(not f.same_as(old[k]) and not tvm_ffi.structural_equal(old[k], f, map_free_vars=True)
               for k, f in new.items())


def version() -> str:
    return tvm.__version__


def _fault(meta: dict, level: str, fired: list[str]) -> str | None:
    """Test-only misbehaviour (OATEST_TVM_TEST_FAULTS=1): the model's metadata (a module test's `fault`)
    `oatest.fault` = segfault | wrong | raise:<pass> (an exception inside that pipeline or inserted pass, after
    it ran), with `oatest.fault.needs` = passes that must all have fired (before it, for `raise`)."""
    if os.environ.get("OATEST_TVM_TEST_FAULTS") != "1" or level == "disable":
        return None
    needs = [p for p in meta.get("oatest.fault.needs", "").split(";") if p]
    if all(p in fired for p in needs):
        return meta.get("oatest.fault")
    return None


def _raising(name: str, inner, fault, names: bool = False):
    """Pass `name` that runs `inner`, then raises when `fault()` (the test's fault then) is `raise:<name>`; with
    `names` (metadata `oatest.fault.names`), the message says whether a pattern is spliced into the module."""

    def transform(mod, _ctx):
        out = inner(mod)
        if fault() == f"raise:{name}":
            spliced = any(g.name_hint.startswith("oatest_pattern") for g in out.functions)
            listed = (" on the pattern's module" if spliced else " on the seed's module") if names else ""
            raise RuntimeError(f"oatest injected fault in {name}{listed}")
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name=name)


# ONNX dtype codes of the wire format, for when onnx is not installed (a module test's repro.py needs only tvm
# and numpy); with onnx, its own helper maps them (bfloat16 and the 8-bit floats included)
_CODES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
          10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128"}


def _np_dtype(code):
    try:
        from onnx import helper
    except ImportError:
        return np.dtype(_CODES[code])
    return helper.tensor_dtype_to_np_dtype(code)


def _code(dtype):
    try:
        from onnx import helper
    except ImportError:
        return next(c for c, n in _CODES.items() if np.dtype(n) == dtype)
    return helper.np_dtype_to_tensor_dtype(dtype)


def _to_numpy(t):
    name, code, dims, raw = t
    return name, np.frombuffer(raw, dtype=_np_dtype(code)).reshape(dims).copy()


def _from_numpy(name, a):
    a = np.asarray(a, order="C")  # keeps 0-d arrays 0-d (ascontiguousarray makes them 1-d)
    return (name, _code(a.dtype), list(a.shape), a.tobytes())


_LAST_TEST: list = [None, None]  # (model bytes, _test's answer) of the last test: its configurations share it


def _test(model_bytes: bytes, recipe: dict | None) -> tuple:
    """(metadata, Relax module, input names, output names) of an ONNX model, a recipe or a module test. Every
    configuration of a test imports the same module: the last test's import is kept (Relax modules are
    immutable; passes make new ones)."""
    if _LAST_TEST[0] is not None and _LAST_TEST[0] == model_bytes:
        return _LAST_TEST[1]
    _LAST_TEST[:] = [None, None]
    answer = _import_test(model_bytes, recipe)
    _LAST_TEST[:] = [bytes(model_bytes), answer]
    return answer


def _import_test(model_bytes: bytes, recipe: dict | None) -> tuple:
    if recipe is not None and recipe.get("kind") == oatest_tvm_reduce.MODULE_KIND:
        mod = oatest_tvm_reduce.parsed(recipe["script"])
        n = leaf_count(mod["main"].ret_ty)
        return recipe.get("fault") or {}, mod, [p.name for p in mod["main"].params], [f"out_{i}" for i in range(n)]
    model, mod, extra_outputs = _imported(model_bytes, recipe)
    meta = {p.key: p.value for p in model.metadata_props}
    inits = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    return meta, mod, inputs, [o.name for o in model.graph.output] + extra_outputs


def _flatten(out):
    if type(out).__name__ in ("Shape", "ShapeTuple"):
        # an R.Shape output (from_onnx folds an ONNX Shape of a static value to one): ONNX's int64 tensor
        return [np.array(list(out), dtype="int64")]
    if isinstance(out, (bool, int, float, np.generic)):
        return [np.array(out)]
    if isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "Tuple"):
        res = []
        for x in out:
            res.extend(_flatten(x))
        return res
    return [out.numpy()]

def _call_main(vm, args: list, inserted: str | None) -> list:
    """main's outputs, flattened. LazyGetInput and LazySetOutput give main one more parameter, a callback: main
    then asks for its parameters beyond the inputs (`fget_param(index, name)`: a seed's main has none, its
    weights are constants) or hands over each output (`fset_output(index, value)`), which are its outputs then."""
    if inserted == "LazyGetInput":

        def fget_param(index, name):
            raise ValueError(f"main asked for parameter {index} ({name}), which the test does not have")

        return _flatten(vm["main"](*args, fget_param))
    if inserted == "LazySetOutput":
        got: dict = {}

        def fset_output(index, value):
            got[int(index)] = value

        rest = _flatten(vm["main"](*args, fset_output))
        return [a for i in sorted(got) for a in _flatten(got[i])] + rest
    return _flatten(vm["main"](*args))


# The start of an error's message when a pass of the configuration (pipeline or inserted, by the name
# configurations use; never a pass nested in it) raised it: `[raised in FuseOps] TVMError: ...`
RAISED_IN = "[raised in {}] "
# After RAISED_IN, when the error came out of a Relax pass that pass runs inside it (FuseTransposeMatmul runs
# FuseOpsByPattern): `[raised in FuseTransposeMatmul] [within FuseOpsByPattern] TVMError: ...`
WITHIN = "[within {}] "
# The error of every configuration of a test whose inserted pass's contract (oatest_tvm_passes.CONTRACTS) its
# module breaks: `oatest contract: ToMixedPrecision: <why>`; the reference fails too, so the test is invalid
CONTRACT = "oatest contract: {}: {}"
# A configuration option (triage's checks of an error raised in a pass): stop the run once that pass has run
# for the last time without raising (the error cannot come any more), with the error STOPPED.
STOP_AFTER = "oatest.stop_after"
STOPPED = "oatest stopped: {} ran without an error"


def run(model_bytes: bytes, inputs: list, level: str, disabled: list[str], threads: int = 1, options=()) -> dict:
    """Compiles and runs; returns status ('ok' | 'error'), message, outputs, passes fired and ran, raised_in:
    the configuration's pass an error was raised in (None otherwise; the message starts with RAISED_IN then),
    and skipped_contract: the pipeline passes the module's contracts leave out of every configuration.
    `options`: (key, value) pairs; STOP_AFTER is the only one read."""
    rec = Recorder()
    rec.stop_after = dict(options).get(STOP_AFTER)
    result = {"status": "ok", "message": "", "outputs": [], "fired": rec.fired, "ran": rec.ran, "raised_in": None,
              "skipped_contract": []}
    recipe = None
    try:
        recipe = json.loads(model_bytes) if model_bytes[:1] == b"{" else None
        if recipe is not None and recipe.get("check_only"):
            # the pattern must parse, take static tensors, and splice into a seed into a well-formed module
            checked = check_pattern(recipe)
            result["outputs"] = [(k, 2, [len(v.encode())], v.encode()) for k, v in checked.items()]  # uint8
            return result
        if recipe is not None and recipe.get("kind") == oatest_tvm_reduce.TOOL_KIND:
            result["outputs"] = oatest_tvm_reduce.answer(recipe)
            return result
        strict = recipe is not None and recipe.get("strict", False)
        meta, mod, graph_inputs, out_names = _test(model_bytes, recipe)
    except Exception as e:  # noqa: BLE001 - the frontend refusing a model is an outcome
        module_test = recipe is not None and recipe.get("kind") == oatest_tvm_reduce.MODULE_KIND
        what = "TVMScript" if module_test else "from_onnx"
        result.update(status="error", message=f"{what}: {type(e).__name__}: {e}")
        return result
    try:
        target = _target()
        extra = _extra_pass(recipe)
        why = extra and oatest_tvm_passes.broken(extra[0], mod)
        if why:
            result.update(status="error", message=CONTRACT.format(extra[0], why))
            return result
        result["skipped_contract"] = skip = oatest_tvm_passes.skipped_by_contract(mod)
        names = passes_for(level, disabled, extra and extra[0], has_local_functions(mod), skip)
        rec.names = set(names)
        rec.stop_runs = names.count(rec.stop_after)
        passes = [_make(n, extra) for n in names]
        kind, _, victim = str(meta.get("oatest.fault", "")).partition(":")
        if kind == "raise" and victim in names:
            i = names.index(victim)
            names_listed = meta.get("oatest.fault.names") == "1"
            passes[i] = _raising(victim, passes[i], lambda: _fault(meta, level, rec.fired), names_listed)
        seq = tvm.transform.Sequential(passes)
        with tvm.transform.PassContext(opt_level=3, instruments=[rec], config={} if strict else PASS_CONFIG), target:
            ex = tvm.compile(mod, target=target, relax_pipeline=seq,
                             tir_pipeline="default" if strict else oatest_tvm_memo.CPU)
        fault = _fault(meta, level, rec.fired)
        if fault == "segfault":
            import ctypes

            ctypes.string_at(0)
        vm = relax.VirtualMachine(load(ex), tvm.cpu())
        feeds = dict(_to_numpy(t) for t in inputs)
        args = [tvm.runtime.tensor(feeds[n]) for n in graph_inputs]
        outs = _call_main(vm, args, extra[0] if extra is not None and extra[0] in names else None)
        if fault == "wrong":
            outs = [o + 1 if o.dtype.kind == "f" else o for o in outs]
        if len(outs) != len(out_names):
            # never compared silently in part: a pattern's result once went unnamed, so unseen
            raise RuntimeError(f"main returned {len(outs)} values for {len(out_names)} outputs: {', '.join(out_names)}")
        result["outputs"] = [_from_numpy(n, a) for n, a in zip(out_names, outs)]
    except Exception as e:  # noqa: BLE001
        if rec.stopped:
            result.update(status="error", message=STOPPED.format(rec.stop_after))
            return result
        # the pipeline pass (or inserted pass) in flight when the exception came out, if any: RAISED_IN
        where = RAISED_IN.format(rec.running) if rec.running else ""
        within = rec.within(e)
        if where and within:
            where += WITHIN.format(within)
        message = f"{where}{type(e).__name__}: {str(e)[:4000]}"
        result.update(status="error", message=message, raised_in=rec.running)
    return result
