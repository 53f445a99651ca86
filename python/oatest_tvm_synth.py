"""Relax-level synthesis for oatest's `tvm` target (oatest_tvm.py's `run` calls `_imported`). A model may be a
recipe (JSON: a seed ONNX model, a Relax pattern from patterns/tvm, a random seed). `synthesize` imports the
seed with from_onnx, merges the pattern's functions into the module (its entry function under a fresh private
name), and calls it from the seed's dataflow block at a random point: each tensor a pattern parameter takes (tuples,
shapes and scalars are built by oatest_tvm_feeds) is fed by a seed value of the same type, or by a bridge from another
seed value (R.reshape, R.strided_slice, R.nn.pad, R.zeros + R.concat, R.astype), or by R.zeros; its result becomes an
extra output of main. The module is checked with
relax.analysis.well_formed before it is compiled.

A recipe may also name a host (`host`: TVMScript of a module from TVM's own tests, such as another pattern's,
with several functions, R.If, call_tir PrimFuncs, tuples): the pattern is then spliced into a top-level dataflow
block of one of the host's pure Relax functions (fed from the values in scope there), that function, copied as
`oatest_host` and returning its own result and the pattern's, is called from the seed's main through bridges,
and every host function comes along (the host's `main` renamed `oatest_host_main`).

This module owns the pattern's parsing (`_parsed`, `_entry`, and `pattern_usable`, which `synthesize` checks
itself), the bridges, the splice, and `_imported`: a request's model or recipe as a Relax module, cached.
"""
from __future__ import annotations

import math
import random

import tvm
from tvm import relax
import tvm.relax.utils  # noqa: F401 - copy_with_new_vars

import oatest_tvm_feeds
import oatest_tvm_passes
from oatest_tvm_vary import varied_attr


def _static(ty):
    """(dtype, dims) of a tensor type with a static shape, else None."""
    if type(ty).__name__ != "TensorType" or ty.shape is None:
        return None
    try:
        return str(ty.dtype), tuple(int(d) for d in ty.shape.values)
    except Exception:  # noqa: BLE001 - symbolic or unknown dims
        return None


def bridge(bb, v, src, dst):
    """Emits bindings turning `v` of type src = (dtype, dims) into type dst; returns the new value. Same element
    count: R.reshape; same rank and every dim at least as large: R.strided_slice; smaller: R.nn.pad; otherwise
    flatten, then slice or R.zeros + R.concat, then reshape; dtype last, with R.astype."""
    (sd, ss), (dd, ds) = src, dst
    x = v
    n_src, n_dst = math.prod(ss), math.prod(ds)
    if ss != ds:
        if n_src == n_dst:
            x = bb.emit(relax.op.reshape(x, ds))
        elif len(ss) == len(ds) and all(a >= b for a, b in zip(ss, ds)):
            x = bb.emit(relax.op.strided_slice(x, list(range(len(ds))), [0] * len(ds), list(ds)))
        elif len(ss) == len(ds) and all(a <= b for a, b in zip(ss, ds)):
            widths = []
            for a, b in zip(ss, ds):
                widths += [0, b - a]
            x = bb.emit(relax.op.nn.pad(x, widths))
        else:
            flat = bb.emit(relax.op.reshape(x, (n_src,)))
            if n_src > n_dst:
                flat = bb.emit(relax.op.strided_slice(flat, [0], [0], [n_dst]))
            else:
                zeros = bb.emit(relax.op.zeros((n_dst - n_src,), sd))
                flat = bb.emit(relax.op.concat([flat, zeros], axis=0))
            x = bb.emit(relax.op.reshape(flat, ds))
    if sd != dd:
        x = bb.emit(relax.op.astype(x, dd))
    return x


