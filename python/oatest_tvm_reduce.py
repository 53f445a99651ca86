"""Relax-level reduction for oatest's triage (requests of kind `oatest-relax-tool`, answered by oatest_tvm.run).
A Relax-level test (a recipe: seed graph + pattern) becomes a module test (`module_test`: the very module the
runner would compile, as TVMScript that re-parses to it, with the pass the test inserts and the seed's test-only
fault metadata); `summary` describes a module (functions, parameters, top-level bindings, outputs of main);
`apply` makes one edit, chosen by oatest's triage (src/triage/relax.rs), and answers with the new module's script.

Edits: drop a function, keep or drop one output of main, return one of main's values instead of its outputs, drop
a binding (its readers read an operand of the same type instead), replace a binding's value by a fresh parameter of
main or by R.zeros. Each edit is followed by a tidy (bindings nothing reads and main's parameters nothing reads are
dropped, main's `num_input` kept in step) and must give a module that passes relax.analysis.well_formed and prints
as TVMScript. Its module test runs the edited module itself (kept under its script, unverified); `verify`, asked
for an edit triage accepts, re-parses the script and answers whether it gives the same module, well formed (parsing
was four fifths of the tool's time when every edit's script was re-parsed, and almost every edit is rejected).
"""
from __future__ import annotations

import json

import tvm
from tvm import relax
import tvm_ffi

import oatest_tvm_passes
import oatest_tvm_synth

MODULE_KIND = "oatest-relax-module"
TOOL_KIND = "oatest-relax-tool"

_PARSED: dict = {}
_UNVERIFIED: set = set()  # scripts kept with the edited module they print, not parsed from the script


def parsed(script: str) -> tvm.IRModule:
    """A module test's module (the last few parsed are kept: a check runs one script under several configs, and
    an edit's result is checked where [`_reparsed`] parsed it). Parsing is the tool's main cost (a third of a
    second for a 17 KB script), so each script is parsed once."""
    mod = _PARSED.get(script)
    if mod is None:
        mod = _keep(script, tvm.script.from_source(script))
    return mod


def _keep(script: str, mod: tvm.IRModule) -> tvm.IRModule:
    if len(_PARSED) >= 16:
        oldest = next(iter(_PARSED))
        del _PARSED[oldest]
        _UNVERIFIED.discard(oldest)
    _PARSED[script] = mod
    return mod


def verify(script: str) -> bool:
    """Whether an edit's script re-parses, well formed, to the module its runs used (structurally equal); from
    now on the script's module is the parsed one. True for a script this process did not keep unverified: every
    run of it here parsed it."""
    if script not in _UNVERIFIED:
        return True
    _UNVERIFIED.discard(script)
    edited = _PARSED.pop(script, None)
    back = tvm.script.from_source(script)
    relax.analysis.well_formed(back)
    _keep(script, back)
    return edited is not None and bool(tvm_ffi.structural_equal(edited, back))


def _reparsed(mod: tvm.IRModule) -> tuple:
    """The module's TVMScript (constants in its metadata section) and the module it re-parses to, checked well
    formed; a module that prints as the script it was parsed from is not parsed again."""
    text = mod.script(show_meta=True)
    if _PARSED.get(text) is mod:
        return text, mod
    back = tvm.script.from_source(text)
    relax.analysis.well_formed(back)
    return text, _keep(text, back)


def script_of(mod: tvm.IRModule) -> str:
    """The module's TVMScript (constants in its metadata section), checked to re-parse well formed."""
    return _reparsed(mod)[0]


def _copy(mod: tvm.IRModule) -> tvm.IRModule:
    """A module of new objects (an edit may retype a module's GlobalVars, and a parsed module must stay as it
    was): a JSON round trip, ten times faster than parsing its script again."""
    return oatest_tvm_passes.load_json(tvm.ir.save_json(mod))


