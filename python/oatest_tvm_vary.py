"""Attribute variants of a Relax pattern for `--vary attr` (oatest's `tvm` target): one op call's axis attribute or
flag written otherwise, where TVM's own tests seldom went and a pass that reads the attribute must check it.

A site is one change to one op call in one of the pattern's Relax functions, for ops whose `axis` or `axes` counts
the dimensions of their first tensor argument (a tuple's first field for `concat`). The changes, in this order:

- `negative`: the non-negative axes written as the negative ones naming the same dimensions (`axis=[1]` of a 3-D
  tensor as `axis=[-2]`): the same computation, in a form a pass comparing axes must normalize;
- `other`: a single axis moved to the next dimension (`axis=1` of a 3-D tensor as `axis=2`): another computation,
  which a pass that assumes one axis (a softmax over the last) must not rewrite as if it were the same;
- `keepdims`: a reduction's `keepdims` flipped.

Sites are numbered in the module's function and binding order; `varied_attr` makes one and prints the module
again, unless it changes what a function returns. Whether the variant parses, splices and builds at the reference
(an `other` axis may no longer fit its readers), the campaign's pattern check tells, and lists the sites a test may
take.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax

# ops whose axis counts the first argument's dimensions (expand_dims counts its result's: left out)
AXIS_OPS = {
    "relax.sum", "relax.mean", "relax.max", "relax.min", "relax.prod", "relax.std", "relax.variance",
    "relax.argmax", "relax.argmin", "relax.nn.softmax", "relax.nn.log_softmax", "relax.concat", "relax.split",
    "relax.take", "relax.squeeze", "relax.cumsum", "relax.cumprod", "relax.nn.layer_norm", "relax.nn.rms_norm",
    "relax.nn.batch_norm", "relax.flip", "relax.sort", "relax.argsort", "relax.topk", "relax.gather_elements",
    "relax.scatter_elements", "relax.repeat", "relax.strided_slice", "relax.nn.group_norm",
}
_FIELDS = ("axis", "axes")
_VARIANTS: dict = {}  # (script, site) -> the variant's script (a worker makes each once)


def _rank(arg) -> int | None:
    ty = arg.ty
    if isinstance(ty, relax.TupleType) and len(ty.fields) > 0:
        ty = ty.fields[0]
    ndim = getattr(ty, "ndim", -1)
    return ndim if isinstance(ndim, int) and ndim > 0 else None


def _axes(value) -> list | None:
    """The attribute's axes as ints (one axis or several), None when it holds something else."""
    if value is None:
        return None
    items = list(value) if isinstance(value, (list, tuple, tvm.ir.Array)) else [value]
    try:
        return [int(a) for a in items]
    except (TypeError, ValueError):
        return None


def _changes(call, rank: int) -> list:
    """(field, new value) of each change to `call`, in the module docstring's order."""
    out = []
    for field in _FIELDS:
        value = getattr(call.attrs, field, None)
        axes = _axes(value)
        if not axes:
            continue
        single = not isinstance(value, (list, tuple, tvm.ir.Array))
        if any(0 <= a < rank for a in axes):
            negated = [a - rank if 0 <= a < rank else a for a in axes]
            out.append((field, negated[0] if single else negated))
        if len(axes) == 1 and rank > 1:
            moved = (axes[0] % rank + 1) % rank
            out.append((field, moved if single else [moved]))
    if isinstance(getattr(call.attrs, "keepdims", None), (bool, int)):
        out.append(("keepdims", not bool(call.attrs.keepdims)))
    return out


def _sites(mod) -> list:
    """(function, block index, binding index, field, new value) of every site, in a fixed order."""
    out = []
    for gv in sorted(mod.functions, key=lambda g: g.name_hint):
        func = mod[gv]
        if not isinstance(func, relax.Function) or not isinstance(func.body, relax.SeqExpr):
            continue
        for i, blk in enumerate(func.body.blocks):
            for j, b in enumerate(blk.bindings):
                call = b.value
                if not (isinstance(b, relax.VarBinding) and isinstance(call, relax.Call)
                        and isinstance(call.op, tvm.ir.Op) and call.op.name in AXIS_OPS and call.args):
                    continue
                rank = _rank(call.args[0])
                if rank is not None:
                    out.extend((gv, i, j, field, value) for field, value in _changes(call, rank))
    return out


def attr_sites(mod) -> int:
    """How many sites the pattern's module has."""
    return len(_sites(mod))


def varied_attr(mod, script: str, site: int) -> str | None:
    """The pattern's script with site `site`'s change made (`mod` is its parsed module); None when it has no such
    site, or when the change gives its function another result type. The function is rebuilt by Relax's
    ExprMutator, which types every binding again and renames the ones whose type changed; a change that no longer
    types raises."""
    key = (script, site)
    if key in _VARIANTS:
        return _VARIANTS[key]
    sites = _sites(mod)
    if not 0 <= site < len(sites):
        return None
    gv, i, j, field, value = sites[site]
    func = mod[gv]
    target = func.body.blocks[i].bindings[j].value
    info = target.attrs.__tvm_ffi_type_info__
    fields = {f.name: getattr(target.attrs, f.name) for f in info.fields}
    fields[field] = value
    attrs = tvm.ir.make_node(info.type_key, **fields)

    @relax.expr_functor.mutator
    class Change(relax.PyExprMutator):
        def visit_call_(self, call):
            new = super().visit_call_(call)
            if call.same_as(target):
                return relax.Call(new.op, new.args, attrs)
            return new

    changed = Change(tvm.IRModule({gv: func})).visit_expr(func)
    changed = relax.Function(list(changed.params), changed.body, None, changed.is_pure, changed.attrs)
    if not tvm_ffi.structural_equal(changed.body.ty, func.body.ty):
        # the pattern keeps its interface: what its callers and its pass take (a Gradient's target stays a
        # scalar: flipping the keepdims of the sum it differentiates made a first campaign's only new entry)
        return None
    out = tvm.IRModule({g: (changed if g.same_as(gv) else f) for g, f in mod.functions.items()}, attrs=mod.attrs)
    text = out.script()
    if len(_VARIANTS) < 4096:
        _VARIANTS[key] = text
    return text