def bridge_cost(src, dst) -> int:
    """How many bindings `bridge` emits for src -> dst."""
    (sd, ss), (dd, ds) = src, dst
    n = 0
    if ss != ds:
        n_src, n_dst = math.prod(ss), math.prod(ds)
        if n_src == n_dst:
            n = 1
        elif len(ss) == len(ds) and (all(a >= b for a, b in zip(ss, ds)) or all(a <= b for a, b in zip(ss, ds))):
            n = 1
        else:
            n = 3 if n_src > n_dst else 4
    return n + (sd != dd)


PATTERN_NAME = "oatest_pattern"
EXTRA_OUTPUT = "oatest_pattern_out"


def _entry(pat: tvm.IRModule):
    """The pattern's entry: a Relax function no other function of the pattern calls."""
    relax_fns = [gv for gv in pat.get_global_vars() if isinstance(pat[gv], relax.Function)]
    called = set()
    for gv in relax_fns:
        called |= {g.name_hint for g in relax.analysis.all_global_vars(pat[gv])}
    roots = [gv for gv in relax_fns if gv.name_hint not in called]
    if not roots:
        raise ValueError("the pattern has no entry function")
    return sorted(roots, key=lambda g: (g.name_hint != "main", g.name_hint))[0]


_PARSED: dict = {}


def _parsed(script: str, ir_json: str | None = None) -> tvm.IRModule:
    """The pattern's module. TVMScript parsing costs ~0.05-0.1 s, loading the module's JSON (`pattern_ir`, from
    the campaign's pattern check) a few ms: each worker also keeps the patterns it has seen."""
    mod = _PARSED.get(script)
    if mod is None:
        if ir_json:
            try:
                mod = oatest_tvm_passes.load_json(ir_json)
            except Exception:  # noqa: BLE001 - another TVM version's JSON: parse the script instead
                mod = None
        if mod is None:
            mod = tvm.script.from_source(script)
        if len(_PARSED) < 2048:
            _PARSED[script] = mod
    return mod


def pattern_usable(pattern_script: str) -> None:
    """Raises unless the pattern can be spliced: it parses, its entry takes values a splice can build
    (oatest_tvm_feeds: tensors, tuples, shapes, scalars) and is pure, and none of its PrimFuncs is a stub."""
    pat = _parsed(pattern_script)
    entry = pat[_entry(pat)]
    if oatest_tvm_feeds.param_feeds(entry) is None:
        raise ValueError("the pattern's entry takes a parameter a splice cannot build (an object, a callable)")
    if not entry.is_pure:
        raise ValueError("the pattern's entry is impure: it cannot be called from a dataflow block")
    # structural tests' PrimFuncs written as `T.evaluate(0)` compute nothing: the buffers they should fill hold
    # whatever memory held, and the pattern's result differed from run to run
    if any(isinstance(f, tvm.tirx.PrimFunc) and type(f.body).__name__ == "Evaluate" for f in pat.functions.values()):
        raise ValueError("the pattern calls a PrimFunc that computes nothing (`T.evaluate(0)`)")


