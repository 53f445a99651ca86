"""Memos, and a lowering, that make a TVM test cheaper without changing what it computes (the TVM runner installs
the memos when it loads; OATEST_TVM_NO_MEMO=1 leaves them out). Both configurations of a test, and many tests,
legalize the same op calls and lower the same PrimFuncs; each memo keys its work by everything the work reads,
compared structurally:

- **legalization**: a Relax op call's FLegalize result (Python and TE: a third of a test's CPU time before);
- **TIR lowering**: a PrimFunc's run through the CPU lowering below (a fifth of it), for the LLVM CPU builds the
  runner makes (assertions off); the functions of one build are then generated as one module, as before.

**CPU lowering** (`CPU`, a TIR pipeline by name): TIR's default pipeline without the passes that only act on GPU
constructs or only make the generated code faster, for the runner's builds with assertions off.

Measured in docs/BENCHMARKS.md ("TVM throughput").
"""
from __future__ import annotations

import os
from collections import OrderedDict

import tvm
import tvm_ffi
from tvm import relax, tirx
from tvm.target import Target
from tvm.tirx.build import split_host_device_mods, tir_to_runtime
from tvm_ffi import structural_hash

# Legalization memo. LegalizeOps lowers each Relax op call through its Python FLegalize function and TE (a third
# of a test's CPU time); both configurations of a test, and many tests, legalize identical calls. A call whose
# result is one `call_tir` of a PrimFunc on the call's own arguments (no TIR variables; a binding it emitted
# besides could only be unused) is memoized by the op, its attributes and types, its arguments' types (constants
# by value, since legalizers fold scalar constants into the PrimFunc) and which arguments are the same value. A
# hit adds the same PrimFunc to the module being built and calls it on the new arguments. Anything else is
# legalized as before.
_LEGALIZED: OrderedDict = OrderedDict()
# Each memo keeps the MEMO_MAX entries used last. Unbounded, they grew a campaign's worker by about 0.9 MiB a run
# (a lowered PrimFunc is tens of KiB) until its memory budget replaced it, memos and all, every two minutes;
# bounded, a worker levels off near 1 GiB (docs/BENCHMARKS.md, "TVM workers that keep their memos").
MEMO_MAX = 6000


def used(memo: OrderedDict, key, most: int) -> None:
    """Marks `key` as just used; drops the entry used longest ago while `memo` holds more than `most`."""
    memo.move_to_end(key)
    while len(memo) > most:
        memo.popitem(last=False)


_CALL_TIR = tvm.ir.Op.get("relax.call_tir")
# constant arguments (apache-tvm before 0.27, as with --also-tvm, names them relax.Constant and relax.StringImm)
_CONSTANTS = tuple(
    c for c in (getattr(tvm.ir, "GenericConst", None), getattr(relax, "Constant", None), relax.ShapeExpr,
                getattr(tvm.ir, "StringImm", None), getattr(relax, "StringImm", None)) if c is not None
)


def _legalize_key(call):
    parts = [call.op.name, structural_hash(call.attrs), structural_hash(call.ty), structural_hash(call.ty_args)]
    args = list(call.args)
    # which arguments are one value (add(x, x) may be legalized with x passed once)
    parts.append(tuple(next(j for j, b in enumerate(args) if b.same_as(a)) for a in args))
    for a in args:
        if isinstance(a, tvm.ir.Var):
            parts.append(("v", structural_hash(a.ty)))
        elif isinstance(a, _CONSTANTS) or tvm.ir.is_prim_expr(a):
            parts.append(("c", structural_hash(a, map_free_vars=True)))
        else:
            return None
    return tuple(parts)


def _memo_legalize(legalize):
    def memoized(bb, call):
        key = _legalize_key(call)
        hit = _LEGALIZED.get(key) if key is not None else None
        if hit is not None:
            used(_LEGALIZED, key, MEMO_MAX)
            func, name, picks, res = hit
            gvar = bb.add_func(func, name)
            out = res.ty_args[0]
            out = list(out.fields) if type(out).__name__ == "TupleType" else out
            return relax.call_tir(gvar, relax.Tuple([call.args[j] for j in picks]), out)
        res = legalize(bb, call)
        memo = _memo_entry(bb, call, res) if key is not None else None
        if memo is not None:
            _LEGALIZED[key] = memo
            used(_LEGALIZED, key, MEMO_MAX)
        return res

    return memoized


def _memo_entry(bb, call, res):
    if not (isinstance(res, relax.Call) and res.op.same_as(_CALL_TIR) and len(res.args) == 2):
        return None
    gvar, args = res.args
    if not isinstance(gvar, tvm.ir.GlobalVar) or not isinstance(args, relax.Tuple):
        return None
    picks = []
    for field in args.fields:
        j = next((j for j, a in enumerate(call.args) if a.same_as(field)), None)
        if j is None:
            return None
        picks.append(j)
    func = bb.get()[gvar]
    return (func, gvar.name_hint, picks, res) if isinstance(func, tvm.tirx.PrimFunc) else None


