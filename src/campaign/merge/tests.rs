//! Merge on made-up shard directories: one bug per signature with the smallest kept, counts summed, incremental
//! re-merging, and errors that name the directory.

use super::*;
use serde_json::json;
use std::collections::BTreeMap;

fn settings(out: &Path, target: &str, seed: u64, shard: &str) -> Settings {
    let mut s: Settings = serde_json::from_value(json!({"target": target, "seed": seed, "budget": {"Tests": 10},
        "jobs": 1, "tolerance": 0.001, "seeds_dir": null, "out": out, "timeout_ms": 1000, "mem_mb": 1000,
        "max_nodes": 5, "ort_lib": null, "configs": [], "mode": "random", "patterns": null, "triage": true}))
    .unwrap();
    s.shard = Shard::parse(shard).unwrap();
    s
}

/// A run directory with a checkpoint; `f` adjusts its statistics.
fn run(root: &Path, name: &str, target: &str, seed: u64, shard: &str, f: impl FnOnce(&mut Stats)) -> PathBuf {
    let dir = root.join(name);
    let mut st = Stats::new(target, "0.23", seed);
    f(&mut st);
    crate::campaign::checkpoint::save(&settings(&dir, target, seed, shard), 10, &st).unwrap();
    dir
}

fn shard_run(root: &Path, name: &str, shard: &str) -> PathBuf {
    run(root, name, "tract", 1, shard, |_| {})
}

fn finding(run: &Path, name: &str) -> String {
    let d = run.join("findings").join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("meta.json"), format!("{{\"name\": \"{name}\"}}")).unwrap();
    d.display().to_string()
}

fn bug(run: &Path, class: &str, sig: &str, nodes: u64, confirmed: bool, finding_name: &str) {
    let src = finding(run, finding_name);
    let d = run.join(class).join(sig);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("model.onnx"), format!("minimized from {src}")).unwrap();
    let rec = json!({"target": "tract", "symptom": "crash", "triage": {"signature": sig, "nodes": nodes,
        "confirmed": confirmed}, "representative": src, "findings": [src], "later_field": 1});
    std::fs::write(d.join("bug.json"), serde_json::to_string_pretty(&rec).unwrap()).unwrap();
}

fn example(run: &Path, pass: &str, id: u64) {
    let d = run.join("examples").join(pass);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("example.json"), json!({"pass": pass, "source": format!("test {id}")}).to_string()).unwrap();
}

fn json_at(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Every file below `dir` with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn one_bug_per_signature_the_smallest_kept_with_every_finding() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (shard_run(t.path(), "a", "0/2"), shard_run(t.path(), "b", "1/2"));
    bug(&a, "bugs", "s1", 7, true, "00000002-crash");
    bug(&b, "bugs", "s1", 3, true, "00000001-crash");
    bug(&a, "bugs", "s2", 4, true, "00000004-crash");
    // a smaller but unconfirmed representative does not replace a confirmed one
    bug(&a, "bugs", "s3", 5, true, "00000006-crash");
    bug(&b, "bugs", "s3", 1, false, "00000003-crash");
    // any folder of <signature>/bug.json is merged the same way
    bug(&b, "reference", "r1", 2, true, "00000005-crash");
    let out = t.path().join("m");
    let r = merge(&[a.clone(), b.clone()], &out).unwrap();
    assert_eq!(r.bugs, BTreeMap::from([("bugs".to_string(), 3), ("reference".to_string(), 1)]));
    assert!(r.missing.is_empty());
    let s1 = json_at(&out.join("bugs/s1/bug.json"));
    assert_eq!(s1["triage"]["nodes"], 3);
    let want = [finding(&a, "00000002-crash"), finding(&b, "00000001-crash")];
    assert_eq!(s1["findings"], json!(want), "every shard's findings, in shard order");
    assert_eq!(s1["later_field"], 1, "fields merge does not know are kept");
    let model = std::fs::read_to_string(out.join("bugs/s1/model.onnx")).unwrap();
    assert!(model.contains("b/findings/00000001-crash"), "the smaller shard's model: {model}");
    assert_eq!(json_at(&out.join("bugs/s3/bug.json"))["triage"]["nodes"], 5);
    assert_eq!(json_at(&out.join("reference/r1/bug.json"))["triage"]["nodes"], 2);
    let stats = json_at(&out.join("stats.json"));
    assert_eq!(stats["bugs"], 3);
    assert_eq!(stats["entries_by_class"], json!({"optimizer": 3, "reference": 1}), "distinct, not summed");
    // every shard's findings are there, under their own (test id) names
    assert_eq!(subdirs(&out.join("findings")).unwrap().len(), 6);
}