def synthesize(
    seed_onnx: bytes,
    pattern_script: str,
    rng_seed: int,
    ir_json: str | None = None,
    host: str | None = None,
    bound: dict | None = None,
    symbols: dict | None = None,
    vary: list | None = None,
) -> tvm.IRModule:
    """Splices a Relax pattern into the Relax import of a seed ONNX model, or into a host module called from it
    (see the module docstring). `bound`: pattern parameters (by name) fed a constant instead of a seed value,
    the constants the test's pass binds them to (oatest_tvm_passes.bound_params); `symbols`: values of the
    entry's symbolic dims (oatest_tvm_passes.symbol_values); `vary`: `extra-reader` returns one inner value of
    the pattern's entry too ([`expose_inner`]), which main outputs (not for a host); `dtype:<float16|float64>`
    writes the pattern's float32 values in that dtype ([`retyped`]); `attr:<site>` changes one op call's
    axis or flag (oatest_tvm_vary.varied_attr)."""
    for v in vary or []:
        if v.startswith("dtype:"):
            pattern_script, ir_json = retyped(pattern_script, v[len("dtype:"):]), None
            if pattern_script is None:
                raise ValueError(f"{v}: the pattern has no float32 value to retype")
        elif v.startswith("attr:"):
            site = int(v[len("attr:"):])
            pattern_script = varied_attr(_parsed(pattern_script, ir_json), pattern_script, site)
            ir_json = None
            if pattern_script is None:
                raise ValueError(f"{v}: the pattern has no such attribute site")
    if host is not None:
        return _synthesize_hosted(seed_onnx, pattern_script, rng_seed, ir_json, host, bound, symbols)
    rng = random.Random(rng_seed)
    seed = _from_onnx(seed_onnx)
    pat = _parsed(pattern_script, ir_json)
    pattern_usable(pattern_script)
    entry = _entry(pat)
    pfunc = pat[entry]
    exposed = False
    if "extra-reader" in (vary or []):
        pfunc, exposed = expose_inner(pfunc, random.Random(rng_seed ^ 0x5A5A))
        if not exposed:
            raise ValueError("extra-reader: the pattern's entry has no inner tensor value to expose")
    ptypes = _param_feeds(pfunc, bound, symbols)
    seed_names = {g.name_hint for g in seed.get_global_vars()}
    clash = {g.name_hint for g in pat.get_global_vars() if g.name_hint != entry.name_hint} & seed_names
    if clash or PATTERN_NAME in seed_names:
        raise ValueError(f"pattern function names clash with the seed: {sorted(clash)}")
    mod = tvm.IRModule({gv: seed[gv] for gv in seed.get_global_vars() if gv.name_hint != "main"}, attrs=seed.attrs)
    for gv in pat.get_global_vars():
        if gv.name_hint != entry.name_hint:
            mod[gv] = pat[gv]
    private = pfunc.without_attr("global_symbol") if pfunc.attrs and "global_symbol" in pfunc.attrs else pfunc
    main = seed["main"]
    blocks = main.body.blocks
    if len(blocks) != 1 or not isinstance(blocks[0], relax.DataflowBlock):
        raise ValueError("the seed's main is not one dataflow block")
    bindings = list(blocks[0].bindings)
    outputs = [b for b in bindings if not isinstance(b.var, relax.DataflowVar)]
    inner = [b for b in bindings if isinstance(b.var, relax.DataflowVar)]
    point = rng.randint(0, len(inner))
    bb = relax.BlockBuilder(mod)
    pgv = private  # added by _splice, typed by what it is called with
    fattrs = {k: v for k, v in (main.attrs or {}).items()}
    with bb.function("main", list(main.params), attrs=fattrs or None):
        with bb.dataflow():
            avail = [p for p in main.params if _static(p.ty)]
            for i, b in enumerate(inner):
                if i == point:
                    out, also = _splice(bb, pgv, ptypes, avail, rng, exposed)
                bb.emit_normalized(b)
                if _static(b.var.ty):
                    avail.append(b.var)
            if point == len(inner):
                out, also = _splice(bb, pgv, ptypes, avail, rng, exposed)
            for b in outputs:
                bb.emit_normalized(b)
            extra = [bb.emit_output(v) for v in [out, also] if v is not None]
        ret = main.body.body
        fields = list(ret.fields) if isinstance(ret, relax.Tuple) else [ret]
        bb.emit_func_output(relax.Tuple(fields + extra))
    new = bb.get()
    for gv in mod.get_global_vars():
        if gv.name_hint != "main" and gv.name_hint not in {g.name_hint for g in new.get_global_vars()}:
            new[gv] = mod[gv]
    ok = relax.analysis.well_formed(new)
    if ok is False:
        raise ValueError("the spliced module is not well formed")
    return new


class _Bound:
    """A parameter fed the constant its test's pass binds it to."""

    def __init__(self, value):
        self.value = value


