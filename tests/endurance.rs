//! Long runs: worker processes recycled on a test budget and on a memory budget (a leaking target) lose no
//! finding, and stats.json carries the memory samples and CPU accounting that memory.svg and the benchmarks use.

mod common;
use common::{fault_model, json, oatest};
use std::path::Path;

/// Finding directory names (`<id>-<symptom>`) of a run.
fn findings(run: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(run.join("findings"))
        .map(|d| d.filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_string())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn campaign(seeds: &Path, out: &Path, budgets: &[&str]) -> serde_json::Value {
    let args = ["fuzz", "--target", "fault", "--tests", "40", "--seed", "5", "--jobs", "2", "--no-triage"];
    let paths = ["--seeds", seeds.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let o = oatest(&[&args[..], &paths, budgets].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    json(&out.join("stats.json"))
}

fn seeds(dir: &Path, faults: &[&str]) -> std::path::PathBuf {
    let seeds = dir.join("seeds");
    std::fs::create_dir_all(&seeds).unwrap();
    for f in faults {
        std::fs::write(seeds.join(format!("{f}.onnx")), fault_model(Some(f))).unwrap();
    }
    seeds
}

#[test]
fn workers_recycled_on_a_test_budget_lose_no_finding() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = seeds(dir.path(), &["segfault", "wrong", "leak"]);
    let never = campaign(&seeds, &dir.path().join("never"), &["--recycle-tests", "0", "--recycle-mb", "0"]);
    let by_tests = campaign(&seeds, &dir.path().join("tests"), &["--recycle-tests", "3", "--recycle-mb", "0"]);
    assert!(never["workers_recycled"].as_object().unwrap().is_empty(), "{}", never["workers_recycled"]);
    // 40 tests in 2 lanes: a lane's worker is replaced after every 3 tests its process ran (a crash starts a
    // fresh process, which counts from 0 again)
    let n = by_tests["workers_recycled"]["tests"].as_u64().unwrap_or(0);
    assert!((5..=13).contains(&n), "recycled on the test budget: {}", by_tests["workers_recycled"]);
    assert!(by_tests["workers_recycled"].get("memory").is_none());
    let all = findings(&dir.path().join("never"));
    assert!(all.iter().any(|f| f.ends_with("-crash")) && all.iter().any(|f| f.ends_with("-inconsistency")), "{all:?}");
    assert_eq!(findings(&dir.path().join("tests")), all, "recycling on the test budget lost or added a finding");
    assert_eq!(by_tests["tests_executed"], 40);
}

#[test]
fn a_leaking_worker_is_recycled_on_the_memory_budget_and_loses_no_finding() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = seeds(dir.path(), &["wrong", "leak"]);
    let never = campaign(&seeds, &dir.path().join("never"), &["--recycle-tests", "0", "--recycle-mb", "0"]);
    // a leaking worker holds 32 MiB more after each test of the leak model (two configurations)
    let by_mem = campaign(&seeds, &dir.path().join("mem"), &["--recycle-tests", "0", "--recycle-mb", "60"]);
    assert!(never["worker_rss_max_mb"].as_f64().unwrap() > 100.0, "the leak shows: {}", never["worker_rss_max_mb"]);
    let m = by_mem["workers_recycled"]["memory"].as_u64().unwrap_or(0);
    assert!(m >= 1, "a leaking worker is recycled on the memory budget: {}", by_mem["workers_recycled"]);
    assert!(by_mem["workers_recycled"].get("tests").is_none());
    let all = findings(&dir.path().join("never"));
    assert!(all.iter().any(|f| f.ends_with("-inconsistency")), "{all:?}");
    assert_eq!(findings(&dir.path().join("mem")), all, "recycling on the memory budget lost or added a finding");
    assert_eq!(by_mem["tests_executed"], 40);
}

#[test]
fn stats_carry_memory_samples_and_cpu_accounting() {
    let dir = tempfile::tempdir().unwrap();
    let seeds = seeds(dir.path(), &["leak"]);
    let out = dir.path().join("run");
    let s = campaign(&seeds, &out, &["--recycle-mb", "0"]);
    let samples = s["memory"].as_array().unwrap();
    assert!(!samples.is_empty(), "{s}");
    for m in samples {
        assert!(m["fuzzer_mb"].as_f64().unwrap() > 0.0, "{m}");
        assert_eq!(m["workers_mb"].as_array().unwrap().len(), 2, "one per lane's worker: {m}");
    }
    // the leak (16 MiB a run, kept) shows in the workers' resident memory
    assert!(s["worker_rss_max_mb"].as_f64().unwrap() > 16.0, "{}", s["worker_rss_max_mb"]);
    let f = |k: &str| s[k].as_f64().unwrap();
    assert!(f("fuzzer_cpu_sec") > 0.0 && f("worker_cpu_sec") > 0.0, "{s}");
    assert!(f("worker_target_cpu_sec") > 0.0 && f("worker_target_cpu_sec") <= f("worker_cpu_sec"), "{s}");
    assert!(f("worker_lane_sec") > 0.0 && f("worker_wait_sec") <= f("worker_lane_sec"), "{s}");
    assert!((f("gen_time_share") - f("worker_wait_sec") / f("worker_lane_sec")).abs() < 1e-9, "{s}");
    let svg = std::fs::read_to_string(out.join("memory.svg")).unwrap();
    assert!(svg.contains("resident memory") && svg.contains("worker 1"), "memory.svg shows each worker");
}
