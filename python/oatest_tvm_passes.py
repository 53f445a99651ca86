"""Relax passes as data, for oatest's `tvm` target: a pass call recorded with its arguments (`encode_args`, used
by the extraction plugin oatest_tvm_capture.py on the test's own call) and rebuilt from them (`make_pass`, used
by the runner oatest_tvm.py); and PLACEMENT, where a pass outside oatest's pipeline is inserted into it for a
test whose pattern came from that pass, and the pipeline itself (both data: python/oatest_tvm_pipeline.json);
and CONTRACTS, the preconditions of passes (data too), checked against a test's module (`broken`).

Arguments are JSON: None, bools, numbers and strings as themselves; {"list": [...]}, {"dict": [[k, v], ...]},
{"ndarray": {"dtype", "shape", "hex"}} (tensors), {"tvm": <TVM JSON>} (TVM objects such as dataflow patterns,
PrimFuncs, index maps), {"fusion_pattern": {...}} (FuseOpsByPattern's patterns; a Python check function is not
expressible and is left out, which the record says with "check_dropped"). A Python callable anywhere else
(ConvertLayout's layout_cb, UpdateParamType's ty_func, ...) cannot be recorded: `encode_args` raises
Unexpressible, and the pattern says why it keeps no arguments.
"""
from __future__ import annotations

import inspect
import json
import os

import numpy as np
import tvm
from tvm import relax


def _pipeline_data() -> dict:
    """python/oatest_tvm_pipeline.json: compiled into the binary as the module oatest_tvm_pipeline (the worker,
    repro.py), else read beside this file (Python tests, the extraction plugin)."""
    try:
        from oatest_tvm_pipeline import DATA
    except ImportError:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "oatest_tvm_pipeline.json")) as f:
            DATA = f.read()
    return json.loads(DATA)


PIPELINE_DATA = _pipeline_data()
LEVELS: list = PIPELINE_DATA["levels"]
# (pass name, lowest level that runs it; "required" = always), in pipeline order
PIPELINE: list = [tuple(x) for x in PIPELINE_DATA["pipeline"]]
# Where a pass outside the pipeline runs, for tests carrying one of its patterns: name -> (position, anchor),
# the anchor a pass of PIPELINE (the data file gives each group of passes its reason)
PLACEMENT: dict = {n: tuple(v) for g in PIPELINE_DATA["placement"] for n, v in g["passes"].items()}
# Arguments oatest sets whatever the test's call said, per pass (the data file says why for each; a pass's
# entries merge)
OVERRIDES: dict = {}
for _entry in PIPELINE_DATA.get("overrides", []):
    OVERRIDES.setdefault(_entry["pass"], {}).update(_entry["args"])
# The checks a contract may make (see `broken`)
CHECKS = ("float_dtypes", "inference", "training", "single_function")


def _contracts() -> dict:
    """Preconditions of passes, pass -> its entry ({"pass", "why", checks}); a malformed entry fails loudly."""
    out = {c["pass"]: c for c in PIPELINE_DATA.get("contracts", [])}
    for c in out.values():
        if not c.get("why") or set(c) - {"pass", "why", *CHECKS}:
            raise ValueError(f"contract of {c['pass']}: a `why` and only the checks {CHECKS}, not {sorted(c)}")
    return out


CONTRACTS: dict = _contracts()
# Passes whose patterns are inlined into their caller when spliced, not called (the data file says why)
INLINE: set = {o["pass"] for o in PIPELINE_DATA.get("inline_pattern", [])}


class Unexpressible(ValueError):
    """A pass argument oatest cannot record (a Python function, or an object TVM cannot serialize)."""


MAX_TENSOR_BYTES = 1 << 16


def constructor(name: str):
    """The Python constructor of a Relax pass, by its PassInfo name."""
    if name in ("DispatchSampling", "DispatchSortScan"):
        return getattr(relax.backend, name)
    return getattr(relax.transform, name)