def _param_feeds(pfunc, bound: dict | None, symbols: dict | None = None) -> list:
    """Per parameter of the pattern's entry: its feed (oatest_tvm_feeds), or the constant it is bound to (`bound`,
    when the array has exactly the parameter's type: a shrunk pattern's parameter does not take its test's)."""
    out = []
    for p, t in zip(pfunc.params, oatest_tvm_feeds.param_feeds(pfunc, symbols)):
        value = (bound or {}).get(p.name)
        if value is not None and isinstance(t, oatest_tvm_feeds.Tensor) and (str(value.dtype), list(value.shape)) == (t[0], list(t[1])):
            out.append(_Bound(relax.const(value, str(value.dtype))))
        else:
            out.append(t)
    return out


def _returned(ret) -> list:
    """The expressions a function body returns (a tuple's fields, flattened)."""
    if isinstance(ret, relax.Tuple):
        return [x for f in ret.fields for x in _returned(f)]
    return [ret]


# The dtypes `--vary dtype` writes a pattern's float32 values in (its check lists those that parse and splice)
RETYPES = ("float16", "float64")
_OPAQUE_CALLS = ("T.prim_func", "call_tir", "call_dps_packed", "call_packed", "call_pure_packed", "ExternFunc")


def retyped(script: str, dtype: str) -> str | None:
    """The pattern's script with every float32 (annotations, constants, dtype attributes) written as `dtype`,
    consistently, so that its ops run on the type the test never wrote; None when it has no float32, or calls
    code whose types the text does not say (TIR PrimFuncs, whose `T.float32` literals stay, and packed
    functions): a first campaign filed such half-retyped calls as CallTIRRewrite errors. Whether the result is
    valid Relax, parsing and splicing it tell."""
    if dtype not in RETYPES or '"float32"' not in script or any(t in script for t in _OPAQUE_CALLS):
        return None
    return script.replace('"float32"', f'"{dtype}"')


def expose_inner(func, rng):
    """`func` with one inner tensor value (a bound variable of static type that it does not return already) also
    returned, as the last field of a tuple after its own result: a pass on the pattern must leave that value to
    its extra reader (`--vary extra-reader`, as for ONNX patterns). (func, False) when it has none. Only values an
    op computes (a call), never one it returns under another name nor a part of a parameter: a function returning
    one value twice, or its own parameter, is what no pass before a fusion writes (FuseTIR refused both, a
    review of the kind's findings found), and tells nothing about the pattern's pass."""
    body = func.body
    alias = {}  # a variable bound to another variable: the one it names
    for blk in body.blocks:
        for b in blk.bindings:
            if isinstance(b, relax.VarBinding) and isinstance(b.value, relax.Var):
                alias[b.var] = b.value

    def root(v):
        while v in alias:
            v = alias[v]
        return v

    returned = [root(r) for r in _returned(body.body) if isinstance(r, relax.Var)]
    cands = [
        (i, b.var)
        for i, blk in enumerate(body.blocks)
        for b in blk.bindings
        if isinstance(b, relax.VarBinding) and isinstance(b.value, relax.Call) and _static(b.var.ty) is not None
        and not any(b.var.same_as(r) for r in returned)
    ]
    if not cands:
        return func, False
    i, v = rng.choice(cands)
    blocks = list(body.blocks)
    out = v
    if isinstance(v, relax.DataflowVar):
        # a dataflow block's inner value leaves it through an output binding
        out = relax.Var(f"{v.name}_exposed", v.ty)
        blocks[i] = relax.DataflowBlock(list(blocks[i].bindings) + [relax.VarBinding(out, v)])
    ret_ty = relax.TupleType([func.ret_ty, v.ty])
    body = relax.SeqExpr(blocks, relax.Tuple([body.body, out]))
    new = relax.Function(list(func.params), body, ret_ty, func.is_pure, func.attrs)
    return relax.BlockBuilder().normalize(new), True