def module_test(recipe: dict) -> dict:
    """The module test of a recipe: what the runner compiles for it, as TVMScript."""
    import onnx

    seed = bytes.fromhex(recipe["seed_onnx"])
    bound = oatest_tvm_passes.bound_params(recipe.get("pass"), recipe.get("pass_args"))
    symbols = oatest_tvm_passes.symbol_values(recipe.get("pass"), recipe.get("pass_args"))
    mod = oatest_tvm_synth.synthesize(
        seed, recipe["pattern"], recipe["rng"], recipe.get("pattern_ir"), recipe.get("host"), bound, symbols
    )
    if recipe.get("pass") in oatest_tvm_passes.INLINE:
        mod = oatest_tvm_synth.inline_pattern(mod)
    model = onnx.load_from_string(seed)
    fault = {p.key: p.value for p in model.metadata_props if p.key.startswith("oatest.fault")}
    return {
        "kind": MODULE_KIND,
        "script": script_of(mod),
        "pass": recipe.get("pass"),
        "pass_args": oatest_tvm_synth.spliced_pass_args(recipe),
        "fault": fault,
        "provenance": recipe.get("provenance"),
    }


def _static(ty):
    s = oatest_tvm_synth._static(ty)
    return None if s is None else [s[0], list(s[1])]


def _top_bindings(f) -> list:
    """(block index, binding) of a Relax function's top-level blocks, in order."""
    if not isinstance(f.body, relax.SeqExpr):
        return []
    return [(i, b) for i, block in enumerate(f.body.blocks) for b in block.bindings]


def summary(mod: tvm.IRModule) -> dict:
    """Functions (Relax or not, called by another function or not), main's parameters and outputs, and every
    top-level binding of each Relax function (variable, static type, whether in a dataflow block, value kind)."""
    called = set()
    for gv in mod.get_global_vars():
        if isinstance(mod[gv], relax.Function):
            called |= {g.name_hint for g in relax.analysis.all_global_vars(mod[gv]) if g.name_hint != gv.name_hint}
    funcs = []
    total = 0
    for gv in sorted(mod.get_global_vars(), key=lambda g: g.name_hint):
        f = mod[gv]
        entry = {"name": gv.name_hint, "relax": isinstance(f, relax.Function), "called": gv.name_hint in called}
        if isinstance(f, relax.Function):
            bindings = []
            for block, b in _top_bindings(f):
                value = b.value
                kind = type(value).__name__
                if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
                    kind = value.op.name
                bindings.append({"var": b.var.name, "type": _static(b.var.ty), "block": block, "value": kind})
            total += len(bindings)
            ret = f.body.body if isinstance(f.body, relax.SeqExpr) else None
            entry["params"] = [{"name": p.name, "type": _static(p.ty)} for p in f.params]
            entry["bindings"] = bindings
            entry["outputs"] = len(ret.fields) if isinstance(ret, relax.Tuple) else 1
        funcs.append(entry)
    return {"functions": funcs, "bindings": total}


@relax.expr_functor.mutator
class _Subst(relax.PyExprMutator):
    """Replaces variables by expressions."""

    def __init__(self, smap: dict):
        super().__init__()
        self.smap = smap

    def visit_var_(self, v):
        return self.smap.get(v, v)

    def visit_dataflow_var_(self, v):
        return self.smap.get(v, v)


def _used(bindings: list, result) -> set:
    used = set(relax.analysis.free_vars(result))
    for _, b in bindings:
        used |= set(relax.analysis.free_vars(b.value))
    return used


def _tidy(f, bindings: list, result) -> list:
    """Bindings that nothing reads (pure ones: any in a dataflow block) dropped until none is left."""
    dataflow = {i for i, blk in enumerate(f.body.blocks) if isinstance(blk, relax.DataflowBlock)}
    while True:
        used = _used(bindings, result)
        keep = [
            (i, b)
            for i, b in bindings
            if b.var in used or (i not in dataflow and relax.analysis.contains_impure_call(b.value))
        ]
        if len(keep) == len(bindings):
            return bindings
        bindings = keep


def _rebuild(mod, f, params, bindings: list, result, attrs):
    """`f` with these parameters, (block index, binding) list, result and attributes, normalized."""
    blocks = []
    for i, blk in enumerate(f.body.blocks):
        mine = [b for j, b in bindings if j == i]
        if mine:
            blocks.append(relax.DataflowBlock(mine) if isinstance(blk, relax.DataflowBlock) else relax.BindingBlock(mine))
    seq = relax.BlockBuilder(mod).normalize(relax.SeqExpr(blocks, result))
    return relax.Function(params, seq, None, f.is_pure, attrs)


def _num_input(f) -> int | None:
    return int(f.attrs["num_input"]) if f.attrs is not None and "num_input" in f.attrs else None