def _encode(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (np.generic,)):
        return v.item()
    if isinstance(v, (list, tuple)) or type(v).__name__ == "Array":
        return {"list": [_encode(x) for x in v]}
    if isinstance(v, dict) or type(v).__name__ == "Map":
        return {"dict": [[_encode(k), _encode(x)] for k, x in v.items()]}
    if isinstance(v, np.ndarray) or type(v).__name__ == "Tensor" and hasattr(v, "numpy"):
        a = np.ascontiguousarray(v if isinstance(v, np.ndarray) else v.numpy())
        if a.nbytes > MAX_TENSOR_BYTES:
            raise Unexpressible(f"a tensor of {a.nbytes} bytes")
        return {"ndarray": {"dtype": str(a.dtype), "shape": list(a.shape), "hex": a.tobytes().hex()}}
    if isinstance(v, relax.transform.FusionPattern):
        fields = {
            "name": v.name,
            "pattern": tvm.ir.save_json(v.pattern),
            "annotation_patterns": {k: tvm.ir.save_json(p) for k, p in (v.annotation_patterns or {}).items()},
        }
        return {"fusion_pattern": fields, "check_dropped": v.check is not None or v.attrs_getter is not None}
    if callable(v) and not isinstance(v, tvm.runtime.Object):
        raise Unexpressible(f"a Python callable ({getattr(v, '__name__', type(v).__name__)})")
    if isinstance(v, tvm.runtime.Object):
        try:
            return {"tvm": tvm.ir.save_json(v)}
        except Exception as e:  # noqa: BLE001
            raise Unexpressible(f"a {type(v).__name__} TVM cannot serialize ({e})") from e
    raise Unexpressible(f"a value of type {type(v).__name__}")


def _fusion_tuple(v):
    """FuseOpsByPattern also takes (name, pattern[, annotations[, check]]) tuples: as FusionPatterns."""
    if isinstance(v, tuple) and v and isinstance(v[0], str):
        return relax.transform.FusionPattern(*v)
    return v


def encode_args(name: str, args: tuple, kwargs: dict) -> dict:
    """The arguments of a call of pass `name`'s constructor, by parameter name, as JSON (defaults left out)."""
    sig = inspect.signature(constructor(name))
    bound = sig.bind(*args, **kwargs)
    out = {}
    for k, v in bound.arguments.items():
        if name == "FuseOpsByPattern" and k == "patterns":
            v = [_fusion_tuple(x) for x in v]
        out[k] = _encode(v)
    return out


# how this TVM's `save_json` ends its JSON
_THIS_TVM = '"metadata":{"tvm_version":%s}}' % json.dumps(tvm.__version__)


def load_json(text: str):
    """`tvm.ir.load_json`, without its upgrade of an older TVM's JSON (a parse and a re-dump, 10-15 ms for a
    pattern's module) when this TVM wrote it."""
    if text.endswith(_THIS_TVM):
        try:
            from tvm_ffi.serialization import from_json_graph_str
        except ImportError:  # an apache-tvm-ffi without it
            return tvm.ir.load_json(text)
        return from_json_graph_str(text)
    return tvm.ir.load_json(text)


def _decode(v):
    if not isinstance(v, dict):
        return v
    if "list" in v:
        return [_decode(x) for x in v["list"]]
    if "dict" in v:
        return {_decode(k): _decode(x) for k, x in v["dict"]}
    if "ndarray" in v:
        a = v["ndarray"]
        return np.frombuffer(bytes.fromhex(a["hex"]), dtype=a["dtype"]).reshape(a["shape"]).copy()
    if "tvm" in v:
        return load_json(v["tvm"])
    if "fusion_pattern" in v:
        f = v["fusion_pattern"]
        annotations = {k: load_json(p) for k, p in f["annotation_patterns"].items()}
        return relax.transform.FusionPattern(f["name"], load_json(f["pattern"]), annotations)
    raise ValueError(f"unknown argument encoding: {sorted(v)}")


def make_pass(name: str, args: dict | None = None):
    """Pass `name` built with its recorded arguments (None or {}: its defaults) and oatest's OVERRIDES."""
    ctor = constructor(name)
    kwargs = {k: _decode(v) for k, v in {**(args or {}), **OVERRIDES.get(name, {})}.items()}
    if name == "BindParams" and isinstance(kwargs.get("func_name"), str) and isinstance(kwargs.get("params"), dict):
        make = lambda bound: ctor(**{**kwargs, "params": bound})  # noqa: E731
        return _with_call_sites(make, kwargs["func_name"], kwargs["params"])
    built = ctor(**kwargs)
    return _built_on_cpu(built) if name == "MergeCompositeFunctions" else built


