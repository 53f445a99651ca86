//! Targets in workers: crashes, aborts, hangs and memory blow-ups are detected, recorded and survived; ORT's
//! pass-call instrumentation and pass disabling work on ORT's own optimizer test models.
//!
//! The ORT tests need the onnxruntime wheel in .venv (scripts/setup.sh installs it); ORT's optimizer test
//! models are vendored in tests/data/ort-transform-testdata (MIT, see its NOTICE).

use oatest::compiler::worker::{Worker, WorkerSpec};
use oatest::compiler::{Config, Level, Status, TargetKind};
use oatest::graph::{onnx, Tensor};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn spec(kind: TargetKind) -> WorkerSpec {
    let mut s = WorkerSpec::new(kind).unwrap();
    s.exe = PathBuf::from(env!("CARGO_BIN_EXE_oatest"));
    s.timeout = Duration::from_millis(3000);
    s.mem_limit_mb = Some(1024);
    s
}

mod common;
use common::{fault_model as model, relu_inputs as inputs};

#[test]
fn every_kind_of_worker_death_is_an_outcome_and_the_next_test_runs() {
    let mut w = Worker::start(spec(TargetKind::Fault)).unwrap();
    let opt = Config::level(Level::All);
    let cases: [(&str, fn(&Status) -> bool); 5] = [
        ("segfault", |s| matches!(s, Status::Crash { signal: Some(11), .. })),
        ("abort", |s| matches!(s, Status::Crash { signal: Some(6), .. })),
        ("hang", |s| matches!(s, Status::Timeout { limit_ms: 3000 })),
        ("oom", |s| matches!(s, Status::Oom { .. })),
        ("exit", |s| matches!(s, Status::Crash { signal: None, .. })),
    ];
    for (i, (fault, expect)) in cases.iter().enumerate() {
        let o = w.run(&model(Some(fault)), &inputs(), &opt);
        assert!(expect(&o.status), "{fault}: got {:?}", o.status);
        // the unoptimized configuration of the same model, on the restarted worker, is fine
        let ok = w.run(&model(Some(fault)), &inputs(), &Config::level(Level::Disable));
        assert_eq!(ok.status, Status::Ok, "after {fault}");
        assert_eq!(ok.outputs, inputs());
        assert_eq!(w.starts, i as u64 + 2, "one restart per death");
    }
}

#[test]
fn a_worker_that_dies_while_idle_is_restarted_and_not_blamed_on_the_next_test() {
    let mut w = Worker::start(spec(TargetKind::Fault)).unwrap();
    let first = w.run(&model(Some("exit_later")), &inputs(), &Config::level(Level::Disable));
    assert_eq!(first.status, Status::Ok, "it answers before it dies");
    std::thread::sleep(Duration::from_millis(400));
    let next = w.run(&model(None), &inputs(), &Config::level(Level::Disable));
    assert_eq!(next.status, Status::Ok, "the next test's reference is not a crash");
    assert_eq!((w.idle_deaths, w.starts), (1, 2));
}

#[test]
fn oatest_run_reports_a_crash_as_an_outcome_and_exits_normally() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.onnx");
    std::fs::write(&path, model(Some("segfault"))).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["run", path.to_str().unwrap(), "--target", "fault", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["config"], "disable");
    assert_eq!(rows[0]["status"], "ok");
    assert_eq!(rows[1]["status"], "crash");
    assert!(rows[1]["message"].as_str().unwrap().contains("SIGSEGV"));
    for key in ["config", "status", "message", "passes_fired", "time_ms"] {
        assert!(rows[1].get(key).is_some(), "missing {key}");
    }
}

#[test]
fn tract_runs_decluttered_and_optimized() {
    let mut w = Worker::start(spec(TargetKind::Tract)).unwrap();
    for level in [Level::Disable, Level::All] {
        let o = w.run(&model(None), &inputs(), &Config::level(level));
        assert_eq!(o.status, Status::Ok);
        assert_eq!(o.outputs[0].tensor, Tensor::from_f32(&[2], &[1.0, 0.0]));
    }
    let o = w.run(&model(None), &inputs(), &Config::level(Level::Basic));
    assert!(matches!(o.status, Status::Error { .. }), "tract has no basic level");
}

fn corpus() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ort-transform-testdata");
    assert!(p.is_dir(), "{} is missing", p.display());
    p
}

fn ort_fired(w: &mut Worker, file: &str, config: &Config) -> Vec<String> {
    let path = corpus().join(file);
    let bytes = std::fs::read(&path).unwrap();
    let m = onnx::decode_model(&bytes).unwrap();
    let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
    let o = w.run(&bytes, &feeds, config);
    assert_eq!(o.status, Status::Ok, "{file} under {config}");
    o.passes_fired
}

fn ort_worker() -> Worker {
    Worker::start(spec(TargetKind::Ort)).expect("ORT worker (run scripts/setup.sh to install onnxruntime into .venv)")
}

