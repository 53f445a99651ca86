"""What a spliced pattern's entry is called with, for oatest's `tvm` target (used by oatest_tvm_synth): one feed per
parameter of the entry. Patterns from TVM's tests take more than statically shaped tensors: tensors of symbolic or
unknown shape, tuples of values, shapes (R.Shape) and scalars (R.Prim). `param_feeds` turns each parameter into a
concrete feed, `Tensor(dtype, dims)` (fed from a seed value: reuse, bridge or zeros), `AnyTensor` (a tensor of
unknown shape or rank: fed like a static tensor with every dim 3, rank 2 if unknown), `TupleOf`, `ShapeOf` or
`PrimOf` (built in the splice: R.tuple, R.shape, R.prim_value); symbolic dims take the values a pass argument binds
them to (BindSymbolicVars' `binding_map`), else 3, 4, 5, ... in order of first appearance. `specialized` gives the
entry the feeds' types, so a pattern written for unknown shapes is compiled at the static ones it is called with;
`in_range` brings the indices the entry passes straight to a fast `R.take`, `R.gather_elements` or
`R.scatter_elements` into range.
"""
from __future__ import annotations

import math

import tvm
from tvm import relax
try:  # apache-tvm 0.27 moved the arithmetic analyzer to tvm.sym; older ones (--also-tvm) have it in tvm.arith
    from tvm.sym import Analyzer
except ImportError:
    from tvm.arith import Analyzer


class Tensor(tuple):
    """(dtype, dims) of a statically shaped tensor parameter."""


class AnyTensor:
    """A tensor parameter of unknown shape (dtype None when unknown too, ndim -1 when the rank is unknown)."""

    def __init__(self, dtype, ndim):
        self.dtype, self.ndim = dtype, ndim


class TupleOf:
    def __init__(self, fields):
        self.fields = fields


class ShapeOf:
    def __init__(self, dims):
        self.dims = dims


class PrimOf:
    def __init__(self, dtype, value):
        self.dtype, self.value = dtype, value


def _dtype(ty):
    d = getattr(ty, "dtype", None)
    s = str(d) if d is not None else ""
    return None if s in ("", "void", "None") else s


def _vars_in(ty, out: list) -> None:
    """The symbolic dims of a type, in order of first appearance."""
    name = type(ty).__name__
    if name == "TupleType":
        for f in ty.fields:
            _vars_in(f, out)
        return
    dims = []
    if name == "TensorType" and ty.shape is not None and hasattr(ty.shape, "values"):
        dims = list(ty.shape.values)
    elif name == "ShapeType" and ty.values is not None:
        dims = list(ty.values)
    elif name == "PrimType" and getattr(ty, "value", None) is not None:
        dims = [ty.value]
    for d in dims:
        if type(d).__name__ == "Var" and d.name not in {v.name for v in out}:
            out.append(d)


def _feed(ty, analyzer):
    """The feed of one parameter type, None when it is none of the kinds above (an object, a callable)."""

    def value(e):
        e = analyzer.simplify(e)
        return int(e) if type(e).__name__ == "IntImm" else None

    name = type(ty).__name__
    if name == "TensorType":
        if ty.shape is None or not hasattr(ty.shape, "values"):
            return AnyTensor(_dtype(ty), int(ty.ndim))
        dims = [value(d) for d in ty.shape.values]
        if any(d is None for d in dims) or _dtype(ty) is None:
            return None
        return Tensor((_dtype(ty), tuple(dims)))
    if name == "TupleType":
        fields = [_feed(f, analyzer) for f in ty.fields]
        return None if any(f is None for f in fields) else TupleOf(fields)
    if name == "ShapeType":
        if ty.values is None:
            return ShapeOf([3 + i for i in range(max(int(ty.ndim), 1))]) if int(ty.ndim) >= 0 else None
        dims = [value(d) for d in ty.values]
        return None if any(d is None for d in dims) else ShapeOf(dims)
    if name == "PrimType":
        dtype = _dtype(ty) or "int64"
        v = getattr(ty, "value", None)
        v = value(v) if v is not None else (3 if "int" in dtype else 1)
        if v is None:
            return None
        return PrimOf(dtype, bool(v) if dtype == "bool" else float(v) if "float" in dtype else v)
    return None


def param_feeds(func, symbols: dict | None = None) -> list | None:
    """One feed per parameter of `func` (see the module docstring), None if some parameter cannot be fed.
    `symbols`: values of symbolic dims by name."""
    found: list = []
    for p in func.params:
        _vars_in(p.ty, found)
    analyzer = Analyzer()
    n = 0
    for var in found:
        value = (symbols or {}).get(var.name)
        if not isinstance(value, int):
            value, n = 3 + n, n + 1
        analyzer.bind(var, tvm.tirx.const(value, "int64"))
    feeds = [_feed(p.ty, analyzer) for p in func.params]
    if any(f is None for f in feeds):
        return None
    if any(isinstance(f, AnyTensor) and f.dtype is None for f in feeds):
        # a tensor of unknown dtype takes the dtype of the entry's first constant (`R.add(A, R.const(1, "int32"))`)
        consts: list = []
        relax.analysis.post_order_visit(
            func.body, lambda e: consts.append(_dtype(e.ty)) if type(e).__name__ in ("Constant", "GenericConst") else None
        )
        for f in feeds:
            if isinstance(f, AnyTensor) and f.dtype is None and any(consts):
                f.dtype = next(c for c in consts if c)
    return feeds


