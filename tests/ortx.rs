//! The ort-transformers target (onnxruntime.transformers' Python optimizer) end to end, on the hand-built models
//! of tests/data/ort-transformers (a Gelu in erf form and a spelled-out layer normalization; make.py builds
//! them). Faults are injected only under OATEST_ORTX_TEST_FAULTS=1, from the model's metadata: `raise:<pass>`
//! (an exception inside that fusion) and `break:<pass>` (the fusion leaves a model onnx.checker refuses).

mod common;
use common::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ort-transformers").join(name)
}

fn oatest_faulty(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(args)
        .env("OATEST_ORTX_TEST_FAULTS", "1")
        .output()
        .expect("oatest runs")
}

fn rows(o: &Output) -> Vec<serde_json::Value> {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn strings(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
}

#[test]
fn a_fusion_fires_and_a_configuration_disables_it() {
    let model = data("gelu_layernorm.onnx");
    let args = ["run", model.to_str().unwrap(), "--target", "ort-transformers", "--json", "--judge", "--jobs", "1"];
    let configs = ["--config", "disable", "--config", "basic", "--config", "basic:-FusionGelu", "--config", "all"];
    let rows = rows(&oatest_faulty(&[&args[..], &configs[..]].concat()));
    let by = |c: &str| rows.iter().find(|r| r["config"] == c).unwrap_or_else(|| panic!("no {c}: {rows:?}"));
    for c in ["disable", "basic", "basic:-FusionGelu", "all"] {
        assert_eq!(by(c)["status"], "ok", "{}", by(c));
    }
    assert!(strings(&by("disable")["passes_fired"]).is_empty(), "the reference runs no optimizer");
    let fired = strings(&by("basic")["passes_fired"]);
    assert!(fired.contains("FusionGelu") && fired.contains("FusionLayerNormalization"), "{fired:?}");
    let without = strings(&by("basic:-FusionGelu")["passes_fired"]);
    assert!(!without.contains("FusionGelu") && without.contains("FusionLayerNormalization"), "{without:?}");
    let verdict = rows.last().unwrap();
    assert!(verdict["judgement"]["verdicts"].as_array().unwrap().is_empty(), "fusions keep the results: {verdict}");
}

#[test]
fn the_checker_blames_no_fusion_for_a_model_it_refused_before_optimizing() {
    // the default domain spelled `ai.onnx`: ORT runs it, onnx.checker refuses it before any fusion ran
    let model = data("gelu_layernorm_ai_onnx.onnx");
    let args = ["run", model.to_str().unwrap(), "--target", "ort-transformers", "--json", "--judge", "--jobs", "1"];
    let rows = rows(&oatest_faulty(&[&args[..], &["--config", "disable", "--config", "basic"][..]].concat()));
    let basic = rows.iter().find(|r| r["config"] == "basic").unwrap_or_else(|| panic!("no basic: {rows:?}"));
    assert_eq!(basic["status"], "ok", "{basic}");
    assert!(strings(&basic["passes_fired"]).contains("FusionGelu"), "{basic}");
    let verdict = rows.last().unwrap();
    assert!(verdict["judgement"]["verdicts"].as_array().unwrap().is_empty(), "no finding: {verdict}");
}

/// `oatest reduce` on a faulty model: the bug directory's bug.json, and repro.py's exit status and output.
fn reduce(model: &str, out: &Path) -> (serde_json::Value, Option<i32>, String) {
    let o = oatest_faulty(&[
        "reduce",
        data(model).to_str().unwrap(),
        "--target",
        "ort-transformers",
        "--max-checks",
        "8",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let r = Command::new(python)
        .arg(out.join("repro.py"))
        .current_dir(out)
        .env("OATEST_ORTX_TEST_FAULTS", "1")
        .output()
        .expect("python runs");
    let said = format!("{}{}", String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
    (json(&out.join("bug.json")), r.status.code(), said)
}

#[test]
fn an_exception_inside_a_fusion_is_a_crash_whose_culprit_delta_debugging_finds() {
    let dir = tempfile::tempdir().unwrap();
    let (bug, code, said) = reduce("gelu_layernorm_raise_in_gelu.onnx", &dir.path().join("bug"));
    assert_eq!(bug["symptom"], "crash", "{bug}");
    let t = &bug["triage"];
    // two fusions fired (and about twenty passes ran): delta debugging singles out the one that raised
    assert_eq!(strings(&t["culprits"]), BTreeSet::from(["FusionGelu".to_string()]), "{t}");
    let detail = t["detail"].as_str().unwrap();
    assert!(
        detail.contains("RuntimeError in oatest_ortx.py:_inject"),
        "the exception type and innermost frame: {detail}"
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("REPRODUCED: crash"), "{said}");
    let report = std::fs::read_to_string(dir.path().join("bug/report.md")).unwrap();
    assert!(report.contains("options.enable_gelu = False"), "the culprit's FusionOptions switch: {report}");
}

#[test]
fn an_optimized_model_the_checker_refuses_is_an_error_of_its_fusion() {
    let dir = tempfile::tempdir().unwrap();
    let (bug, code, said) = reduce("gelu_layernorm_break_in_layernorm.onnx", &dir.path().join("bug"));
    assert_eq!(bug["symptom"], "error", "{bug}");
    let t = &bug["triage"];
    assert_eq!(strings(&t["culprits"]), BTreeSet::from(["FusionLayerNormalization".to_string()]), "{t}");
    assert!(t["detail"].as_str().unwrap().contains("onnx.checker refuses the optimized model"), "{t}");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("REPRODUCED: error"), "{said}");
}

#[test]
fn a_clean_up_called_by_another_is_the_culprit_not_its_caller() {
    // postprocess -> prune_graph -> remove_unused_constant deletes a Constant read only as a graph output
    let dir = tempfile::tempdir().unwrap();
    let (bug, code, said) = reduce("constant_output.onnx", &dir.path().join("bug"));
    assert_eq!(bug["symptom"], "error", "{bug}");
    let t = &bug["triage"];
    assert_eq!(strings(&t["culprits"]), BTreeSet::from(["remove_unused_constant".to_string()]), "{t}");
    assert_eq!(code, Some(1), "{said}");
}

#[test]
fn a_campaign_files_an_injected_fusion_crash_with_its_culprit_and_rotates_model_types() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds");
    std::fs::create_dir(&seeds).unwrap();
    std::fs::copy(data("gelu_layernorm_raise_in_gelu.onnx"), seeds.join("m.onnx")).unwrap();
    let out = dir.path().join("run");
    let o = oatest_faulty(&[
        "fuzz",
        "--target",
        "ort-transformers",
        "--mode",
        "random",
        "--tests",
        "14",
        "--seed",
        "3",
        "--jobs",
        "1",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let entries: Vec<serde_json::Value> = std::fs::read_dir(out.join("bugs"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bug.json"))
        .filter(|p| p.exists())
        .map(|p| json(&p))
        .collect();
    let crash = entries
        .iter()
        .find(|b| b["symptom"] == "crash" && b["triage"]["detail"].as_str().unwrap_or("").contains("injected fault"))
        .unwrap_or_else(|| panic!("no entry of the injected crash: {entries:?}"));
    assert_eq!(strings(&crash["triage"]["culprits"]), BTreeSet::from(["FusionGelu".to_string()]), "{crash}");
    // every test's model names its model type, rotating by test id
    let types: BTreeSet<String> = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| oatest::graph::onnx::load(&e.path().join("model.onnx")).ok())
        .filter_map(|m| m.metadata.iter().find(|(k, _)| k == "oatest.model_type").map(|(_, v)| v.clone()))
        .collect();
    assert!(types.len() >= 2, "findings of several model types: {types:?}");
}

#[test]
fn patterns_cut_from_a_whole_model_keep_its_settings_and_fire_their_fusions_spliced_into_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    std::fs::create_dir(&lib).unwrap();
    // a whole model as ORT's transformers tests hand one to optimize_model, with the settings it was optimized with
    let mut m = oatest::graph::onnx::load(&data("gelu_layernorm.onnx")).unwrap();
    m.metadata.push(("oatest.model_type".into(), "bert".into()));
    std::fs::write(lib.join("m.onnx"), oatest::graph::onnx::encode_model(&m)).unwrap();
    let extract = ["extract", "ort-transformers", "--models", lib.to_str().unwrap(), "--out", lib.to_str().unwrap()];
    let o = oatest_faulty(&[&extract[..], &["--jobs", "1"][..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cut: Vec<oatest::pattern::Pattern> = ["FusionGelu", "FusionLayerNormalization"]
        .iter()
        .flat_map(|p| std::fs::read_dir(lib.join(p)).unwrap_or_else(|e| panic!("no {p} patterns: {e}")))
        .map(|e| oatest::pattern::Pattern::load(&e.unwrap().path()).unwrap())
        .collect();
    assert!(cut.len() >= 2, "{} patterns", cut.len());
    for p in &cut {
        assert_eq!(p.meta.compiler, "ort-transformers");
        assert!(p.model.metadata.contains(&("oatest.model_type".into(), "bert".into())), "{:?}", p.model.metadata);
    }
    assert!(lib.join("m.onnx").exists(), "the whole model stays");
    // another compiler's pattern is a model like any; one naming no model type is optimized, and marked, as bert
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mut q = cut[0].clone();
    (q.meta.compiler, q.model.metadata) = ("ort".into(), Vec::new());
    std::fs::write(other.join("q.onnx"), q.encode().unwrap()).unwrap();
    let again = ["extract", "ort-transformers", "--models", other.to_str().unwrap(), "--out", other.to_str().unwrap()];
    let o = oatest_faulty(&[&again[..], &["--jobs", "1"][..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let recut = oatest::pattern::load_library(&other, "ort-transformers").unwrap().0;
    assert!(recut.iter().any(|p| p.meta.pass == cut[0].meta.pass), "{:?}", recut.iter().map(|p| &p.meta.pass));
    for p in &recut {
        assert!(p.model.metadata.contains(&("oatest.model_type".into(), "bert".into())), "{:?}", p.model.metadata);
    }
    let out = dir.path().join("run");
    let fuzz = ["fuzz", "--target", "ort-transformers", "--patterns", lib.to_str().unwrap(), "--tests", "30"];
    let o = oatest_faulty(&[&fuzz[..], &["--seed", "3", "--jobs", "1", "--out", out.to_str().unwrap()][..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats = json(&out.join("stats.json"));
    for pass in ["FusionGelu", "FusionLayerNormalization"] {
        let t = &stats["trigger_by_pass"][pass];
        assert!(t[1].as_u64().unwrap() > 0, "spliced {pass} tests fire it: {t}");
        assert!(stats["synth_passes_fired"][pass].as_u64().unwrap() > 0, "{}", stats["synth_passes_fired"]);
    }
}