def _splice(bb, func, ptypes, avail, rng, exposed=False):
    """Adds the pattern's entry `func` as PATTERN_NAME and calls it with one argument per parameter: reuse,
    bridge, zeros, the constant the parameter is bound to, or a tuple, shape or scalar built here (the entry then
    typed by its arguments, oatest_tvm_feeds.specialized; indices in range, oatest_tvm_feeds.in_range);
    returns its first tensor result, and (`exposed`: the entry returns an inner value last, [`expose_inner`]) that
    value, else None."""

    def tensor(dtype, dims):
        same = [v for v in avail if _static(v.ty) == (dtype, dims)]
        if same:
            return rng.choice(same)
        if avail:
            # the cheapest bridges only: every bridge op is one more PrimFunc to compile in both builds
            cost = {id(v): bridge_cost(_static(v.ty), (dtype, dims)) for v in avail}
            least = min(cost.values())
            v = rng.choice([v for v in avail if cost[id(v)] == least])
            return bridge(bb, v, _static(v.ty), (dtype, dims))
        return bb.emit(relax.op.zeros(dims, dtype))

    args = [t.value if isinstance(t, _Bound) else oatest_tvm_feeds.build(bb, t, tensor) for t in ptypes]
    args = oatest_tvm_feeds.in_range(bb, func, args, [isinstance(t, _Bound) for t in ptypes])
    if not oatest_tvm_feeds.is_plain([t for t in ptypes if not isinstance(t, _Bound)]):
        func = oatest_tvm_feeds.specialized(func, args)
    pgv = bb.add_func(func, PATTERN_NAME)
    r = bb.emit(relax.Call(pgv, args))
    also = None
    if exposed:
        also = bb.emit(relax.TupleGetItem(r, len(r.ty.fields) - 1))
        r = bb.emit(relax.TupleGetItem(r, 0))
    while type(r.ty).__name__ == "TupleType":
        i = next((i for i, f in enumerate(r.ty.fields) if _tensor_leaves(f)), None)
        if i is None:
            break
        r = bb.emit(relax.TupleGetItem(r, i))
    if type(r.ty).__name__ != "TensorType":
        raise ValueError("the pattern does not return a tensor")
    return r, also


HOST_NAME = "oatest_host"
HOST_MAIN = "oatest_host_main"
# What makes a function an entry point: its public name, and `num_input` (its runtime inputs; the rest are weights),
# by which LiftTransformParams and LazyGetInput re-sign it. A host function the test calls from inside the module
# loses both: re-signed, the call inside the module would go stale (a review found four such entries).
_ENTRY_ATTRS = ("global_symbol", "num_input")


def _callee(func):
    """`func` as a private function called inside the module (see _ENTRY_ATTRS)."""
    for key in _ENTRY_ATTRS:
        if func.attrs and key in func.attrs:
            func = func.without_attr(key)
    return func


def _tensor_leaves(ty) -> int | None:
    """How many tensors a value of type `ty` flattens to (tensors, of any shape, and tuples of them), else None."""
    if type(ty).__name__ == "TensorType":
        return 1
    if type(ty).__name__ == "TupleType":
        counts = [_tensor_leaves(f) for f in ty.fields]
        return None if any(c is None for c in counts) else sum(counts)
    return None


def _host_candidates(host: tvm.IRModule) -> list:
    """The host's Relax functions a pattern can be spliced into: pure, statically shaped tensor parameters, a
    result of tensors, and a top-level dataflow block; not the body of a fused or offloaded function (attributes
    Primitive, Composite, Codegen), which may only call PrimFuncs or ops: a call of the pattern there breaks
    FuseTIR's and codegen's contract, not a compiler bug."""
    out = []
    for gv in sorted(host.get_global_vars(), key=lambda g: g.name_hint):
        f = host[gv]
        if not isinstance(f, relax.Function) or not f.is_pure or not isinstance(f.body, relax.SeqExpr):
            continue
        if f.attrs is not None and any(k in f.attrs for k in ("Primitive", "Composite", "Codegen")):
            continue
        if any(_static(p.ty) is None for p in f.params) or not _tensor_leaves(f.ret_ty):
            continue
        if any(isinstance(b, relax.DataflowBlock) for b in f.body.blocks):
            out.append(gv)
    return out


