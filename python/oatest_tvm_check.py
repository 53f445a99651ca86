"""The campaign's pattern check for oatest's `tvm` target (a recipe with `check_only`, sent by
src/pattern/relax.rs's check_library): a pattern whose tensors are too large is shrunk, it must splice into the
recipe's seed (oatest_tvm_synth's `synthesize`), and the answer is the pattern's module as TVM JSON
(`pattern_ir`, which the campaign's recipes then carry) and the script used.
"""
from __future__ import annotations

import math
import random
import re

import tvm
from tvm import relax

import oatest_tvm_passes
from oatest_tvm_synth import RETYPES, _entry, _parsed, expose_inner, retyped, synthesize
from oatest_tvm_vary import attr_sites

# the attribute sites of a pattern the check tries for `--vary attr` (each costs a parse, a splice and a build)
MAX_ATTR_SITES = 6


def pattern_ir(script: str) -> str:
    """The pattern's module as TVM JSON (what recipes carry as `pattern_ir`)."""
    return tvm.ir.save_json(_parsed(script))


# Patterns from TVM's tests often compute on large tensors ((2, 1024, 640) matmuls): such a test runs for
# seconds. A pattern whose static tensors exceed MAX_ELEMS elements is shrunk: its large dimensions divided by
# one power of two (the same everywhere in the script, so equal dims stay equal), then checked like any other.
MAX_ELEMS = 16384
_SHAPE = re.compile(r"(?:R\.Tensor|T\.Buffer)\(\(((?:[^()]|\([^()]*\))*)\)")
_DIM = re.compile(r"^\s*(?:T\.int64\()?(\d+)\)?\s*$")
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _shapes(script: str):
    """The static shapes written in a script (R.Tensor and T.Buffer annotations)."""
    for m in _SHAPE.finditer(script):
        dims = [_DIM.match(d) for d in m.group(1).split(",") if d.strip()]
        if all(dims):
            yield [int(d.group(1)) for d in dims]


def max_elems(script: str) -> int:
    return max((math.prod(s) for s in _shapes(script)), default=0)


def shrink(script: str) -> str | None:
    """The script with every dimension of 32 or more divided by the smallest power of two that brings each
    static tensor to MAX_ELEMS elements or fewer (None if none does)."""
    large = sorted({d for s in _shapes(script) for d in s if d >= 32})
    for k in range(1, 11):
        f = 1 << k
        new = {d: max(2, d // f) for d in large}
        if max((math.prod(new.get(d, d) for d in s) for s in _shapes(script)), default=0) <= MAX_ELEMS:
            return _INT.sub(lambda m: str(new.get(int(m.group(1)), m.group(1))), script)
    return None


def check_pattern(recipe: dict) -> dict:
    """The campaign's pattern check, step one: the pattern (shrunk if it is too large) parses, takes static
    tensors, and splices into the recipe's seed; returns the pattern's module as JSON, the script used, whether
    its entry has an inner value `--vary extra-reader` can expose ("1" or "0"), the dtypes `--vary dtype` may
    write its float32 values in, and the attribute sites `--vary attr` may change (oatest_tvm_vary; each
    comma-separated: those whose variant parses, splices, keeps the contract of the test's pass and legalizes,
    an attribute variant also builds at the reference)."""
    script = recipe["pattern"]
    if max_elems(script) > MAX_ELEMS:
        if "T.prim_func" in script:
            # shrinking rewrites the dims it finds in annotations; a PrimFunc's loops, allocations and offsets
            # stay as written, and then read and write outside its buffers (a campaign's pattern results
            # differed from run to run)
            raise ValueError("the pattern's tensors are too large, and its PrimFuncs cannot be shrunk with them")
        script = shrink(script)
        if script is None:
            raise ValueError("the pattern's tensors are too large even shrunk")
    synthesize(bytes.fromhex(recipe["seed_onnx"]), script, recipe["rng"])
    pat = _parsed(script)
    exposable = expose_inner(pat[_entry(pat)], random.Random(0))[1]
    exposed = "1" if exposable else "0"
    dtypes = [d for d in RETYPES if _retypable(recipe, script, d)]
    sites = [k for k in range(min(attr_sites(pat), MAX_ATTR_SITES)) if _splices(recipe, script, [f"attr:{k}"], True)]
    return {"pattern_ir": pattern_ir(script), "pattern_script": script, "pattern_exposable": exposed,
            "pattern_dtypes": ",".join(dtypes), "pattern_attrs": ",".join(map(str, sites))}


def _retypable(recipe: dict, script: str, dtype: str) -> bool:
    other = retyped(script, dtype)
    # BindParams binds parameters to its test's float32 arrays, which a retyped parameter no longer takes
    if other is None or oatest_tvm_passes.bound_params(recipe.get("pass"), recipe.get("pass_args")):
        return False
    return _splices(recipe, script, [f"dtype:{dtype}"])


def _splices(recipe: dict, script: str, vary: list, build: bool = False) -> bool:
    """The variant parses, splices, keeps the contract of the test's pass, and legalizes: the reference of every
    test runs LegalizeOps, which an attribute variant may fail (a first campaign's `--vary attr` tests were a
    quarter invalid: batch_norm's legalizer takes no negative axis), and such a test is only invalid. `build`:
    it builds at the reference (an op that types but is left unlegalized fails in CodeGenVM, as a second
    campaign's take moved past a symbolic dim did, before variants kept their result)."""
    try:
        mod = synthesize(bytes.fromhex(recipe["seed_onnx"]), script, recipe["rng"], vary=vary)
        if oatest_tvm_passes.broken(recipe.get("pass") or "", mod):
            return False
        target = tvm.target.Target({"kind": "llvm", "opt-level": 0})
        with target:
            if not build:
                relax.transform.LegalizeOps()(mod)
                return True
            required = [oatest_tvm_passes.constructor(n)() for n, lowest in oatest_tvm_passes.PIPELINE
                        if lowest == "required"]
            with tvm.transform.PassContext(opt_level=3):
                tvm.compile(mod, target=target, relax_pipeline=tvm.transform.Sequential(required))
    except Exception:  # noqa: BLE001 - a variant that does not parse, splice or legalize is not made
        return False
    return True