def bound_params(name: str, args: dict | None) -> dict:
    """The parameters (name -> numpy array) pass `name` binds to constants with these arguments: BindParams'
    `params` given by name. Synthesis feeds those parameters these very constants, so that every
    configuration computes the same function whether or not the pass binds them."""
    if name != "BindParams" or not isinstance(args, dict):
        return {}
    params = _decode(args.get("params"))
    if not isinstance(params, dict):
        return {}
    return {k: v for k, v in params.items() if isinstance(k, str) and isinstance(v, np.ndarray)}


def symbol_values(name: str, args: dict | None) -> dict:
    """The symbolic dims (name -> int) pass `name` binds with these arguments: BindSymbolicVars' `binding_map`
    given by name. Synthesis calls the pattern with those very dims, so binding them changes no shape."""
    if name != "BindSymbolicVars" or not isinstance(args, dict):
        return {}
    m = _decode(args.get("binding_map"))
    if not isinstance(m, dict):
        return {}
    return {k: v for k, v in m.items() if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)}


@relax.expr_functor.visitor
class _CallArgs(relax.PyExprVisitor):
    """The arguments of every call of one function."""

    def __init__(self, gv):
        super().__init__()
        self.gv, self.calls = gv, []

    def visit_call_(self, call):
        if isinstance(call.op, tvm.ir.GlobalVar) and call.op.same_as(self.gv):
            self.calls.append(list(call.args))
        super().visit_call_(call)


def _fed_their_constants(mod, gv, params: dict) -> dict:
    """Of `params` (BindParams' by name), those that every call of `gv` passes that very constant. Synthesis feeds
    a bound parameter its constant only when the two have one type (a shrunk pattern's parameters do not take its
    test's); binding another one changed the function (a campaign filed 10 findings of other output shapes)."""
    visitor = _CallArgs(gv)
    for g in mod.get_global_vars():
        if isinstance(mod[g], relax.Function):
            visitor.visit_expr(mod[g])
    index = {p.name: i for i, p in enumerate(mod[gv].params)}

    def fed(name, value):
        if name not in index or not visitor.calls or not isinstance(value, np.ndarray):
            return False
        args = [c[index[name]] for c in visitor.calls if index[name] < len(c)]
        # a constant's array: `value` (apache-tvm 0.27's GenericConst), `data` (relax.Constant before)
        arrays = [a.value if hasattr(a, "value") else getattr(a, "data", None) for a in args
                  if type(a).__name__ in ("Constant", "GenericConst")]
        return len(arrays) == len(visitor.calls) and all(
            hasattr(x, "numpy") and x.numpy().dtype == value.dtype and np.array_equal(x.numpy(), value) for x in arrays)

    return {k: v for k, v in params.items() if fed(k, v)}


def _with_call_sites(make, func_name: str, params: dict):
    """BindParams on a function that is called (a spliced pattern's entry, unlike the `main` of its test), binding
    the `params` every call passes as constants (`_fed_their_constants`; `make(params)` builds the pass): the
    pass drops the bound parameters from the function, so the calls drop the arguments at their positions. The
    wrapper carries the pass's name; the instrumentation counts it as that pass (the inner call is nested)."""

    @relax.expr_functor.mutator
    class _DropArgs(relax.PyExprMutator):
        def __init__(self, mod, old, drop):
            super().__init__(mod)
            self.old, self.new, self.drop = old, None, drop

        def visit_call_(self, call):
            if isinstance(call.op, tvm.ir.GlobalVar) and call.op.same_as(self.old):
                kept = [self.visit_expr(a) for i, a in enumerate(call.args) if i not in self.drop]
                return relax.Call(self.new, kept, call.attrs, call.ty_args, call.span)
            return super().visit_call_(call)

    def transform(mod, _ctx):
        if func_name not in {g.name_hint for g in mod.get_global_vars()}:
            return make(params)(mod)
        gv = mod.get_global_var(func_name)
        bound = _fed_their_constants(mod, gv, params)
        drop = {i for i, p in enumerate(mod[gv].params) if p.name in bound}
        new = make(bound)(mod)
        if not drop or len(new[gv].params) == len(mod[gv].params):
            return new
        # the bound function under a fresh GlobalVar, whose type has the fewer parameters
        rest = tvm.IRModule({g: new[g] for g in new.get_global_vars() if not g.same_as(gv)}, attrs=new.attrs)
        mutator = _DropArgs(rest, gv, drop)
        mutator.new = mutator.builder_.add_func(new[gv], func_name)
        for g in list(rest.get_global_vars()):
            if isinstance(rest[g], relax.Function):
                mutator.builder_.update_func(g, mutator.visit_expr(rest[g]))
        return mutator.builder_.get()

    return tvm.transform.module_pass(transform, opt_level=0, name="BindParams")