def _from_onnx(seed_onnx: bytes) -> tvm.IRModule:
    """The seed's Relax import (onnx is imported here only: a module test, and its repro.py, need no onnx)."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    return from_onnx(onnx.load_from_string(seed_onnx), keep_params_in_input=False)


def spliced_pass_args(recipe: dict):
    """The recorded arguments of a recipe's pass as they apply to the spliced module: a `func_name` that named
    the pattern's entry (the test called the pass on it by name) names its spliced copy, PATTERN_NAME."""
    args = recipe.get("pass_args")
    if isinstance(args, dict) and isinstance(args.get("func_name"), str):
        pat = _parsed(recipe["pattern"], recipe.get("pattern_ir"))
        if args["func_name"] == _entry(pat).name_hint:
            args = {**args, "func_name": PATTERN_NAME}
    return args


def _synthesize_hosted(seed_onnx, pattern_script, rng_seed, ir_json, host_script, bound=None, symbols=None):
    rng = random.Random(rng_seed)
    seed = _from_onnx(seed_onnx)
    pat = _parsed(pattern_script, ir_json)
    pattern_usable(pattern_script)
    host = _parsed(host_script)
    entry = _entry(pat)
    pfunc = pat[entry]
    ptypes = _param_feeds(pfunc, bound, symbols)
    names = {g.name_hint for g in host.get_global_vars()}
    pnames = {g.name_hint for g in pat.get_global_vars() if g.name_hint != entry.name_hint}
    if names & pnames or {PATTERN_NAME, HOST_NAME, HOST_MAIN} & (names | pnames):
        raise ValueError(f"the pattern's and the host's function names clash: {sorted(names & pnames)}")
    callers = set()
    for gv in host.get_global_vars():
        if isinstance(host[gv], relax.Function):
            callers |= {g.name_hint for g in relax.analysis.all_global_vars(host[gv])}
    if "main" in names and "main" in callers:
        raise ValueError("the host's main is called by another host function")
    candidates = _host_candidates(host)
    if not candidates:
        raise ValueError("the host has no pure function with static tensor parameters and a dataflow block")
    fgv = rng.choice(candidates)
    f = relax.utils.copy_with_new_vars(host[fgv])  # its copy must not share variables with it
    mod = tvm.IRModule({}, attrs=seed.attrs)
    for gv in host.get_global_vars():
        func = host[gv]
        if gv.name_hint == "main":
            mod[tvm.ir.GlobalVar(HOST_MAIN)] = _callee(func)
        elif isinstance(func, relax.Function) and gv.name_hint in callers:
            mod[gv] = _callee(func)
        else:
            mod[gv] = func
    for gv in pat.get_global_vars():
        if gv.name_hint != entry.name_hint:
            mod[gv] = pat[gv]
    bb = relax.BlockBuilder(mod)
    pgv = pfunc.without_attr("global_symbol") if pfunc.attrs and "global_symbol" in pfunc.attrs else pfunc
    blocks = list(f.body.blocks)
    chosen = rng.choice([i for i, b in enumerate(blocks) if isinstance(b, relax.DataflowBlock)])
    fattrs = {k: v for k, v in (f.attrs or {}).items() if k not in _ENTRY_ATTRS}
    with bb.function(HOST_NAME, list(f.params), attrs=fattrs or None, private=True):
        avail = [p for p in f.params if _static(p.ty)]
        extra = None
        for i, block in enumerate(blocks):
            if i != chosen:
                if isinstance(block, relax.DataflowBlock):
                    with bb.dataflow():
                        outs = [bb.emit_normalized(b) for b in block.bindings]
                        del outs
                else:
                    for b in block.bindings:
                        bb.emit_normalized(b)
                avail += [b.var for b in block.bindings if not isinstance(b.var, relax.DataflowVar) and _static(b.var.ty)]
                continue
            bindings = list(block.bindings)
            point = rng.randint(0, len(bindings))
            with bb.dataflow():
                inner = list(avail)
                for j, b in enumerate(bindings):
                    if j == point:
                        extra = bb.emit_output(_splice(bb, pgv, ptypes, inner, rng)[0])
                    bb.emit_normalized(b)
                    if _static(b.var.ty):
                        inner.append(b.var)
                if point == len(bindings):
                    extra = bb.emit_output(_splice(bb, pgv, ptypes, inner, rng)[0])
            avail += [b.var for b in bindings if not isinstance(b.var, relax.DataflowVar) and _static(b.var.ty)]
        bb.emit_func_output(relax.Tuple([f.body.body, extra]))
    hosted = bb.get().get_global_var(HOST_NAME)
    htypes = [_static(p.ty) for p in f.params]
    main = seed["main"]
    block = main.body.blocks[0]
    if len(main.body.blocks) != 1 or not isinstance(block, relax.DataflowBlock):
        raise ValueError("the seed's main is not one dataflow block")
    # the seed's own PrimFuncs (from_onnx emits call_tir for a few ops) come along under fresh names
    renamed = {}
    for gv in seed.get_global_vars():
        if gv.name_hint != "main":
            renamed[gv.name_hint] = bb.add_func(seed[gv], "oatest_seed_" + gv.name_hint)
    with bb.function("main", list(main.params), attrs={k: v for k, v in (main.attrs or {}).items()} or None):
        with bb.dataflow():
            avail = [p for p in main.params if _static(p.ty)]
            for b in block.bindings:
                bb.emit_normalized(_renamed_binding(bb, b, renamed))
                if _static(b.var.ty):
                    avail.append(b.var)
            args = []
            for dtype, dims in htypes:
                same = [v for v in avail if _static(v.ty) == (dtype, dims)]
                if same:
                    args.append(rng.choice(same))
                else:
                    cost = {id(v): bridge_cost(_static(v.ty), (dtype, dims)) for v in avail}
                    least = min(cost.values())
                    v = rng.choice([v for v in avail if cost[id(v)] == least])
                    args.append(bridge(bb, v, _static(v.ty), (dtype, dims)))
            out = bb.emit_output(relax.Call(hosted, args))
        ret = main.body.body
        fields = list(ret.fields) if isinstance(ret, relax.Tuple) else [ret]
        bb.emit_func_output(relax.Tuple(fields + [out]))
    new = bb.get()
    have = {g.name_hint for g in new.get_global_vars()}
    for gv in mod.get_global_vars():
        if gv.name_hint not in have:
            new[gv] = mod[gv]
    if relax.analysis.well_formed(new) is False:
        raise ValueError("the hosted module is not well formed")
    return new