#[test]
fn counts_are_summed_and_each_shard_kept() {
    let t = tempfile::tempdir().unwrap();
    let a = run(t.path(), "a", "tract", 1, "0/2", |s| {
        s.tests_executed = 10;
        s.tests_valid = 8;
        s.tests_per_sec = 5.0;
        s.elapsed_sec = 2.0;
        s.record_finding(crate::oracle::Symptom::Crash, "c1");
        s.passes_fired.insert("p".into(), 3);
        s.invalid_examples = vec!["test 4: x".into(), "test 8: y".into()];
        s.triaged_by_class.insert("reference".into(), 1);
        s.timeline = vec![(1.0, 5), (2.0, 10)];
    });
    let b = run(t.path(), "b", "tract", 1, "1/2", |s| {
        s.tests_executed = 6;
        s.tests_valid = 6;
        s.tests_per_sec = 2.0;
        s.elapsed_sec = 3.0;
        s.record_finding(crate::oracle::Symptom::Crash, "c1");
        s.record_finding(crate::oracle::Symptom::Error, "e1");
        s.passes_fired.insert("p".into(), 1);
        s.invalid_examples = vec!["test 1: z".into()];
        s.triaged_by_class.insert("reference".into(), 2);
        s.timeline = vec![(1.5, 3), (3.0, 6)];
    });
    let out = t.path().join("m");
    merge(&[b, a], &out).unwrap();
    let m: MergedStats = serde_json::from_value(json_at(&out.join("stats.json"))).unwrap();
    let s = &m.total;
    assert_eq!((s.tests_executed, s.tests_valid, s.findings_raw, s.findings_unique), (16, 14, 3, 2));
    assert_eq!((s.by_symptom["crash"], s.by_symptom["error"], s.passes_fired["p"]), (2, 1, 4));
    assert_eq!((s.signatures["c1"], s.triaged_by_class["reference"]), (2, 3));
    assert_eq!((s.tests_per_sec, s.elapsed_sec), (7.0, 3.0), "shards run side by side");
    assert_eq!(s.invalid_examples, ["test 1: z", "test 4: x", "test 8: y"]);
    assert_eq!(s.timeline, [(1.0, 5), (1.5, 8), (2.0, 13), (3.0, 16)]);
    let shards: Vec<&str> = m.shards.iter().map(|e| e.shard.as_str()).collect();
    assert_eq!(shards, ["0/2", "1/2"]);
    assert_eq!(m.shards[1].stats.tests_executed, 6);
}

