//! The fuzz campaign end to end: findings on disk that replay, statistics, resume after kill -9, clean stop on
//! SIGINT. Uses the test-only `fault` target (crash, hang, wrong and noisy models) and tract.

mod common;
use common::{fault_model, json, oatest};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn seeds_dir(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for f in ["segfault", "wrong", "noisy", "hang"] {
        std::fs::write(dir.join(format!("{f}.onnx")), fault_model(Some(f))).unwrap();
    }
    std::fs::write(dir.join("fine.onnx"), fault_model(None)).unwrap();
}

fn assert_stats_consistent(s: &serde_json::Value) {
    for key in [
        "tests_generated",
        "tests_valid",
        "tests_executed",
        "validity_rate",
        "tests_per_sec",
        "gen_time_share",
        "passes_fired",
        "trigger_rate",
        "findings_raw",
        "findings_unique",
        "by_symptom",
        "elapsed_sec",
        "triage_finish_sec",
    ] {
        assert!(s.get(key).is_some(), "stats.json lacks {key}");
    }
    let f = |k: &str| s[k].as_f64().unwrap();
    assert!((f("validity_rate") - f("tests_valid") / f("tests_executed")).abs() < 1e-9);
    // the rate is over the testing time: finishing triage after the last test is not part of it
    let testing = f("elapsed_sec") - f("triage_finish_sec");
    assert!((0.0..=f("elapsed_sec")).contains(&testing));
    assert!((f("tests_per_sec") - f("tests_executed") / testing).abs() < 1e-6 * f("tests_per_sec").max(1.0));
    let by: f64 = s["by_symptom"].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
    assert_eq!(by, f("findings_raw"));
    assert!(f("findings_unique") <= f("findings_raw"));
    // deduplication at the source loses nothing: every raw finding is written or counted under its key
    let keys: f64 = s["keys"].as_object().unwrap().values().map(|k| k["count"].as_f64().unwrap()).sum();
    assert_eq!(keys, f("findings_raw"), "the keys' counts sum to the raw findings");
    assert_eq!(f("findings_written") + f("findings_counted"), f("findings_raw"));
    assert!(f("tests_generated") >= f("tests_executed"));
    assert!((0.0..=1.0).contains(&f("gen_time_share")));
}