def inline_pattern(mod: tvm.IRModule) -> tvm.IRModule:
    """The module with the pattern's entry inlined into its caller, every other function kept: TVM's
    InlinePrivateFunctions inlines every private function, so the others are made public for its run and private
    again after (the composite functions a partitioning pass made must stay functions)."""
    keep = {
        g.name_hint
        for g in mod.get_global_vars()
        if g.name_hint != PATTERN_NAME
        and isinstance(mod[g], relax.Function)
        and not (mod[g].attrs and "global_symbol" in mod[g].attrs)
    }
    marked = tvm.IRModule({g: mod[g] for g in mod.get_global_vars()}, attrs=mod.attrs)
    gv = marked.get_global_var(PATTERN_NAME)
    if any(not isinstance(b, relax.DataflowBlock) for b in marked[gv].body.blocks):
        # bindings outside a dataflow block, inlined into main's, would split it (DataflowVars read across)
        marked[gv] = relax.transform.ConvertToDataflow(min_size=1)(tvm.IRModule({gv: marked[gv]}))[gv]
    for g in marked.get_global_vars():
        if g.name_hint in keep:
            marked[g] = marked[g].with_attr("global_symbol", g.name_hint)
    out = relax.transform.InlinePrivateFunctions()(marked)
    for g in out.get_global_vars():
        if g.name_hint in keep:
            out[g] = out[g].without_attr("global_symbol")
    if relax.analysis.well_formed(out) is False:
        raise ValueError("the module with the pattern inlined is not well formed")
    return out


