"""Relax-level reduction's runner side (python/oatest_tvm_reduce.py): a recipe as a module test that computes what
the recipe computes, each edit giving a well-formed, re-parsable module (or refused), and an accepted edit's script
verified to re-parse to the module its runs used."""
from __future__ import annotations

import json

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm is installed by scripts/setup.sh")
from tvm import relax  # noqa: E402

import oatest_tvm as T  # noqa: E402
import oatest_tvm_reduce as R  # noqa: E402
from test_tvm_synth import PATTERN, seed_model  # noqa: E402


def tool(request: dict) -> dict:
    out = T.run(json.dumps({"kind": R.TOOL_KIND, **request}).encode(), [], "disable", [])
    assert out["status"] == "ok", out["message"]
    return json.loads(out["outputs"][0][3])


def module_test() -> dict:
    recipe = {"kind": "oatest-relax-synth", "seed_onnx": seed_model().hex(), "pattern": PATTERN, "rng": 3,
              "pass": "FuseOps"}
    return tool({"op": "module", "recipe": recipe}), recipe


def test_a_recipes_module_test_computes_what_the_recipe_computes():
    test, recipe = module_test()
    assert test["kind"] == R.MODULE_KIND and test["pass"] == "FuseOps"
    names = [f["name"] for f in test["summary"]["functions"]]
    assert names == ["main", "oatest_pattern"]
    x = np.linspace(-1, 1, 20, dtype="float32").reshape(4, 5)
    main = next(f for f in test["summary"]["functions"] if f["name"] == "main")
    assert [p["type"] for p in main["params"]] == [["float32", [4, 5]]]
    as_module = T.run(json.dumps(test).encode(), [(main["params"][0]["name"], 1, [4, 5], x.tobytes())], "all", [])
    as_recipe = T.run(json.dumps(recipe).encode(), [("x", 1, [4, 5], x.tobytes())], "all", [])
    assert as_module["status"] == as_recipe["status"] == "ok", (as_module["message"], as_recipe["message"])
    assert "FuseOps" in as_module["fired"]
    for a, b in zip(as_module["outputs"], as_recipe["outputs"]):
        assert a[3] == b[3]


@pytest.mark.parametrize(
    "edit, fewer",
    [
        ({"op": "keep_output", "index": 1}, True),
        ({"op": "drop_output", "index": 0}, True),
        ({"op": "drop_binding", "func": "oatest_pattern", "index": 1}, True),
        ({"op": "param", "func": "main", "index": 0}, True),
        ({"op": "return_value", "func": "main", "index": 0}, True),
        ({"op": "zeros", "func": "oatest_pattern", "index": 0}, False),
    ],
)
def test_every_edit_gives_a_well_formed_module_that_re_parses(edit, fewer):
    test, _ = module_test()
    out = tool({"op": "apply", "script": test["script"], "edit": edit})
    mod = tvm.script.from_source(out["script"])
    relax.analysis.well_formed(mod)
    assert out["summary"] == R.summary(mod)
    before, after = test["summary"]["bindings"], out["summary"]["bindings"]
    assert (after < before) if fewer else (after <= before), (edit, before, after)
    assert out["script"] != test["script"]


def test_an_edit_is_run_unparsed_and_its_script_verified_once_accepted(monkeypatch):
    monkeypatch.setattr(R, "_PARSED", {})  # nothing kept from other tests' edits
    monkeypatch.setattr(R, "_UNVERIFIED", set())
    test, _ = module_test()
    edited = R.parsed(test["script"])
    printed = edited.script(show_meta=True)
    parses = []
    real = tvm.script.from_source
    monkeypatch.setattr(tvm.script, "from_source", lambda text: parses.append(text) or real(text))
    out = tool({"op": "apply", "script": test["script"], "edit": {"op": "drop_output", "index": 0}})
    assert parses == [], "no parse: the edit's runs use the module the edit made"
    made = R.parsed(out["script"])
    assert made is R.parsed(out["script"]) and parses == [], "its checks run that module"
    assert tool({"op": "verify", "script": out["script"]}) == {"same": True}
    assert parses == [out["script"]], "one parse, once the edit is accepted"
    assert R.parsed(out["script"]) is not made, "from then on the script's module is the parsed one"
    assert tool({"op": "verify", "script": out["script"]}) == {"same": True} and len(parses) == 1
    assert edited.script(show_meta=True) == printed and R.parsed(test["script"]) is edited


def test_a_script_that_does_not_re_parse_to_the_module_its_runs_used_is_not_verified(monkeypatch):
    monkeypatch.setattr(R, "_PARSED", {})  # nothing kept from other tests' edits
    monkeypatch.setattr(R, "_UNVERIFIED", set())
    test, _ = module_test()
    a = tool({"op": "apply", "script": test["script"], "edit": {"op": "drop_output", "index": 0}})["script"]
    b = tool({"op": "apply", "script": test["script"], "edit": {"op": "keep_output", "index": 0}})["script"]
    R._PARSED[a] = R._PARSED[b]  # a's runs would have used b's module
    assert tool({"op": "verify", "script": a}) == {"same": False}
    assert tool({"op": "verify", "script": b}) == {"same": True}


def test_a_fresh_parameter_of_main_is_a_runtime_input_and_an_unused_one_goes():
    test, _ = module_test()
    # main's first binding (the bridge into the pattern) becomes a parameter: x then only feeds the seed's part
    out = tool({"op": "apply", "script": test["script"], "edit": {"op": "param", "func": "main", "index": 0}})
    main = tvm.script.from_source(out["script"])["main"]
    assert len(main.params) == 2 and int(main.attrs["num_input"]) == 2
    # only the pattern's output kept: x is read by nothing and leaves main
    out = tool({"op": "apply", "script": out["script"], "edit": {"op": "keep_output", "index": 1}})
    main = tvm.script.from_source(out["script"])["main"]
    assert [p.name for p in main.params] == ["lv_in"] and int(main.attrs["num_input"]) == 1


def test_an_unused_parameter_leaves_a_function_and_its_calls():
    test, _ = module_test()
    # the pattern's first binding (a = x + x) made zeros: its parameter x is read by nothing
    edit = {"op": "zeros", "func": "oatest_pattern", "index": 0}
    script = tool({"op": "apply", "script": test["script"], "edit": edit})["script"]
    out = tool({"op": "apply", "script": script, "edit": {"op": "drop_param", "func": "oatest_pattern", "index": 0}})
    mod = tvm.script.from_source(out["script"])
    assert len(mod["oatest_pattern"].params) == 0
    assert "oatest_pattern()" in out["script"]


def test_edits_that_do_not_apply_are_refused():
    test, _ = module_test()
    mod = tvm.script.from_source(test["script"])
    # the pattern's entry is called from main: dropping it leaves a module that does not parse
    with pytest.raises(Exception):
        R.apply(mod, {"op": "drop_function", "func": "oatest_pattern"})
    with pytest.raises(ValueError):
        R.apply(mod, {"op": "drop_param", "func": "oatest_pattern", "index": 0})  # read
    with pytest.raises(ValueError):
        R.apply(mod, {"op": "param", "func": "oatest_pattern", "index": 0})  # only main's values