#[test]
fn re_merging_adds_only_what_is_new_and_ends_where_one_merge_does() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (shard_run(t.path(), "a", "0/2"), shard_run(t.path(), "b", "1/2"));
    bug(&a, "bugs", "s1", 7, true, "00000002-crash");
    example(&a, "Fuse", 10);
    let out = t.path().join("m");
    merge(std::slice::from_ref(&a), &out).unwrap();
    // the shards go on: b files a smaller representative and an earlier example; a's finding gets triaged
    bug(&b, "bugs", "s1", 3, true, "00000001-crash");
    example(&b, "Fuse", 3);
    std::fs::write(a.join("findings/00000002-crash/triage.json"), "{}").unwrap();
    let r = merge(std::slice::from_ref(&b), &out).unwrap();
    assert_eq!(r.shards.len(), 2, "the runs merged before are merged again");
    assert_eq!((r.added.get("findings"), r.replaced, r.updated), (Some(&1), 2, 1));
    assert!(out.join("findings/00000002-crash/triage.json").exists());
    assert_eq!(json_at(&out.join("examples/Fuse/example.json"))["source"], "test 3");
    let once = t.path().join("once");
    merge(&[a.clone(), b.clone()], &once).unwrap();
    let (inc, one) = (tree(&out), tree(&once));
    assert_eq!(inc.keys().collect::<Vec<_>>(), one.keys().collect::<Vec<_>>());
    for (k, v) in &inc {
        if k != "merge.json" {
            assert_eq!(v, &one[k], "{k}");
        }
    }
    // again, with nothing new: nothing changes
    let r = merge(&[], &out).unwrap();
    assert!(r.added.is_empty() && r.updated == 0 && r.replaced == 0, "{r:?}");
    assert_eq!(tree(&out), inc);
}

#[test]
fn runs_of_other_campaigns_are_refused_naming_the_directory() {
    let t = tempfile::tempdir().unwrap();
    let a = shard_run(t.path(), "a", "0/2");
    let err = |runs: &[PathBuf], out: &str| format!("{:#}", merge(runs, &t.path().join(out)).unwrap_err());
    let plain = t.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), "mine").unwrap();
    let e = err(&[a.clone(), plain.clone()], "m1");
    assert!(e.contains("plain") && e.contains("not a run directory"), "{e}");
    let seed2 = run(t.path(), "seed2", "tract", 2, "1/2", |_| {});
    let e = err(&[a.clone(), seed2.clone()], "m2");
    assert!(e.contains("seed2") && e.contains("seed 2 here, 1 there"), "{e}");
    let ort = run(t.path(), "ort", "ort", 1, "1/2", |_| {});
    let e = err(&[a.clone(), ort], "m3");
    assert!(e.contains("/ort") && e.contains("target"), "{e}");
    let again = shard_run(t.path(), "again", "0/2");
    let e = err(&[a.clone(), again], "m4");
    assert!(e.contains("both are shard 0/2"), "{e}");
    let thirds = shard_run(t.path(), "thirds", "1/3");
    let e = err(&[a.clone(), thirds], "m5");
    assert!(e.contains("thirds") && e.contains("shard 1/3"), "{e}");
    let e = err(std::slice::from_ref(&a), "plain");
    assert!(e.contains("plain") && e.contains("no merge.json"), "{e}");
    // a merged directory holds one campaign
    merge(std::slice::from_ref(&a), &t.path().join("m6")).unwrap();
    let e = err(&[seed2], "m6");
    assert!(e.contains("seed2") && e.contains("merged into") && e.contains("m6"), "{e}");
    // a bad bug record is named
    bug(&a, "bugs", "s1", 1, true, "00000002-crash");
    std::fs::write(a.join("bugs/s1/bug.json"), "{").unwrap();
    let e = err(std::slice::from_ref(&a), "m7");
    assert!(e.contains("bugs/s1/bug.json") && e.contains("not a bug record"), "{e}");
}

#[test]
fn two_runs_with_the_same_test_are_refused() {
    let t = tempfile::tempdir().unwrap();
    // a resumed shard in another directory, merged with its first run
    let (a, b) = (shard_run(t.path(), "a", "0/2"), shard_run(t.path(), "b", "1/2"));
    finding(&a, "00000002-crash");
    finding(&b, "00000002-crash");
    let e = format!("{:#}", merge(&[a, b], &t.path().join("m")).unwrap_err());
    assert!(e.contains("a/findings/00000002-crash") && e.contains("the same test"), "{e}");
}