def insert(pipeline: list, name: str) -> list:
    """The pipeline (pass names, in order) with `name` at its PLACEMENT: next to its anchor, and where the anchor
    would be when the configuration leaves it out (after every pass that comes before the anchor in the full
    PIPELINE, before every pass that comes after it), so that leaving a neighbour out never moves it."""
    where, anchor = PLACEMENT[name]
    order = {n: i for i, (n, _) in enumerate(PIPELINE)}
    limit = order[anchor] + (where == "after")
    at = 0
    for i, n in enumerate(pipeline):
        if order.get(n, limit) < limit:
            at = i + 1
    return list(pipeline[:at]) + [name] + list(pipeline[at:])


_FACTS: list = [None, None]  # the last module asked about, and its facts (every configuration of a test asks)


def facts(mod) -> dict:
    """What contracts ask of a module: `dtypes` (of every tensor of its Relax functions), `batch_norm` (the modes
    of its batch_norm calls: "training", "inference") and `others` (Relax functions with bindings besides main,
    composite functions not counted)."""
    if _FACTS[0] is not None and _FACTS[0].same_as(mod):
        return _FACTS[1]
    out = {"dtypes": set(), "batch_norm": set(), "others": []}

    def add(ty):
        if type(ty).__name__ == "TupleType":
            for f in ty.fields:
                add(f)
        elif type(ty).__name__ == "TensorType" and ty.dtype is not None:
            out["dtypes"].add(str(ty.dtype))

    def visit(e):
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op):
            if e.op.name == "relax.nn.batch_norm":
                out["batch_norm"].add("training" if e.attrs.training else "inference")
        add(getattr(e, "ty", None))

    for gv in mod.get_global_vars():
        f = mod[gv]
        if not isinstance(f, relax.Function):
            continue
        for p in f.params:
            add(p.ty)
        relax.analysis.post_order_visit(f.body, visit)
        composite = f.attrs is not None and "Composite" in f.attrs
        if gv.name_hint != "main" and not composite and any(b.bindings for b in getattr(f.body, "blocks", [])):
            out["others"].append(gv.name_hint)
    _FACTS[:] = [mod, out]
    return out


def broken(name: str, mod) -> str | None:
    """The `why` of pass `name`'s contract when `mod` breaks it, else None. Checks: `float_dtypes` (every float
    tensor has one of these dtypes), `inference: false` (no inference-mode batch_norm), `training: false` (no
    training-mode one), `single_function: true` (no Relax function with bindings besides main and composites)."""
    c = CONTRACTS.get(name)
    if c is None:
        return None
    f = facts(mod)
    floats = {d for d in f["dtypes"] if d.startswith(("float", "bfloat"))}
    if "float_dtypes" in c and floats - set(c["float_dtypes"]):
        return c["why"]
    if c.get("inference") is False and "inference" in f["batch_norm"]:
        return c["why"]
    if c.get("training") is False and "training" in f["batch_norm"]:
        return c["why"]
    if c.get("single_function") and f["others"]:
        return c["why"]
    return None


def skipped_by_contract(mod) -> list:
    """The pipeline passes whose contract `mod` breaks, in pipeline order: every configuration leaves them out."""
    return [n for n, _ in PIPELINE if n in CONTRACTS and broken(n, mod) is not None]


def _built_on_cpu(inner):
    """MergeCompositeFunctions, then what a CPU build needs instead of an external codegen: it groups composite
    functions into a function for a codegen (attribute `Codegen`) holding them as local functions; LambdaLift
    lifts those, and the groups lose their `Codegen` attribute, so TVM's own lowering builds them (as
    FuseOpsByPattern's `annotate_codegen=False` override does for its matches)."""

    def transform(mod, _ctx):
        out = relax.transform.LambdaLift()(inner(mod))
        for g in out.get_global_vars():
            f = out[g]
            if isinstance(f, relax.Function) and f.attrs is not None and "Codegen" in f.attrs:
                out[g] = f.without_attr("Codegen")
        return out

    return tvm.transform.module_pass(transform, opt_level=0, name="MergeCompositeFunctions")