#[test]
fn disabling_a_level1_rule_by_name_stops_it_firing() {
    let mut w = ort_worker();
    assert!(w.info.version.starts_with("1."), "{}", w.info.version);
    let mut c = Config::level(Level::Basic);
    c.attribute_rules = true;
    let fired = ort_fired(&mut w, "abs-id.onnx", &c);
    assert!(fired.contains(&"EliminateIdentity".to_string()), "{fired:?}");
    assert!(fired.contains(&"Level1_RuleBasedTransformer".to_string()), "{fired:?}");
    c.disabled = vec!["EliminateIdentity".into()];
    let fired = ort_fired(&mut w, "abs-id.onnx", &c);
    assert!(!fired.iter().any(|p| p == "EliminateIdentity" || p == "Level1_RuleBasedTransformer"), "{fired:?}");
}

#[test]
fn disabling_a_level2_transformer_by_name_stops_it_firing() {
    let mut w = ort_worker();
    let mut c = Config::level(Level::Extended);
    let fired = ort_fired(&mut w, "fusion/conv_relu.onnx", &c);
    assert!(fired.contains(&"ConvActivationFusion".to_string()), "{fired:?}");
    // a comma list is silently ignored by ORT; oatest always joins with ';'
    c.disabled = vec!["ConvActivationFusion".into(), "NchwcTransformer".into()];
    let fired = ort_fired(&mut w, "fusion/conv_relu.onnx", &c);
    assert!(!fired.contains(&"ConvActivationFusion".to_string()), "{fired:?}");
}

#[test]
fn across_ort_optimizer_tests_at_level_all_at_least_30_transformers_fire() {
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["run", corpus().to_str().unwrap(), "--target", "ort", "--config", "all", "--json", "--jobs", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut fired = std::collections::BTreeSet::new();
    let mut rows = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        rows += 1;
        for p in v["passes_fired"].as_array().unwrap() {
            fired.insert(p.as_str().unwrap().to_string());
        }
    }
    assert!(rows >= 440, "only {rows} models ran");
    assert!(fired.len() >= 30, "only {} transformers fired: {fired:?}", fired.len());
}

/// An opt-in configuration (`all+gelu_approx`, a named configuration of data/ort-configs.toml) fires
/// GeluApproximation on ORT's own approximation test model, which `all` alone does not; the oracle allows the
/// approximation's error under it (and only under it).
#[test]
fn an_opt_in_configuration_fires_gelu_approximation() {
    let mut w = ort_worker();
    let all = Config::parse("all").unwrap();
    let approx = Config::parse("all+gelu_approx").unwrap();
    assert_eq!(approx.to_string(), "all+gelu_approx");
    assert!(!ort_fired(&mut w, "approximation/gelu.onnx", &all).iter().any(|p| p == "GeluApproximation"));
    assert!(ort_fired(&mut w, "approximation/gelu.onnx", &approx).iter().any(|p| p == "GeluApproximation"));
    let bytes = std::fs::read(corpus().join("approximation/gelu.onnx")).unwrap();
    let m = onnx::decode_model(&bytes).unwrap();
    let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
    let runs = w.run_configs(&bytes, &feeds, &[Config::level(Level::Disable), approx]);
    let oracle = oatest::oracle::Oracle { tolerance: oatest::oracle::Tolerance::default() };
    assert!(oracle.judge(&runs).verdicts.is_empty(), "{:?}", oracle.judge(&runs).verdicts);
    // the same outputs judged as a plain `all` run: the approximation is beyond float32's default tolerance
    let mut plain = runs[1].clone();
    plain.config = all;
    assert!(oracle.inconsistency(&runs[0], &plain).is_some(), "FastGelu should differ from Gelu beyond 1e-5");
}

/// Seeds with ONNX Runtime's contrib ops (`oatest seeds gen --contrib`) declare the com.microsoft opset and run
/// cleanly under ORT at every level, with the same results as the unoptimized run.
#[test]
fn contrib_op_seeds_run_under_ort_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["seeds", "gen", "--count", "150", "--seed", "3", "--contrib", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut w = ort_worker();
    let configs: Vec<Config> =
        [Level::Disable, Level::Basic, Level::Extended, Level::Layout, Level::All].map(Config::level).to_vec();
    let oracle = oatest::oracle::Oracle { tolerance: oatest::oracle::Tolerance::default() };
    let mut ops = std::collections::BTreeSet::new();
    for f in oatest::util::onnx_files(dir.path()).unwrap() {
        let bytes = std::fs::read(&f).unwrap();
        let m = onnx::decode_model(&bytes).unwrap();
        let contrib: Vec<String> = m
            .graph
            .node_ids()
            .map(|id| m.graph.node(id).op.clone())
            .filter(|op| op.domain == "com.microsoft")
            .map(|op| op.name)
            .collect();
        if contrib.is_empty() {
            continue;
        }
        assert_eq!(m.opsets.get("com.microsoft"), Some(&1), "{}: no com.microsoft import", f.display());
        let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
        let runs = w.run_configs(&bytes, &feeds, &configs);
        for o in &runs {
            assert_eq!(o.status, Status::Ok, "{} ({contrib:?}) under {}", f.display(), o.config);
        }
        let j = oracle.judge(&runs);
        assert!(j.valid, "{}: {:?}", f.display(), j.invalid_reason);
        ops.extend(contrib);
    }
    assert!(ops.len() >= 6, "only {ops:?} appeared in 150 seeds");
}