def is_plain(feeds: list) -> bool:
    """Whether every feed is a statically shaped tensor (the entry needs no specializing)."""
    return all(isinstance(f, Tensor) for f in feeds)


def build(bb, feed, tensor):
    """The argument for one feed: `tensor(dtype, dims)` gives a static tensor from the seed's values in scope
    (`avail`: reuse, bridge or zeros), a tensor of unknown shape too (see AnyTensor); tuples, shapes and scalars
    are built here."""
    if isinstance(feed, Tensor):
        return tensor(*feed)
    if isinstance(feed, AnyTensor):
        # one shape whatever the seed, so that the pattern check's verdict holds for every test: all dims 3 (two
        # such tensors add, multiply, matmul and convolve), rank 2 when unknown too
        return tensor(feed.dtype or "float32", (3,) * (feed.ndim if feed.ndim >= 0 else 2))
    if isinstance(feed, TupleOf):
        return bb.emit(relax.Tuple([build(bb, f, tensor) for f in feed.fields]))
    if isinstance(feed, ShapeOf):
        return relax.ShapeExpr(list(feed.dims))
    if isinstance(feed, PrimOf):
        return relax.prim_value(tvm.tirx.const(feed.value, feed.dtype))
    raise TypeError(f"unknown feed {feed!r}")


# ops whose indices (their second argument) read or write outside the first when out of range: take (in mode
# "fast"), gather_elements and scatter_elements
_INDEXING = tuple(tvm.ir.Op.get(f"relax.{name}") for name in ("take", "gather_elements", "scatter_elements"))


def _extent(ty, axis) -> int | None:
    """The static number of elements `take` along `axis` (None: the flattened tensor) indexes in a tensor of type
    `ty`; None when it is not known."""
    dims = [getattr(d, "value", None) for d in getattr(getattr(ty, "shape", None), "values", None) or []]
    if not dims or any(not isinstance(d, int) for d in dims):
        return None
    if axis is None:
        return math.prod(dims)
    axis = int(axis)
    return dims[axis] if -len(dims) <= axis < len(dims) else None


def in_range(bb, func, args: list, fixed: list) -> list:
    """`args` (what the entry `func` is called with) with each index tensor it passes straight to a fast `R.take`,
    `R.gather_elements` or `R.scatter_elements` brought into range: `floor_mod(i, n)` for the n elements indexed
    (the fewest, when it indexes more than one tensor). Such an op reads or writes outside its tensor at an index
    out of range: a seed's values fed to a fast take gave nondeterministic results, and segfaults at the reference.
    `fixed`: arguments left alone (a constant the test's pass binds the parameter to)."""
    params = list(func.params)
    extents: dict = {}
    for block in getattr(func.body, "blocks", []):
        for b in block.bindings:
            call = getattr(b, "value", None)
            if not isinstance(call, relax.Call) or not any(call.op.same_as(op) for op in _INDEXING):
                continue
            if str(getattr(call.attrs, "mode", "fast")) != "fast":
                continue
            data, indices = call.args[0], call.args[1]
            j = next((j for j, p in enumerate(params) if p.same_as(indices)), None)
            if j is None or fixed[j]:
                continue
            k = next((k for k, p in enumerate(params) if p.same_as(data)), None)
            n = _extent(args[k].ty if k is not None else data.ty, call.attrs.axis)
            if n:
                extents[j] = min(n, extents.get(j, n))
    out = list(args)
    for j, n in extents.items():
        dtype = _dtype(out[j].ty)
        if dtype is not None and dtype.startswith(("int", "uint")):
            out[j] = bb.emit(relax.op.floor_mod(out[j], relax.const(n, dtype)))
    return out


@relax.expr_functor.mutator
class _Retyped(relax.PyExprMutator):
    """Re-derives every binding's type from its value (an annotation such as `R.Tensor` would otherwise keep a
    value's shape unknown after the parameters became static)."""

    def visit_var_binding_(self, binding):
        value = self.builder_.normalize(self.visit_expr(binding.value))
        cls = relax.DataflowVar if isinstance(binding.var, relax.DataflowVar) else relax.Var
        var = cls(binding.var.name, value.ty)
        self.builder_.emit_normalized(relax.VarBinding(var, value))
        self.set_var_remap(binding.var, var)


def specialized(func, args: list):
    """`func` with its parameters typed as `args` (the values it is called with) and its bindings re-typed, when
    some parameter is not a static tensor; `func` itself otherwise (or when re-typing fails)."""
    params = [relax.Var(p.name, a.ty) for p, a in zip(func.params, args)]
    try:
        m = _Retyped()
        for p, q in zip(func.params, params):
            m.set_var_remap(p, q)
        out = relax.Function(params, m.visit_expr(func.body), None, func.is_pure, func.attrs)
        if relax.analysis.well_formed(tvm.IRModule({"f": out})) is False:
            return func
        return out
    except Exception:  # noqa: BLE001 - a body the re-typing cannot follow keeps its own types
        return func