def _renamed_binding(bb, b, renamed: dict):
    """`b` with the GlobalVars its call_tir calls replaced per `renamed` (name -> GlobalVar); from_onnx's main
    refers to its PrimFuncs only that way (anything else is refused)."""
    v = b.value
    if isinstance(v, relax.Call) and v.args and isinstance(v.args[0], tvm.ir.GlobalVar):
        new = renamed.get(v.args[0].name_hint)
        if new is not None:
            return relax.VarBinding(b.var, bb.normalize(relax.Call(v.op, [new, *v.args[1:]], v.attrs, v.ty_args)))
    for gv in relax.analysis.all_global_vars(v) if isinstance(v, relax.Expr) else []:
        if gv.name_hint in renamed:
            raise ValueError(f"the seed's main refers to {gv.name_hint} other than by call_tir")
    return b


def extra_output_names(mod: tvm.IRModule, n_graph_outputs: int) -> list[str]:
    """Names of main's outputs beyond the seed graph's: one per value its results flatten to (as the runner
    flattens them: tuples into their fields) beyond the graph's outputs. A seed's main returns its outputs as one
    tuple variable when it has several, the extra results after it: counted by fields, the extra results of most
    tests went unnamed, and so uncompared."""
    n = leaf_count(mod["main"].ret_ty) - n_graph_outputs
    return [EXTRA_OUTPUT] if n == 1 else [f"{EXTRA_OUTPUT}_{i}" for i in range(n)]


def leaf_count(ty) -> int:
    """How many values a value of type `ty` flattens to (tuples into their fields), as the runner flattens main's."""
    return sum(leaf_count(f) for f in ty.fields) if type(ty).__name__ == "TupleType" else 1


_IMPORTED: dict = {}


def _imported(model_bytes: bytes, recipe: dict | None):
    """(onnx model, Relax module, extra output names) for a model or a recipe (`recipe`: the parsed bytes); the
    last few are cached, since a test runs the same model under several configurations (IRModules are
    immutable, so sharing is safe)."""
    key = hash(model_bytes)
    hit = _IMPORTED.get(key)
    if hit is not None and hit[0] == model_bytes:
        return hit[1]
    import onnx

    if recipe is not None:
        seed = bytes.fromhex(recipe["seed_onnx"])
        bound = oatest_tvm_passes.bound_params(recipe.get("pass"), recipe.get("pass_args"))
        symbols = oatest_tvm_passes.symbol_values(recipe.get("pass"), recipe.get("pass_args"))
        mod = synthesize(
            seed,
            recipe["pattern"],
            recipe["rng"],
            recipe.get("pattern_ir"),
            recipe.get("host"),
            bound,
            symbols,
            recipe.get("vary"),
        )
        if recipe.get("pass") in oatest_tvm_passes.INLINE:
            mod = inline_pattern(mod)
        model = onnx.load_from_string(seed)
        value = (model, mod, extra_output_names(mod, len(model.graph.output)))
    else:
        model = onnx.load_from_string(model_bytes)
        value = (model, _from_onnx(model_bytes), [])
    if len(_IMPORTED) >= 8:
        _IMPORTED.pop(next(iter(_IMPORTED)))
    _IMPORTED[key] = (model_bytes, value)
    return value