# CPU lowering. TIR's default pipeline serves every target: of its passes, about half act only on GPU constructs
# (thread bindings, shared and warp memory, tensor cores, software pipelines, double buffers, VTCM) and some only
# make the code faster (simplification, if-hoisting, loop partitioning, narrower index types), which oatest, testing
# Relax passes, does not need: those were half of the lowering passes' time. The runner's builds (assertions off)
# go through the rest, in the default order; 1,000 requests of a campaign replayed gave the same outputs, bit for
# bit (docs/BENCHMARKS.md, "TVM throughput: a CPU lowering"). An apache-tvm lacking one of them gets the default.
CPU = "oatest_cpu"
_CPU_PASSES = (
    "s_tir.CanonicalizeLoop", "s_tir.LowerCrossThreadReduction", "s_tir.LowerInitBlock",
    "s_tir.PlanAndUpdateBufferAllocationLocation", "s_tir.ConvertBlocksToOpaque", "s_tir.CompactBufferAllocation",
    "s_tir.LowerMatchBuffer", "s_tir.LowerOpaqueBlock", "tirx.FlattenBuffer", "tirx.BF16ComputeLegalize",
    "tirx.VectorizeLoop", "tirx.UnrollLoop", "s_tir.RewriteUnsafeSelect", "tirx.FP8ComputeLegalize",
    "tirx.VerifyMemory", "tirx.AnnotateEntryFunc", "tirx.SplitHostDevice", "tirx.MakePackedAPI",
    "tirx.FP8StorageLegalize", "tirx.BF16StorageLegalize",
)


def _cpu_pass(qualified: str):
    space, name = qualified.split(".")
    return getattr(getattr(getattr(tvm, space, None), "transform", None), name, None)


def _cpu_pipeline():
    default = tvm.tirx.get_tir_pipeline("default")
    if any(_cpu_pass(p) is None for p in _CPU_PASSES):
        return default

    @tvm.transform.module_pass(opt_level=0, name="OatestCpuLowering")
    def lower(mod, _ctx):
        vectorize = not bool(tvm.transform.PassContext.current().config.get("tirx.disable_vectorize", False))
        passes = [_cpu_pass(p)(vectorize) if p == "tirx.VectorizeLoop" else _cpu_pass(p)() for p in _CPU_PASSES]
        return tvm.transform.Sequential(passes)(mod)

    return lower, default[1], default[2]


_PIPELINES = getattr(getattr(tvm.tirx, "compilation_pipeline", None), "PIPELINE_MAP", None)
if _PIPELINES is not None:
    _PIPELINES[CPU] = _cpu_pipeline
else:  # an apache-tvm without named TIR pipelines: its default
    CPU = "default"


# TIR lowering memo. `relax.build` links one module of every PrimFunc through `tvm.tirx.build`; this build lowers
# only the PrimFuncs it has not lowered before under the same PassContext configuration (keyed by the function
# without its symbol name, compared structurally), reuses the others under their new symbol, and then finishes
# and generates the whole module as `tvm.tirx.build` does. AnnotateEntryFunc marks a module's only function, so
# a function lowered alone loses that mark and the assembled module gets it back when it has one function.
_LOWERED: OrderedDict = OrderedDict()
_build = tvm.tirx.build
_SYMBOL = "global_symbol"


def _key(f):
    g = f.without_attr(_SYMBOL)
    return structural_hash(g), g


def cached_build(mod, target=None, pipeline="default"):
    """`tvm.tirx.build` for the runner's builds (others go to it unchanged)."""
    ctx = tvm.transform.PassContext.current()
    if (not isinstance(mod, tvm.IRModule) or pipeline != CPU or target is None
            or not ctx.config.get("tirx.disable_assert", False)
            or not all(isinstance(f, tirx.PrimFunc) for f in mod.functions.values())):
        return _build(mod, target, pipeline)
    target = Target(target)
    host = target.host if target.host is not None else target
    if target.kind.name != "llvm" or host.kind.name != "llvm":
        return _build(mod, target, pipeline)
    mod = tirx.transform.BindTarget(target.with_host(host))(mod)
    cfg = str(sorted((k, str(v)) for k, v in ctx.config.items()))
    pipe, fin_host, fin_dev = tvm.tirx.get_tir_pipeline(pipeline)
    lowered, misses = {}, {}
    for gv, f in mod.functions.items():
        h, g = _key(f)
        hit = next((e for e in _LOWERED.get(h, []) if e[1] == cfg and tvm_ffi.structural_equal(g, e[0])), None)
        if hit is None:
            misses[gv] = (f, h, g)
        else:
            used(_LOWERED, h, MEMO_MAX)
            _, _, low, prefix = hit
            lowered[gv] = low.with_attr(_SYMBOL, prefix + str(f.attrs[_SYMBOL]))
    if misses:
        low = pipe(tvm.IRModule({gv: f for gv, (f, _, _) in misses.items()}))
        by_name = {gv.name_hint: f for gv, f in low.functions.items()}
        if set(by_name) != {gv.name_hint for gv in misses}:
            return _build(mod, target, pipeline)
        for gv, (f, h, g) in misses.items():
            out = by_name[gv.name_hint].without_attr("tirx.is_entry_func")
            before, after = str(f.attrs[_SYMBOL]), str(out.attrs[_SYMBOL])
            if after.endswith(before):
                _LOWERED.setdefault(h, []).append((g, cfg, out, after[: len(after) - len(before)]))
                used(_LOWERED, h, MEMO_MAX)
            lowered[gv] = out
    merged = tvm.IRModule(lowered, attrs=mod.attrs)
    if len(lowered) == 1:
        merged = tirx.transform.AnnotateEntryFunc()(merged)
    host_mod, devs = split_host_device_mods(merged)
    host_mod = fin_host()(host_mod)
    devs = {t: fin_dev()(m) for t, m in devs.items()}
    return tir_to_runtime(host_mod, devs, host)


def install() -> None:
    """Wraps every op's FLegalize and replaces `tvm.tirx.build` (which `relax.build` calls)."""
    if os.environ.get("OATEST_TVM_NO_MEMO") == "1":
        return
    for op in tvm.ir.Op.list_op_names():
        legalize = tvm.ir.Op.get(op).get_attr("FLegalize")
        if legalize is not None:
            tvm.ir.register_op_attr(op, "FLegalize", _memo_legalize(legalize), level=99)
    tvm.tirx.build = cached_build
