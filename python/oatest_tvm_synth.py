"""Relax-level synthesis for oatest's `tvm` target (oatest_tvm.py's `run` calls `_imported`). A model may be a
recipe (JSON: a seed ONNX model, a Relax pattern from patterns/tvm, a random seed). `synthesize` imports the
seed with from_onnx, merges the pattern's functions into the module (its entry function under a fresh private
name), and calls it from the seed's dataflow block at a random point: each pattern parameter is fed by a seed
value of the same type, or by a bridge from another seed value (R.reshape, R.strided_slice, R.nn.pad, R.zeros +
R.concat, R.astype), or by R.zeros; its result becomes an extra output of main. The module is checked with
relax.analysis.well_formed before it is compiled.

This module owns the pattern's parsing (`_parsed`, `_entry`, and `pattern_usable`, which `synthesize` checks
itself), the bridges, the splice, and `_imported`: a request's model or recipe as a Relax module, cached.
"""
from __future__ import annotations

import math
import random

import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx


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
    the campaign's pattern check) ~4 ms: each worker also keeps the patterns it has seen."""
    mod = _PARSED.get(script)
    if mod is None:
        if ir_json:
            try:
                mod = tvm.ir.load_json(ir_json)
            except Exception:  # noqa: BLE001 - another TVM version's JSON: parse the script instead
                mod = None
        if mod is None:
            mod = tvm.script.from_source(script)
        if len(_PARSED) < 2048:
            _PARSED[script] = mod
    return mod


def pattern_usable(pattern_script: str) -> None:
    """Raises unless the pattern can be spliced: it parses and its entry takes statically shaped tensors."""
    pat = _parsed(pattern_script)
    entry = pat[_entry(pat)]
    if any(_static(p.ty) is None for p in entry.params):
        raise ValueError("the pattern's entry takes a non-tensor or dynamically shaped parameter")
    if not entry.is_pure:
        raise ValueError("the pattern's entry is impure: it cannot be called from a dataflow block")


def synthesize(seed_onnx: bytes, pattern_script: str, rng_seed: int, ir_json: str | None = None) -> tvm.IRModule:
    """Splices a Relax pattern into the Relax import of a seed ONNX model (see the module docstring)."""
    rng = random.Random(rng_seed)
    seed = from_onnx(onnx.load_from_string(seed_onnx), keep_params_in_input=False)
    pat = _parsed(pattern_script, ir_json)
    pattern_usable(pattern_script)
    entry = _entry(pat)
    pfunc = pat[entry]
    ptypes = [_static(p.ty) for p in pfunc.params]
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
    pgv = bb.add_func(private, PATTERN_NAME)
    fattrs = {k: v for k, v in (main.attrs or {}).items()}
    with bb.function("main", list(main.params), attrs=fattrs or None):
        with bb.dataflow():
            avail = [p for p in main.params if _static(p.ty)]
            for i, b in enumerate(inner):
                if i == point:
                    out = _splice(bb, pgv, ptypes, avail, rng)
                bb.emit_normalized(b)
                if _static(b.var.ty):
                    avail.append(b.var)
            if point == len(inner):
                out = _splice(bb, pgv, ptypes, avail, rng)
            for b in outputs:
                bb.emit_normalized(b)
            extra = bb.emit_output(out)
        ret = main.body.body
        fields = list(ret.fields) if isinstance(ret, relax.Tuple) else [ret]
        bb.emit_func_output(relax.Tuple(fields + [extra]))
    new = bb.get()
    for gv in mod.get_global_vars():
        if gv.name_hint != "main" and gv.name_hint not in {g.name_hint for g in new.get_global_vars()}:
            new[gv] = mod[gv]
    ok = relax.analysis.well_formed(new)
    if ok is False:
        raise ValueError("the spliced module is not well formed")
    return new


def _splice(bb, pgv, ptypes, avail, rng):
    """Calls the pattern with one argument per parameter: reuse, bridge, or zeros; returns its tensor result."""
    args = []
    for dtype, dims in ptypes:
        same = [v for v in avail if _static(v.ty) == (dtype, dims)]
        if same:
            args.append(rng.choice(same))
        elif avail:
            # the cheapest bridges only: every bridge op is one more PrimFunc to compile in both builds
            cost = {id(v): bridge_cost(_static(v.ty), (dtype, dims)) for v in avail}
            least = min(cost.values())
            v = rng.choice([v for v in avail if cost[id(v)] == least])
            args.append(bridge(bb, v, _static(v.ty), (dtype, dims)))
        else:
            args.append(bb.emit(relax.op.zeros(dims, dtype)))
    r = bb.emit(relax.Call(pgv, args))
    while type(r.ty).__name__ == "TupleType":
        r = bb.emit(relax.TupleGetItem(r, 0))
    if _static(r.ty) is None:
        raise ValueError("the pattern does not return a statically shaped tensor")
    return r


_IMPORTED: dict = {}


def _imported(model_bytes: bytes, recipe: dict | None):
    """(onnx model, Relax module, extra output names) for a model or a recipe (`recipe`: the parsed bytes); the
    last few are cached, since a test runs the same model under several configurations (IRModules are
    immutable, so sharing is safe)."""
    key = hash(model_bytes)
    hit = _IMPORTED.get(key)
    if hit is not None and hit[0] == model_bytes:
        return hit[1]
    if recipe is not None:
        seed = bytes.fromhex(recipe["seed_onnx"])
        mod = synthesize(seed, recipe["pattern"], recipe["rng"], recipe.get("pattern_ir"))
        value = (onnx.load_from_string(seed), mod, [EXTRA_OUTPUT])
    else:
        model = onnx.load_from_string(model_bytes)
        value = (model, from_onnx(model, keep_params_in_input=False), [])
    if len(_IMPORTED) >= 8:
        _IMPORTED.pop(next(iter(_IMPORTED)))
    _IMPORTED[key] = (model_bytes, value)
    return value
