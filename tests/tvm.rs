//! The tvm target end to end (needs apache-tvm in .venv: scripts/setup.sh installs it; without it these tests
//! fail with that message). Misbehaviour is injected only under OATEST_TVM_TEST_FAULTS=1, from the model's
//! metadata (`oatest.fault` = segfault | wrong, `oatest.fault.needs` = the Relax passes that must fire).

mod common;
use common::{chain_model, constant_lhs_matmuls, json};
use oatest::compiler::worker::{Worker, WorkerSpec};
use oatest::compiler::TargetKind;
use std::collections::BTreeSet;
use std::process::{Command, Output};

fn chain(ops: &[&str], fault: Option<(&str, &str)>) -> Vec<u8> {
    chain_model(ops, &[2, 3], fault)
}

fn oatest_faulty(args: &[&str]) -> Output {
    faulty(args).output().expect("oatest runs")
}

/// oatest with the runner's test-only faults on.
fn faulty(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_oatest"));
    c.args(args).env("OATEST_TVM_TEST_FAULTS", "1");
    c
}

fn run_json(model: &std::path::Path) -> Vec<serde_json::Value> {
    let o = oatest_faulty(&["run", model.to_str().unwrap(), "--target", "tvm", "--json", "--judge", "--jobs", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_model_compiles_and_runs_with_the_passes_that_changed_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, chain(&["Relu", "Sigmoid", "Neg"], None)).unwrap();
    let rows = run_json(&model);
    let by = |c: &str| rows.iter().find(|r| r["config"] == c).unwrap_or_else(|| panic!("no {c}: {rows:?}"));
    assert_eq!(by("disable")["status"], "ok");
    assert_eq!(by("all")["status"], "ok");
    let fired = |c: &str| -> BTreeSet<String> {
        by(c)["passes_fired"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
    };
    assert!(fired("all").contains("FuseOps") && fired("all").contains("FuseTIR"), "{:?}", fired("all"));
    assert!(!fired("disable").contains("FuseOps"), "the reference pipeline does not fuse");
    assert!(fired("disable").contains("LegalizeOps"));
    let verdict = rows.last().unwrap();
    assert!(verdict["judgement"]["verdicts"].as_array().unwrap().is_empty(), "{verdict}");
}

#[test]
fn a_tvm_crash_is_an_outcome_and_the_worker_survives_it() {
    let dir = tempfile::tempdir().unwrap();
    let (bad, good) = (dir.path().join("a_bad.onnx"), dir.path().join("b_good.onnx"));
    std::fs::write(&bad, chain(&["Relu", "Sigmoid"], Some(("segfault", "FuseOps")))).unwrap();
    std::fs::write(&good, chain(&["Relu", "Sigmoid"], None)).unwrap();
    let o =
        oatest_faulty(&["run", dir.path().to_str().unwrap(), "--target", "tvm", "--json", "--judge", "--jobs", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let status = |m: &str, c: &str| {
        rows.iter().find(|r| r["model"].as_str().is_some_and(|p| p.ends_with(m)) && r["config"] == c).unwrap()["status"]
            .clone()
    };
    assert_eq!(status("a_bad.onnx", "all"), "crash");
    assert_eq!(status("a_bad.onnx", "disable"), "ok");
    assert_eq!(status("b_good.onnx", "all"), "ok", "the restarted worker runs the next model");
}

#[test]
fn delta_debugging_finds_the_relax_passes_a_bug_needs() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, chain(&["Relu", "Sigmoid", "Neg"], Some(("wrong", "FuseOps;FuseTIR")))).unwrap();
    let out = dir.path().join("bug");
    let o = oatest_faulty(&[
        "reduce",
        model.to_str().unwrap(),
        "--target",
        "tvm",
        "--max-checks",
        "12",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert_eq!(bug["symptom"], "inconsistency");
    let culprits: BTreeSet<&str> = t["culprits"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    // FuseOps only fuses what AnnotateTIROpPattern marked: without it neither needed pass fires
    assert_eq!(culprits, BTreeSet::from(["AnnotateTIROpPattern", "FuseOps", "FuseTIR"]), "{t}");
    assert!(t["nodes"].as_u64().unwrap() <= 3);
    assert!(out.join("report.md").exists());
    // repro.py runs on its own (the runner's modules are embedded in it) and reproduces the bug: exit status 1
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let o = Command::new(python)
        .arg(out.join("repro.py"))
        .current_dir(dir.path())
        .env("OATEST_TVM_TEST_FAULTS", "1")
        .output()
        .expect("python runs");
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{said}");
    assert!(said.contains("REPRODUCED: inconsistency"), "{said}");
}

#[test]
fn the_worker_reports_the_optional_passes_of_the_runners_pipeline() {
    let mut spec = WorkerSpec::new(TargetKind::Tvm).unwrap();
    spec.exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_oatest"));
    let w = Worker::start(spec).expect("TVM worker (run scripts/setup.sh)");
    let p = &w.info.optional_passes;
    assert!(p.contains(&"FuseOps".to_string()) && p.contains(&"StaticPlanBlockMemory".to_string()), "{p:?}");
    assert!(!p.contains(&"LegalizeOps".to_string()), "required passes are not targets: {p:?}");
}

/// A few patterns of the committed library per pass (those that fire with default arguments or carry the
/// arguments of their test's pass call), copied to `dir`.
fn small_library(dir: &std::path::Path, passes: &[&str], per_pass: usize) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("patterns/tvm");
    for pass in passes {
        let mut files: Vec<_> = std::fs::read_dir(root.join(pass))
            .unwrap_or_else(|e| panic!("patterns/tvm/{pass}: {e}"))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        let keep: Vec<_> = files
            .into_iter()
            .filter(|f| json(f)["fires_with_default_args"] == true || !json(f)["pass_args"].is_null())
            .take(per_pass)
            .collect();
        assert!(!keep.is_empty(), "no {pass} pattern fires with default or recorded arguments");
        std::fs::create_dir_all(dir.join(pass)).unwrap();
        for f in keep {
            std::fs::copy(&f, dir.join(pass).join(f.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn a_tvm_campaign_synthesizes_from_relax_patterns_and_triggers_their_passes() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, cache) = (dir.path().join("lib"), dir.path().join("cache"));
    // CombineParallelMatmul's test patterns are large (they are shrunk); ConvertToDataflow's never fire in the
    // pipeline once spliced (CanonicalizeBindings runs first and leaves them nothing to convert)
    small_library(
        &lib,
        &["FuseOps", "FuseTIR", "DeadCodeElimination", "CombineParallelMatmul", "ConvertToDataflow"],
        3,
    );
    let fuzz = |out: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_oatest"))
            .args(["fuzz", "--target", "tvm", "--tests", "8", "--seed", "1", "--jobs", "2", "--no-triage"])
            .args(["--patterns", lib.to_str().unwrap(), "--out", out.to_str().unwrap()])
            .env("OATEST_CACHE_DIR", &cache)
            .output()
            .expect("oatest runs")
    };
    let out = dir.path().join("run");
    let o = fuzz(&out);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    assert!(err.contains("Relax patterns"), "synthesis is the default for tvm: {err}");
    assert!(err.contains("do not fire once spliced"), "the ConvertToDataflow patterns are rejected: {err}");
    assert!(err.contains("usable once shrunk"), "the large CombineParallelMatmul patterns are shrunk: {err}");
    assert!(err.contains("(0 verdicts cached)"), "{err}");
    let s = json(&out.join("stats.json"));
    assert_eq!(s["tests_executed"], 8);
    assert_eq!(s["tests_valid"], 8, "{s}");
    assert!(s["tests_with_target_pass"].as_u64().unwrap() == 8, "{s}");
    assert!(s["trigger_rate"].as_f64().unwrap() > 0.5, "{s}");
    assert!(s["trigger_by_pass"].get("ConvertToDataflow").is_none(), "{s}");
    // a second campaign takes the verdicts from the cache
    let o = fuzz(&dir.path().join("again"));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success() && err.contains("(15 verdicts cached)"), "{err}");
    // the seed-only baseline still exists
    let out2 = dir.path().join("random");
    let o = oatest_faulty(&[
        "fuzz",
        "--target",
        "tvm",
        "--mode",
        "random",
        "--tests",
        "4",
        "--jobs",
        "1",
        "--no-triage",
        "--out",
        out2.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(json(&out2.join("stats.json"))["passes_fired"]["LegalizeOps"].as_u64().unwrap() > 0);
}

#[test]
fn passes_outside_the_pipeline_run_at_their_placement_for_their_own_patterns() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, cache) = (dir.path().join("lib"), dir.path().join("cache"));
    // FuseOpsByPattern fires only with its test's arguments (the pattern list), recorded in the library
    // Gradient and BindParams act on the function their test names (`func_name="main"`): spliced, the
    // pattern's entry; the parameters BindParams binds are fed its constants, and their arguments dropped
    small_library(&lib, &["FuseOpsByPattern", "RemoveUnusedParameters", "Gradient", "BindParams"], 4);
    let out = dir.path().join("run");
    let o = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["fuzz", "--target", "tvm", "--tests", "16", "--seed", "3", "--jobs", "2", "--no-triage"])
        .args(["--patterns", lib.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("OATEST_CACHE_DIR", &cache)
        .output()
        .expect("oatest runs");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{err}");
    let s = json(&out.join("stats.json"));
    assert_eq!(s["tests_valid"], s["tests_executed"], "{s}");
    assert!(s["passes_fired"]["FuseOpsByPattern"].as_u64().unwrap_or(0) > 0, "inserted, it fires: {s}");
    for pass in ["Gradient", "BindParams"] {
        assert!(s["passes_fired"][pass].as_u64().unwrap_or(0) > 0, "{pass} fires on the pattern's entry: {s}");
    }
    assert!(err.contains("hosts with TVM's structure"), "{err}");
}

#[test]
fn delta_debugging_covers_an_inserted_pass() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    small_library(&lib, &["FuseOpsByPattern"], 6);
    // a FuseOpsByPattern pattern that fires spliced into this seed, with its recorded arguments
    let seed = chain(&["Relu", "Sigmoid"], Some(("wrong", "FuseOpsByPattern")));
    let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let mut found = false;
    for (i, f) in std::fs::read_dir(lib.join("FuseOpsByPattern")).unwrap().enumerate() {
        let pattern = json(&f.unwrap().path());
        let recipe = serde_json::json!({
            "kind": "oatest-relax-synth", "seed_onnx": hex, "pattern": pattern["script"],
            "pass": "FuseOpsByPattern", "pass_args": pattern["pass_args"], "provenance": pattern["provenance"],
            "rng": 1, "check_only": false,
        });
        let case = dir.path().join(format!("case{i}"));
        std::fs::create_dir_all(&case).unwrap();
        let file = case.join("recipe.json");
        std::fs::write(&file, recipe.to_string()).unwrap();
        let out = case.join("bug");
        let o = oatest_faulty(&["reduce", file.to_str().unwrap(), "--target", "tvm", "--out", out.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&o.stdout).to_string();
        if o.status.success() && stdout.contains("culprits: FuseOpsByPattern") {
            found = true;
            break;
        }
    }
    assert!(found, "some FuseOpsByPattern pattern's fault is traced to the inserted pass");
}

/// `oatest reduce` (faults on) of a recipe splicing a FuseOps pattern of a small library into `seed`, in `dir`:
/// (the recipe file, the bug directory, reduce's stdout); asserts that it succeeds.
fn reduce_fuseops_recipe(dir: &std::path::Path, seed: &[u8]) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let lib = dir.join("lib");
    small_library(&lib, &["FuseOps"], 1);
    let pattern_file = std::fs::read_dir(lib.join("FuseOps")).unwrap().next().unwrap().unwrap().path();
    let pattern = json(&pattern_file);
    let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let recipe = serde_json::json!({
        "kind": "oatest-relax-synth", "seed_onnx": hex, "pattern": pattern["script"], "pass": "FuseOps",
        "provenance": pattern["provenance"], "rng": 1, "check_only": false,
    });
    let file = dir.join("recipe.json");
    std::fs::write(&file, recipe.to_string()).unwrap();
    let out = dir.join("bug");
    let o = oatest_faulty(&["reduce", file.to_str().unwrap(), "--target", "tvm", "--out", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    (file, out, stdout)
}

#[test]
fn a_relax_level_finding_is_reduced_in_its_seed_graph_and_keeps_the_pattern_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    // a seed of 5 nodes whose injected fault (outputs + 1) needs FuseOps, which the pattern fires on its own
    let seed = chain(&["Relu", "Sigmoid", "Neg", "Abs", "Exp"], Some(("wrong", "FuseOps")));
    let (file, out, stdout) = reduce_fuseops_recipe(dir.path(), &seed);
    assert!(stdout.contains("culprits: FuseOps"), "{stdout}");
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert_eq!(t["original_nodes"], 5, "{bug}");
    assert!(t["nodes"].as_u64().unwrap() < 5, "the seed graph is reduced: {bug}");
    // the pattern is needed (a seed without it shows nothing), so the minimized test is a Relax module test
    let minimized = std::fs::read(out.join("module.json")).unwrap();
    let module: serde_json::Value = serde_json::from_slice(&minimized).expect("module.json is a module test");
    assert_eq!(module["kind"], "oatest-relax-module");
    assert!(!out.join("model.onnx").exists() && !out.join("recipe.json").exists(), "a module test, nothing else");
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("original.json")).unwrap()).unwrap();
    let given: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(original, given);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("The minimized Relax module `module.py`"), "{report}");
}

/// A seed graph that fails on its own in the pass the finding's error was raised in, with another message than the
/// seed and pattern together (the pattern only changes how the failure shows, as ConvertLayout's broken R.stack
/// layout fails differently by what reads it): the finding is filed as the seed's error, a plain model.
#[test]
fn a_relax_level_finding_whose_seed_fails_alone_in_the_same_pass_is_the_seeds_error() {
    use oatest::graph::onnx;
    let dir = tempfile::tempdir().unwrap();
    // FuseOps raises whenever it runs, saying whether the pattern is in the module: the pattern changes the message
    let mut seed = onnx::decode_model(&chain(&["Relu", "Sigmoid"], Some(("raise:FuseOps", "")))).unwrap();
    seed.metadata.push(("oatest.fault.names".into(), "1".into()));
    let (_, out, _) = reduce_fuseops_recipe(dir.path(), &onnx::encode_model(&seed));
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert!(t["class_note"].as_str().unwrap().contains("filed as the seed's error"), "{bug}");
    assert_eq!(t["culprits"], serde_json::json!(["FuseOps"]), "{bug}");
    let detail = t["detail"].as_str().unwrap();
    assert_eq!(detail, "[raised in FuseOps] RuntimeError: oatest injected fault in FuseOps on the seed's module");
    assert!(out.join("model.onnx").exists() && !out.join("module.json").exists(), "the plain seed: {bug}");
}

/// A pattern with more than its bug needs: a function nothing calls and a chain of six ops, of which the
/// injected fault (outputs + 1 whenever FuseOps fired) needs only what makes FuseOps fire.
const SPARE_PATTERN: &str = r#"# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(private=True)
    def spare(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        with R.dataflow():
            y = R.negative(x)
            R.output(y)
        return y

    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
        with R.dataflow():
            a = R.add(x, w)
            b = R.exp(a)
            c = R.multiply(b, a)
            d = R.subtract(c, x)
            e = R.nn.relu(d)
            f = R.sigmoid(e)
            R.output(f)
        return f
"#;

/// Top-level bindings (`name: type = value` lines) of a module's TVMScript.
fn bindings(script: &str) -> usize {
    script
        .lines()
        .filter(|l| {
            l.trim_start().split_once(": R.").is_some_and(|(v, _)| !v.contains(['(', ' '])) && l.contains(" = ")
        })
        .count()
}

#[test]
fn relax_level_reduction_shrinks_a_pattern_and_its_module_keeps_the_symptom() {
    let dir = tempfile::tempdir().unwrap();
    let seed = chain(&["Relu", "Sigmoid", "Neg"], Some(("wrong", "FuseOps")));
    let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let recipe = serde_json::json!({
        "kind": "oatest-relax-synth", "seed_onnx": hex, "pattern": SPARE_PATTERN, "pass": "FuseOps",
        "provenance": {"test": "t.py::f", "file": "t.py", "function": "f"}, "rng": 1, "check_only": false,
    });
    let file = dir.path().join("recipe.json");
    std::fs::write(&file, recipe.to_string()).unwrap();
    let out = dir.path().join("bug");
    let o = oatest_faulty(&["reduce", file.to_str().unwrap(), "--target", "tvm", "--out", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let (before, after) = (&bug["triage"]["relax_bindings"][0], &bug["triage"]["relax_bindings"][1]);
    let module = json(&out.join("module.json"));
    let script = module["script"].as_str().unwrap();
    // the module test of the spliced recipe has the pattern's six bindings, main's and the splice's
    assert!(before.as_u64().unwrap() >= 8, "{bug}");
    assert!(after.as_u64().unwrap() < before.as_u64().unwrap() / 2, "{bug}\n{script}");
    assert_eq!(bindings(script) as u64, after.as_u64().unwrap(), "{script}");
    assert!(!script.contains("def spare"), "the function nothing calls is gone: {script}");
    assert!(!script.contains("R.sigmoid") || !script.contains("R.nn.relu"), "the chain is cut: {script}");
    assert_eq!(std::fs::read_to_string(out.join("module.py")).unwrap(), script);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("```python") && report.contains("@I.ir_module"), "{report}");
    assert!(!report.contains("pip install onnx"), "{report}");
    // repro.py runs the module with numpy and tvm alone (an onnx that cannot be imported shadows the real one),
    // and shows the symptom while the fault is injected, and nothing without it
    let hidden = dir.path().join("hidden");
    std::fs::create_dir_all(hidden.join("onnx")).unwrap();
    std::fs::write(hidden.join("onnx/__init__.py"), "raise ImportError('onnx is hidden')\n").unwrap();
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let repro = |faults: &str| {
        Command::new(&python)
            .arg(out.join("repro.py"))
            .env("PYTHONPATH", &hidden)
            .env("OATEST_TVM_TEST_FAULTS", faults)
            .output()
            .expect("repro.py runs")
    };
    let shown = repro("1");
    let text = String::from_utf8_lossy(&shown.stdout).to_string() + &String::from_utf8_lossy(&shown.stderr);
    assert_eq!(shown.status.code(), Some(1), "{text}");
    assert!(text.contains("REPRODUCED: inconsistency"), "{text}");
    assert_eq!(repro("0").status.code(), Some(0), "without the fault the module is clean");
}

/// A host module with TVM's own structure: two functions, an `R.If` in `main` whose then-branch calls the
/// other one. Its result does not depend on the values fed to it: `c` is `sum(|x|) >= 0`, true for every
/// finite x, and the then-branch returns `double(|x|·0 + 1)` = 2 everywhere (the else-branch would give -1).
const IF_HOST: &str = r#"# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function(private=True)
    def double(x: R.Tensor((4, 4), dtype="float32")) -> R.Tensor((4, 4), dtype="float32"):
        y: R.Tensor((4, 4), dtype="float32") = R.add(x, x)
        return y

    @R.function
    def main(x: R.Tensor((4, 4), dtype="float32")) -> R.Tensor((4, 4), dtype="float32"):
        cls = Module
        with R.dataflow():
            a: R.Tensor((4, 4), dtype="float32") = R.abs(x)
            s: R.Tensor((), dtype="float32") = R.sum(a)
            c: R.Tensor((), dtype="bool") = R.greater_equal(s, R.const(0.0, "float32"))
            z: R.Tensor((4, 4), dtype="float32") = R.multiply(a, R.const(0.0, "float32"))
            R.output(c, z)
        if c:
            o: R.Tensor((4, 4), dtype="float32") = R.add(z, R.const(1.0, "float32"))
            r: R.Tensor((4, 4), dtype="float32") = cls.double(o)
        else:
            r: R.Tensor((4, 4), dtype="float32") = R.subtract(z, R.const(1.0, "float32"))
        return r
"#;

#[test]
fn a_pattern_spliced_into_a_host_with_an_if_and_two_functions_runs_at_every_level() {
    use oatest::compiler::{Config, Level, Status};
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    small_library(&lib, &["FuseOps"], 1);
    let pattern_file = std::fs::read_dir(lib.join("FuseOps")).unwrap().next().unwrap().unwrap().path();
    let pattern = json(&pattern_file);
    let seed = chain(&["Relu", "Sigmoid"], None);
    let hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let recipe = serde_json::json!({
        "kind": "oatest-relax-synth", "seed_onnx": hex, "pattern": pattern["script"], "pass": "FuseOps",
        "provenance": pattern["provenance"], "rng": 1, "check_only": false, "host": IF_HOST,
    })
    .to_string();
    let graph = oatest::graph::onnx::decode_model(&seed).unwrap().graph;
    let inputs = oatest::compiler::inputs::generate(&graph, 0).unwrap();
    let mut spec = WorkerSpec::new(TargetKind::Tvm).unwrap();
    spec.exe = std::path::PathBuf::from(env!("CARGO_BIN_EXE_oatest"));
    let mut w = Worker::start(spec).expect("TVM worker (run scripts/setup.sh)");
    let mut results = Vec::new();
    for level in [Level::Disable, Level::Basic, Level::Extended, Level::All] {
        let o = w.run(recipe.as_bytes(), &inputs, &Config::level(level));
        assert_eq!(o.status, Status::Ok, "{level:?}: {o:?}");
        let names: Vec<&str> = o.outputs.iter().map(|t| t.name.as_str()).collect();
        // the seed's output, the host function's result, the pattern's
        assert_eq!(names.len(), 3, "{level:?}: {names:?}");
        let host = o.outputs[1].tensor.to_f64s().unwrap();
        assert_eq!(host, vec![2.0; 16], "{level:?}: the If's then-branch, through the second function");
        results.push(o);
    }
    let fired = &results[3].passes_fired;
    assert!(fired.iter().any(|p| p == "FuseOps"), "the pattern's pass fires in the host: {fired:?}");
    let oracle = oatest::oracle::Oracle { tolerance: Default::default() };
    let j = oracle.judge(&results);
    assert!(j.valid && j.verdicts.is_empty(), "every level agrees with disable: {j:?}");
}

/// An error raised inside a pass is blamed on that pass, which never reports firing, with the passes that make
/// what it fails on as its enablers (before, the search named only the enabler FuseOps).
#[test]
fn an_error_is_blamed_on_the_pass_it_was_raised_in_and_its_enablers_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.onnx");
    std::fs::write(&file, chain(&["Relu", "Sigmoid", "Neg"], Some(("raise:FuseTIR", "FuseOps")))).unwrap();
    let out = dir.path().join("bug");
    let o = oatest_faulty(&["reduce", file.to_str().unwrap(), "--target", "tvm", "--out", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert_eq!(t["class"], "optimizer", "{bug}");
    let culprits: BTreeSet<&str> = t["culprits"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(culprits.contains("FuseTIR") && culprits.contains("FuseOps"), "{bug}");
    let enablers: Vec<&str> = t["enablers"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(enablers.contains(&"FuseOps") && !enablers.contains(&"FuseTIR"), "{bug}");
    assert!(t["detail"].as_str().unwrap().starts_with("[raised in FuseTIR] "), "{bug}");
}

/// An error raised in a pass cannot show with that pass left out, so a check makes no run without it: only the
/// report's row of the culprits disabled does (before, every check that held made one, a third of a reduction's
/// full builds). The enabler's runs stay.
#[test]
fn a_check_makes_no_run_without_the_pass_an_error_was_raised_in() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.onnx");
    std::fs::write(&file, chain(&["Relu", "Sigmoid", "Neg", "Abs"], Some(("raise:FuseTIR", "FuseOps")))).unwrap();
    let out = dir.path().join("bug");
    let o = faulty(&["reduce", file.to_str().unwrap(), "--target", "tvm", "--out", out.to_str().unwrap()])
        .env("OATEST_TRACE_RUNS", "1")
        .output()
        .expect("oatest runs");
    let stderr = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{stderr}");
    let runs: Vec<&str> = stderr.lines().filter(|l| l.starts_with("oatest: triage run: ")).collect();
    let without = |pass: &str| {
        let item = format!("-{pass}");
        runs.iter().filter(|l| l.split([':', ';', ',']).any(|i| i.trim() == item)).count()
    };
    let bug = json(&out.join("bug.json"));
    assert!(bug["triage"]["culprits"].to_string().contains("FuseTIR"), "{bug}");
    assert!(without("FuseOps") >= 2, "the enabler is checked: {runs:#?}");
    assert!(without("FuseTIR") <= 1, "only the report's run leaves the raising pass out: {runs:#?}");
}

/// One crash site is one entry: findings of the constant-LHS CombineParallelMatmul error in different models end
/// in one bugs/ entry blamed on CombineParallelMatmul, the pass it is raised in.
#[test]
fn the_constant_lhs_combine_parallel_matmul_error_is_one_entry_blamed_on_its_pass() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds");
    std::fs::create_dir(&seeds).unwrap();
    for (i, (n, relu)) in [(4, false), (3, true), (5, false)].into_iter().enumerate() {
        std::fs::write(seeds.join(format!("m{i}.onnx")), constant_lhs_matmuls(n, relu)).unwrap();
    }
    let out = dir.path().join("run");
    let o = oatest_faulty(&[
        "fuzz",
        "--target",
        "tvm",
        "--mode",
        "random",
        "--tests",
        "6",
        "--jobs",
        "1",
        "--seed",
        "3",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut entries = Vec::new();
    for class in std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()) {
        for e in std::fs::read_dir(&class).unwrap().map(|e| e.unwrap().path()) {
            if e.join("bug.json").is_file()
                && json(&e.join("bug.json"))["triage"]["detail"].to_string().contains("GenericConst")
            {
                entries.push(e);
            }
        }
    }
    assert_eq!(entries.len(), 1, "one entry for one crash site: {entries:?}");
    assert!(entries[0].parent().unwrap().ends_with("bugs"), "{:?}", entries[0]);
    let bug = json(&entries[0].join("bug.json"));
    let t = &bug["triage"];
    let enablers: Vec<&serde_json::Value> = t["enablers"].as_array().unwrap().iter().collect();
    let faulty: Vec<&str> = t["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| !enablers.contains(p))
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(faulty, ["CombineParallelMatmul"], "{bug}");
    assert!(bug["findings"].as_array().unwrap().len() >= 2, "findings of several models: {bug}");
}

/// Triage's fresh processes are forks of a zygote that only imported TVM (an import costs a CPU-second or two,
/// three times for each new entry): each has run nothing, and a crash in one is told by its wait status, which the
/// zygote reports, as a spawned worker's is.
#[test]
fn a_fresh_tvm_worker_is_a_fork_and_its_crash_is_told_by_its_wait_status() {
    use oatest::compiler::{Config, NamedTensor, Status};
    use oatest::graph::Tensor;
    std::env::set_var("OATEST_TVM_TEST_FAULTS", "1");
    let mut spec = WorkerSpec::new(TargetKind::Tvm).unwrap();
    spec.exe = env!("CARGO_BIN_EXE_oatest").into();
    spec.timeout = std::time::Duration::from_secs(120);
    let mut w = Worker::start(spec).expect("TVM worker (run scripts/setup.sh)");
    let spawned = w.pid().unwrap();
    w.fresh();
    let forked = w.pid().unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{forked}/stat")).unwrap();
    let parent: u32 = stat.rsplit(')').next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(forked != spawned && parent != std::process::id(), "forked by the zygote, not started by us");
    let inputs = [NamedTensor { name: "x".into(), tensor: Tensor::from_f32(&[2, 3], &[0.5; 6]) }];
    let all = Config::parse("all").unwrap();
    let good = chain(&["Relu", "Sigmoid"], None);
    assert_eq!(w.run(&good, &inputs, &all).status, Status::Ok);
    let o = w.run(&chain(&["Relu", "Sigmoid"], Some(("segfault", "FuseOps"))), &inputs, &all);
    assert!(matches!(o.status, Status::Crash { signal: Some(11), .. }), "{:?}", o.status);
    w.fresh();
    assert_eq!(w.run(&good, &inputs, &all).status, Status::Ok, "the next fresh worker serves");
}