def _main_params(f, params: list, n_inputs: int | None, used: set) -> tuple:
    """main's parameters nothing reads dropped, `num_input` (its first parameters are the runtime inputs, the
    rest weights) kept in step; returns (params, attrs)."""
    kept = [p for p in params if p in used]
    attrs = f.attrs
    if n_inputs is not None:
        attrs = f.with_attr("num_input", len([p for p in params[:n_inputs] if p in used])).attrs
    return kept, attrs


def _fresh(names: set, base: str) -> str:
    name, k = base, 1
    while name in names:
        name, k = f"{base}_{k}", k + 1
    return name


def apply(mod: tvm.IRModule, edit: dict) -> tvm.IRModule:
    """The module with one edit made (see the module docstring); raises ValueError when it does not apply."""
    op = edit["op"]
    if op == "drop_function":
        gv = mod.get_global_var(edit["func"])
        out = tvm.IRModule({g: mod[g] for g in mod.get_global_vars() if not g.same_as(gv)}, attrs=mod.attrs)
        return _checked(out)
    if op == "drop_param":
        return _drop_param(mod, edit["func"], edit["index"])
    name = edit.get("func", "main")
    gv = mod.get_global_var(name)
    f = mod[gv]
    if not isinstance(f, relax.Function) or not isinstance(f.body, relax.SeqExpr):
        raise ValueError(f"{name} is not a Relax function with a body of blocks")
    params = list(f.params)
    n_inputs = _num_input(f)
    bindings = _top_bindings(f)
    result = f.body.body
    smap = {}
    if op in ("keep_output", "drop_output"):
        fields = list(result.fields) if isinstance(result, relax.Tuple) else [result]
        k = edit["index"]
        if k >= len(fields) or len(fields) < 2:
            raise ValueError("no such output, or the only one")
        fields = [fields[k]] if op == "keep_output" else fields[:k] + fields[k + 1 :]
        result = relax.Tuple(fields)
    elif op == "return_value":
        # main returns one of its values: what came after it goes (the value a failure starts from, alone)
        k = edit["index"]
        if name != "main" or k >= len(bindings) or _static(bindings[k][1].var.ty) is None:
            raise ValueError("only a statically shaped value of main is returned")
        block, b = bindings[k]
        var = b.var
        if isinstance(var, relax.DataflowVar):
            # a dataflow variable cannot leave its block: the binding becomes one of the block's outputs
            var = relax.Var(var.name, var.ty)
            smap[b.var] = var
            bindings[k] = (block, relax.VarBinding(var, b.value))
        result = relax.Tuple([var])
    elif op in ("drop_binding", "param", "zeros"):
        k = edit["index"]
        if k >= len(bindings):
            raise ValueError("no such binding")
        block, b = bindings[k]
        if op == "zeros":
            ty = _static(b.var.ty)
            if ty is None or (isinstance(b.value, relax.Call) and b.value.op.same_as(tvm.ir.Op.get("relax.zeros"))):
                raise ValueError("not a statically shaped tensor, or zeros already")
            bindings[k] = (block, relax.VarBinding(b.var, relax.op.zeros(ty[1], ty[0])))
        else:
            if op == "param":
                if name != "main" or _static(b.var.ty) is None:
                    raise ValueError("only main's statically shaped values become parameters")
                names = {p.name for p in params} | {x.var.name for _, x in bindings}
                new = relax.Var(_fresh(names, b.var.name + "_in"), b.var.ty)
                # a runtime input, not a weight: before the weights, counted in num_input
                at = len(params) if n_inputs is None else n_inputs
                params.insert(at, new)
                n_inputs = None if n_inputs is None else n_inputs + 1
            else:
                same = [v for v in relax.analysis.free_vars(b.value) if tvm_ffi.structural_equal(v.ty, b.var.ty)]
                used = _used(bindings, result)
                if b.var in used and not same:
                    raise ValueError("its value reads no operand of its type")
                new = same[0] if same else None
            if new is not None and isinstance(new, relax.DataflowVar) and not isinstance(b.var, relax.DataflowVar):
                # an output of a dataflow block stays one: its operand's binding in the block binds it instead
                at = [j for j, (i, x) in enumerate(bindings) if x.var.same_as(new) and i == block]
                if not at or not isinstance(bindings[at[0]][1], relax.VarBinding):
                    raise ValueError("an output of a dataflow block cannot become a dataflow variable")
                bindings[at[0]] = (block, relax.VarBinding(b.var, bindings[at[0]][1].value))
                smap[new] = b.var
            elif new is not None:
                smap[b.var] = new
            del bindings[k]
    else:
        raise ValueError(f"unknown edit {op!r}")
    if smap:
        sub = _Subst(smap)
        bindings = [(i, relax.VarBinding(x.var, sub.visit_expr(x.value)) if isinstance(x, relax.VarBinding) else x)
                    for i, x in bindings]
        result = sub.visit_expr(result)
    attrs = f.attrs
    bindings = _tidy(f, bindings, result)
    if name == "main":
        params, attrs = _main_params(f, params, n_inputs, _used(bindings, result))
    nf = _rebuild(mod, f, params, bindings, result, attrs)
    out = tvm.IRModule({g: mod[g] for g in mod.get_global_vars()}, attrs=mod.attrs)
    out[gv] = nf
    return _checked(out)