#[test]
fn a_campaign_files_each_symptom_and_its_findings_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    seeds_dir(&seeds);
    let o = oatest(&[
        "fuzz",
        "--target",
        "fault",
        "--tests",
        "60",
        "--seed",
        "3",
        "--jobs",
        "2",
        "--timeout-ms",
        "500",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    assert_eq!(s["tests_executed"], 60);
    for sym in ["crash", "hang", "inconsistency"] {
        assert!(s["by_symptom"][sym].as_u64().unwrap() > 0, "no {sym}: {s}");
    }
    assert_eq!(s["by_symptom"]["error"], 0);
    assert_eq!(s["findings_unique"], 3, "one bug per symptom: {}", s["signatures"]);
    assert!(s["nondeterministic"].as_u64().unwrap() > 0, "noisy models must be recognized as nondeterministic");
    // ... and kept, never dropped: flaky/<id>/ with every run's outputs and why the verdict fell
    let kept: Vec<_> = std::fs::read_dir(out.join("flaky")).unwrap().map(|e| e.unwrap().path()).collect();
    let fell = s["nondeterministic"].as_u64().unwrap() + s["flaky"].as_u64().unwrap();
    assert_eq!(kept.len() as u64, fell, "one flaky/ directory per unconfirmed inconsistency");
    let metas: Vec<serde_json::Value> = kept.iter().map(|d| json(&d.join("meta.json"))).collect();
    assert!(metas.iter().any(|m| m["unconfirmed"][0]["why"] == "nondeterministic"), "{metas:?}");
    for m in &metas {
        assert!(["nondeterministic", "flaky"].contains(&m["unconfirmed"][0]["why"].as_str().unwrap()), "{m}");
        assert_eq!(m["unconfirmed"][0]["verdict"]["symptom"], "inconsistency", "{m}");
    }
    let runs = json(&kept[0].join("outcome.json"));
    assert!(runs.as_array().unwrap().len() >= 3, "first runs and re-runs: {runs}");
    assert!(kept[0].join("run2_output_0.pb").exists() && kept[0].join("model.onnx").exists());
    assert!(s["passes_fired"]["FaultPass"].as_u64().unwrap() > 0);
    assert!(out.join("throughput.svg").exists() && out.join("passes.svg").exists());

    let mut replayed = 0;
    for e in std::fs::read_dir(out.join("findings")).unwrap() {
        let d = e.unwrap().path();
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        assert!(!name.starts_with(".tmp"), "a temporary directory was left: {name}");
        for f in ["model.onnx", "input_0.pb", "outcome.json", "meta.json"] {
            assert!(d.join(f).exists(), "{name} lacks {f}");
        }
        let meta = json(&d.join("meta.json"));
        assert_eq!(meta["campaign_seed"], 3);
        let symptom = meta["symptom"].as_str().unwrap().to_string();
        if symptom == "hang" {
            continue; // replaying a hang waits for the timeout; crash and inconsistency replay below
        }
        let r = oatest(&[
            "run",
            d.join("model.onnx").to_str().unwrap(),
            "--target",
            "fault",
            "--inputs",
            d.to_str().unwrap(),
            "--judge",
            "--json",
            "--jobs",
            "1",
        ]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let last = String::from_utf8_lossy(&r.stdout).lines().last().unwrap().to_string();
        let j: serde_json::Value = serde_json::from_str(&last).unwrap();
        let got: Vec<&str> =
            j["judgement"]["verdicts"].as_array().unwrap().iter().map(|v| v["symptom"].as_str().unwrap()).collect();
        assert!(got.contains(&symptom.as_str()), "{name}: replay gave {got:?}");
        replayed += 1;
    }
    assert!(replayed >= 2);

    // triage ran during the campaign: every first finding of a signature has triage.json (the fault target's
    // plain faults ignore pass switches, so delta debugging must say "unresolved", never invent culprits)
    let t = oatest(&["triage", out.to_str().unwrap(), "--timeout-ms", "300"]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    for e in std::fs::read_dir(out.join("findings")).unwrap() {
        let d = e.unwrap().path();
        let t = json(&d.join("triage.json"));
        // the first of a signature is triaged in full, the others attached to its entry
        assert!(t["triage"]["method"] == "unresolved" || t["triage"]["method"] == "attached", "{t}");
        // no pass explains a plain fault (and the echoing target is wrong on both sides for onnx.reference)
        assert!(t["triage"]["class"] == "unattributed" || t["triage"]["class"] == "undecided", "{t}");
        assert!(!t["bug_dir"].as_str().unwrap().contains("/bugs/"), "not filed as an optimizer bug: {t}");
        assert!(t["triage"]["culprits"].as_array().unwrap().is_empty());
        assert!(Path::new(t["bug_dir"].as_str().unwrap()).join("report.md").exists());
    }
    let s = json(&out.join("stats.json"));
    assert!(s["findings_triaged"].as_u64().unwrap() >= 3, "the first finding of each symptom is triaged: {s}");

    // without --timeout-ms, triage takes the campaign's own limit (500 ms), not the default
    let t = oatest(&["triage", out.to_str().unwrap(), "--again"]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    for e in std::fs::read_dir(out.join("findings")).unwrap() {
        let t = json(&e.unwrap().path().join("triage.json"));
        assert_eq!(t["triage"]["timeout_ms"], 500, "{t}");
    }
}

fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn next_id(out: &Path) -> u64 {
    std::fs::read_to_string(out.join("checkpoint.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["next_id"].as_u64())
        .unwrap_or(0)
}

#[test]
fn a_campaign_killed_with_sigkill_resumes_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["fuzz", "--target", "fault", "--tests", "100000000", "--seed", "5", "--jobs", "2", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(|| next_id(&out) > 0, "a first checkpoint");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let k = next_id(&out);
    let cp = json(&out.join("checkpoint.json"));
    assert_eq!(cp["stats"]["tests_executed"].as_u64().unwrap(), k, "stats cover exactly the tests below next_id");
    assert_stats_consistent(&json(&out.join("stats.json")));

    let total = k + 300;
    let o = oatest(&["fuzz", "--resume", out.to_str().unwrap(), "--tests", &total.to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&out.join("stats.json"));
    assert_eq!(s["tests_executed"].as_u64().unwrap(), total);
    assert_eq!(next_id(&out), total);
    assert_eq!(s["seed"], 5, "the resumed campaign keeps its settings");
    assert_stats_consistent(&s);
}

#[test]
fn sigint_stops_a_campaign_cleanly_with_final_stats() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["fuzz", "--target", "fault", "--minutes", "10", "--seed", "2", "--jobs", "2", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(|| next_id(&out) > 0, "a first checkpoint");
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("campaign interrupted"));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    assert!(s["elapsed_sec"].as_f64().unwrap() < 60.0);
    assert_eq!(s["findings_raw"], 0, "stopping must not turn into crash findings");
}

#[test]
fn a_tract_campaign_needs_nothing_installed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = oatest(&[
        "fuzz",
        "--target",
        "tract",
        "--tests",
        "150",
        "--seed",
        "1",
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    assert_eq!(s["tests_executed"], 150);
    assert_eq!(s["target"], "tract");
}

#[test]
fn bad_flags_are_refused_before_anything_runs() {
    let o = oatest(&["fuzz", "--target", "ort", "--tests", "5", "--patterns", "/nonexistent/patterns"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--patterns /nonexistent/patterns is not a directory"));
    let o = oatest(&["fuzz", "--tests", "5", "--minutes", "1"]);
    assert_eq!(o.status.code(), Some(2), "--tests and --minutes conflict");
    let o = oatest(&["fuzz", "--resume", "/nonexistent/run"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("checkpoint.json"));
}

#[test]
fn an_ort_campaign_synthesizes_from_the_committed_patterns_and_triggers_their_passes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = oatest(&[
        "fuzz",
        "--target",
        "ort",
        "--tests",
        "300",
        "--seed",
        "1",
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("synthesizing from them"));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    let trigger = s["trigger_rate"].as_f64().expect("synthesized tests carry a target pass");
    assert!(trigger >= 0.9, "trigger_rate {trigger}");
    assert!(s["validity_rate"].as_f64().unwrap() >= 0.98, "{}", s["validity_rate"]);
    assert!(s["trigger_by_pass"].as_object().unwrap().len() >= 10);
    // the seed-only baseline carries no target pass
    let base = dir.path().join("base");
    let o = oatest(&[
        "fuzz",
        "--target",
        "ort",
        "--tests",
        "100",
        "--seed",
        "1",
        "--mode",
        "random",
        "--out",
        base.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(json(&base.join("stats.json"))["trigger_rate"].is_null());
}

/// With every test rotated (`--rotate-every 1`), the free-dimension configuration comes in turn: its tests run
/// with their input dims freed to the overrides' names, and FreeDimensionOverrideTransformer fires.
#[test]
fn a_rotated_campaign_fires_free_dimension_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = oatest(&[
        "fuzz",
        "--target",
        "ort",
        "--tests",
        "120",
        "--seed",
        "5",
        "--jobs",
        "1",
        "--mode",
        "random",
        "--rotate-every",
        "1",
        "--no-triage",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    assert!(s["validity_rate"].as_f64().unwrap() >= 0.98, "{}", s["validity_rate"]);
    let fired = s["passes_fired"]["FreeDimensionOverrideTransformer"].as_u64().unwrap_or(0);
    assert!(fired > 0, "{}", s["passes_fired"]);
}

/// DQMatMulNBitsFusion is opt-in (`all+dq_matmulnbits`). Its patterns, from the transcription of ORT's
/// DQMatMulNBitsFusionTest graphs (opset 21, a blocked uint4 DequantizeLinear), ask for that configuration in their
/// metadata (`oatest.config`): extraction kept it, the tests spliced from them carry it, and a campaign runs it on
/// each of them besides `all`, where the pass never runs.
#[test]
fn tests_of_an_opt_in_pass_run_the_configuration_their_pattern_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, out) = (dir.path().join("lib/DQMatMulNBitsFusion"), dir.path().join("run"));
    std::fs::create_dir_all(&lib).unwrap();
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("patterns/ort/DQMatMulNBitsFusion");
    for f in oatest::util::onnx_files(&own).unwrap() {
        let p = oatest::pattern::Pattern::load(&f).unwrap();
        assert_eq!(oatest::compiler::named::asked_name(&p.model.metadata).as_deref(), Some("dq_matmulnbits"));
        std::fs::copy(&f, lib.join(f.file_name().unwrap())).unwrap();
    }
    let (l, o) = (dir.path().join("lib"), out.to_str().unwrap());
    let args = ["fuzz", "--target", "ort", "--patterns", l.to_str().unwrap(), "--tests", "40", "--seed", "3"];
    let run = oatest(&[&args[..], &["--jobs", "1", "--rotate-every", "0", "--no-triage", "--out", o]].concat());
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    assert_eq!(s["validity_rate"].as_f64(), Some(1.0), "{}", s["invalid_examples"]);
    let [tests, fired] = [0, 1].map(|i| s["trigger_by_pass"]["DQMatMulNBitsFusion"][i].as_u64().unwrap());
    assert_eq!(tests, 40);
    assert!(fired >= 36, "DQMatMulNBitsFusion fired in {fired} of 40 tests");
}

#[test]
fn oatest_synth_splices_one_pattern_into_one_seed() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds");
    assert!(oatest(&["seeds", "gen", "--count", "1", "--seed", "4", "--out", seeds.to_str().unwrap()])
        .status
        .success());
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("patterns/ort/ConvActivationFusion");
    let pattern = std::fs::read_dir(&lib).unwrap().next().unwrap().unwrap().path();
    let out = dir.path().join("s.onnx");
    let o = oatest(&[
        "synth",
        "--pattern",
        pattern.to_str().unwrap(),
        "--seed-graph",
        seeds.join("seed_00000.onnx").to_str().unwrap(),
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("spliced ConvActivationFusion"));
    assert!(oatest(&["check", "--allow-unknown", out.to_str().unwrap()]).status.success());
}

#[test]
fn two_targets_are_compared_with_each_other() {
    // tract computes Relu; the fault target echoes its input: their references differ on negative inputs
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    std::fs::create_dir_all(&seeds).unwrap();
    std::fs::write(seeds.join("relu.onnx"), fault_model(None)).unwrap();
    let o = oatest(&[
        "fuzz",
        "--target",
        "tract,fault",
        "--tests",
        "20",
        "--seed",
        "2",
        "--jobs",
        "1",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    assert_eq!(s["target"], "tract,fault");
    assert!(s["by_symptom"]["inconsistency"].as_u64().unwrap() > 0, "{s}");
    let cross = std::fs::read_dir(out.join("findings")).unwrap().any(|e| {
        let meta = json(&e.unwrap().path().join("meta.json"));
        meta["verdicts"].as_array().unwrap().iter().any(|v| v["config"] == "tract~fault")
    });
    assert!(cross, "a cross-target verdict names both targets");
}

#[test]
fn a_crash_that_does_not_come_back_is_kept_as_flaky_not_filed() {
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    std::fs::create_dir_all(&seeds).unwrap();
    let marker = dir.path().join("crashed-once");
    let mut m = oatest::graph::onnx::decode_model(&fault_model(Some("crash_once"))).unwrap();
    m.metadata.push(("oatest.fault.marker".into(), marker.to_str().unwrap().into()));
    std::fs::write(seeds.join("once.onnx"), oatest::graph::onnx::encode_model(&m)).unwrap();
    let o = oatest(&[
        "fuzz",
        "--target",
        "fault",
        "--tests",
        "2",
        "--seed",
        "1",
        "--jobs",
        "1",
        "--no-triage",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(marker.exists(), "the model crashed once");
    let s = json(&out.join("stats.json"));
    assert_eq!(s["findings_raw"], 0, "one crash in three runs is not a finding: {s}");
    let meta = json(&out.join("flaky/00000001/meta.json"));
    assert_eq!(meta["unconfirmed"][0]["verdict"]["symptom"], "crash", "{meta}");
    assert_eq!(meta["unconfirmed"][0]["why"], "flaky", "{meta}");
}

/// Test ids in a run's findings/ (names `<id>-<symptom>`).
fn finding_ids(run: &Path) -> Vec<u64> {
    let mut ids: Vec<u64> = std::fs::read_dir(run.join("findings"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.split('-').next()?.parse().ok()).collect())
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

#[test]
fn shards_run_disjoint_slices_resume_as_shards_and_merge_into_the_unsharded_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    // every finding written: each shard keeps its own exemplars per key, the whole campaign its own
    let campaign =
        ["fuzz", "--target", "tract", "--mode", "random", "--seed", "1", "--jobs", "1", "--no-triage", "--keep-all"];
    let run = |extra: &[&str]| {
        let o = oatest(&[&campaign[..], extra].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&["--tests", "100", "--out", &p("whole")]);
    run(&["--tests", "100", "--shard", "0/2", "--out", &p("s0")]);
    run(&["--tests", "60", "--shard", "1/2", "--out", &p("s1")]);
    let cp = json(&dir.path().join("s1/checkpoint.json"));
    assert_eq!(cp["settings"]["shard"], serde_json::json!({"index": 1, "count": 2}));
    assert_eq!(cp["stats"]["tests_executed"], 30, "--tests counts the whole campaign: the odd ids below 60");
    // a resumed shard stays the same shard, and goes on with its own ids
    let o = oatest(&["fuzz", "--resume", &p("s1"), "--shard", "0/2"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("is shard 1/2"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = oatest(&["fuzz", "--resume", &p("s1"), "--tests", "100"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&dir.path().join("s1/stats.json"))["tests_executed"], 50);
    let (whole, s0, s1) = (
        finding_ids(&dir.path().join("whole")),
        finding_ids(&dir.path().join("s0")),
        finding_ids(&dir.path().join("s1")),
    );
    assert!(!whole.is_empty(), "seed 1 finds something in 100 tract tests");
    assert!(s0.iter().all(|i| i % 2 == 0) && s1.iter().all(|i| i % 2 == 1), "{s0:?} {s1:?}");
    let o = oatest(&["merge", &p("s0"), &p("s1"), "--out", &p("merged")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(finding_ids(&dir.path().join("merged")), whole, "the shards found what the whole campaign found");
    let (m, w) = (json(&dir.path().join("merged/stats.json")), json(&dir.path().join("whole/stats.json")));
    for k in ["tests_executed", "tests_valid", "findings_raw", "signatures", "passes_fired", "invalid_reasons"] {
        assert_eq!(m[k], w[k], "{k}");
    }
    assert_eq!(m["shards"].as_array().unwrap().len(), 2);
    // a run of another campaign is refused, naming it
    let o = oatest(
        &["fuzz", "--target", "tract", "--mode", "random", "--seed", "2", "--tests", "10", "--shard", "1/2"]
            .into_iter()
            .chain(["--jobs", "1", "--no-triage", "--out", &p("other")])
            .collect::<Vec<_>>(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = oatest(&["merge", &p("s0"), &p("other"), "--out", &p("m2")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("other") && e.contains("seed"), "{e}");
}

/// A reference that is not bit-for-bit deterministic (it varies by a few 1e-7 from run to run, as parallel
/// reductions do) does not hide a wrong optimized result far beyond that spread: the finding stands, is
/// triaged to its culprit, and says why; a model whose runs vary wildly everywhere stays under flaky/.
#[test]
fn a_wrong_result_far_beyond_a_noisy_references_spread_is_a_finding() {
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    std::fs::create_dir_all(&seeds).unwrap();
    let noisy_wrong = common::chain_model(&["Relu", "Sigmoid"], &[4, 6], Some(("noisy_wrong", "FuseSigmoid")));
    std::fs::write(seeds.join("noisy_wrong.onnx"), noisy_wrong).unwrap();
    std::fs::write(seeds.join("noisy.onnx"), fault_model(Some("noisy"))).unwrap();
    common::fuzz_fault_seeds(&seeds, &out, 8);
    let s = json(&out.join("stats.json"));
    assert!(s["nondeterministic"].as_u64().unwrap() > 0, "the wildly noisy model stays nondeterministic: {s}");
    let findings: Vec<_> = std::fs::read_dir(out.join("findings")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!findings.is_empty(), "{s}");
    for f in &findings {
        let outcome = std::fs::read_to_string(f.join("meta.json")).unwrap();
        assert!(outcome.contains("the reference is nondeterministic"), "{outcome}");
    }
    let bugs: Vec<_> =
        std::fs::read_dir(out.join("bugs")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    assert_eq!(bugs.len(), 1, "{bugs:?}");
    let bug = json(&bugs[0].join("bug.json"));
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["FuseSigmoid"]), "{bug}");
}

/// Deduplication at the source: a key's first findings are written, the rest counted and logged, the counts sum
/// to the raw findings; an error of a key and key passes already triaged joins that entry without a run, and the
/// entry counts every finding, the counted ones too.
#[test]
fn findings_beyond_a_keys_exemplars_are_counted_and_errors_of_one_key_join_without_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    std::fs::create_dir_all(&seeds).unwrap();
    std::fs::write(seeds.join("error.onnx"), fault_model(Some("error"))).unwrap();
    let o = oatest(&[
        "fuzz",
        "--target",
        "fault",
        "--tests",
        "30",
        "--seed",
        "4",
        "--jobs",
        "1",
        "--exemplars",
        "3",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = json(&out.join("stats.json"));
    assert_stats_consistent(&s);
    let raw = s["findings_raw"].as_u64().unwrap();
    assert!(raw >= 10, "half the tests are made from the seed file: {s}");
    assert_eq!(s["findings_written"], 3, "{s}");
    let counted = std::fs::read_to_string(out.join("findings/counted.tsv")).unwrap();
    assert_eq!(counted.lines().count() as u64, raw - 3, "{counted}");
    let ways: Vec<String> = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("triage.json")).ok())
        .collect();
    assert_eq!(ways.len(), 3);
    assert_eq!(ways.iter().filter(|t| t.contains("without a run")).count(), 2, "{ways:?}");
    let index = std::fs::read_to_string(out.join("bugs/README.md")).unwrap();
    assert!(index.contains(&format!("{raw} findings: 3 kept as directories")), "{index}");
    let row = format!("| {raw} |");
    assert!(index.lines().any(|l| l.contains("| error |") && l.contains(&row)), "the entry counts all {raw}: {index}");
}