def _drop_param(mod: tvm.IRModule, name: str, k: int) -> tvm.IRModule:
    """A parameter nothing reads dropped from a function other than main, and its argument from every call
    that is a top-level binding's value (a call elsewhere makes the re-parsed script fail: no edit); the result is
    the script re-parsed."""
    gv = mod.get_global_var(name)
    f = mod[gv]
    if name == "main" or not isinstance(f, relax.Function) or k >= len(f.params):
        raise ValueError("not a parameter of a Relax function other than main")
    if f.params[k] in set(relax.analysis.free_vars(f.body)):
        raise ValueError("the parameter is read")
    out = tvm.IRModule({g: mod[g] for g in mod.get_global_vars()}, attrs=mod.attrs)
    params = [p for i, p in enumerate(f.params) if i != k]
    out[gv] = relax.Function(params, f.body, f.ret_ty, f.is_pure, f.attrs)
    for caller in mod.get_global_vars():
        g = out[caller]
        if not isinstance(g, relax.Function) or not isinstance(g.body, relax.SeqExpr):
            continue
        blocks = []
        for blk in g.body.blocks:
            new = []
            for b in blk.bindings:
                v = b.value
                if isinstance(b, relax.VarBinding) and isinstance(v, relax.Call) and v.op.same_as(gv):
                    args = [a for i, a in enumerate(v.args) if i != k]
                    b = relax.VarBinding(b.var, relax.Call(gv, args, v.attrs, v.ty_args))
                new.append(b)
            blocks.append(relax.DataflowBlock(new) if isinstance(blk, relax.DataflowBlock) else relax.BindingBlock(new))
        out[caller] = relax.Function(g.params, relax.SeqExpr(blocks, g.body.body), g.ret_ty, g.is_pure, g.attrs)
    # the function's GlobalVar keeps its old signature, which only parsing the script types anew
    return _reparsed(out)[1]


def _checked(mod: tvm.IRModule) -> tvm.IRModule:
    """The edited module normalized (what an edit built typed, as parsing its script would), checked well formed
    (raises when it is not)."""
    mod = relax.transform.Normalize()(mod)
    relax.analysis.well_formed(mod)
    return mod


def tool(request: dict) -> dict:
    """Answers a tool request: `op` = module (a recipe's module test), summary (of `script`), apply (`edit` to
    `script`: the new script and its summary), verify (`script`, an applied edit's: whether it re-parses to the
    module its runs used)."""
    op = request.get("op")
    if op == "module":
        test = module_test(request["recipe"])
        test["summary"] = summary(parsed(test["script"]))
        return test
    mod = parsed(request["script"])
    if op == "summary":
        return summary(mod)
    if op == "apply":
        out = apply(_copy(mod), request["edit"])
        text = out.script(show_meta=True)
        if text not in _PARSED:
            _keep(text, out)
            _UNVERIFIED.add(text)
        return {"script": text, "summary": summary(out)}
    if op == "verify":
        return {"same": verify(request["script"])}
    raise ValueError(f"unknown tool request {op!r}")


def answer(request: dict) -> list:
    """The tool's answer as the runner's outputs: one uint8 tensor `json`."""
    data = json.dumps(tool(request)).encode()
    return [("json", 2, [len(data)], data)]
