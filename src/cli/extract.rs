//! `oatest extract ort`: cut verified optimization-aware patterns from captured graphs into a pattern library.

use crate::pattern::extract::extract_model;
use crate::pattern::{Pattern, Provenance};
use crate::target::worker::{Pool, WorkerSpec};
use crate::target::TargetKind;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum ExtractCmd {
    /// From ONNX Runtime's optimizer test models.
    Ort(OrtArgs),
}

#[derive(Args, Debug)]
pub struct OrtArgs {
    /// A directory searched recursively for .onnx models (e.g. ../shared/corpora/ort-transform-testdata).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// A pytest test path (e.g. ORT's onnxruntime/test/python/quantization): its tests run with the capture
    /// plugin from python/, and every model they open a session on is extracted from.
    #[arg(long)]
    pub pytest: Option<PathBuf>,
    /// The Python that runs --pytest (default: .venv/bin/python of the project, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The pattern library to (re)write.
    #[arg(long, default_value = "patterns/ort")]
    pub out: PathBuf,
    #[arg(long)]
    pub jobs: Option<usize>,
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
}

pub fn run(cmd: ExtractCmd) -> anyhow::Result<()> {
    match cmd {
        ExtractCmd::Ort(a) => ort(a),
    }
}

/// model file (relative) -> C++ test classes that load it, from the corpus's static hint file if present.
fn test_hints(models: &Path) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(models.join("PAIRS-from-test-sources.tsv")) else { return BTreeMap::new() };
    let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() >= 2 {
            m.entry(cols[0].trim().to_string()).or_default().insert(cols[1].trim().to_string());
        }
    }
    m.into_iter().map(|(k, v)| (k, v.into_iter().collect::<Vec<_>>().join(","))).collect()
}

/// Runs a pytest suite with the capture plugin; returns the captured models with the first test that opened
/// each. A failing suite keeps what it captured.
fn capture_pytest(a: &OrtArgs, tests: &Path, dir: &Path) -> anyhow::Result<Vec<(PathBuf, Provenance)>> {
    let python = a
        .python
        .clone()
        .or_else(|| crate::util::project_file(".venv/bin/python"))
        .unwrap_or_else(|| PathBuf::from("python3"));
    let plugin = crate::util::project_file("python/oatest_capture.py")
        .context("python/oatest_capture.py not found (run oatest from its project directory)")?;
    let pythonpath = match std::env::var_os("PYTHONPATH") {
        Some(p) => format!("{}:{}", plugin.parent().unwrap().display(), p.to_string_lossy()),
        None => plugin.parent().unwrap().display().to_string(),
    };
    eprintln!("running pytest on {} with the capture plugin ({})", tests.display(), python.display());
    let status = std::process::Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "oatest_capture", "-p", "no:cacheprovider"])
        .arg(tests)
        .env("OATEST_CAPTURE_DIR", dir)
        .env("PYTHONPATH", pythonpath)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !status.success() {
        eprintln!("warning: pytest on {} ended with {status}; keeping the models captured so far", tests.display());
    }
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    if let Ok(text) = std::fs::read_to_string(dir.join("captures.jsonl")) {
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            if let (Some(m), Some(t)) = (v["model"].as_str(), v["test"].as_str()) {
                first.entry(m.to_string()).or_insert_with(|| t.to_string());
            }
        }
    }
    Ok(first
        .into_iter()
        .map(|(m, t)| {
            let file = t.split("::").next().unwrap_or_default().to_string();
            (dir.join(&m), Provenance { source: format!("pytest:{file}"), test: Some(t) })
        })
        .collect())
}

fn ort(a: OrtArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    anyhow::ensure!(a.models.is_some() || a.pytest.is_some(), "give --models DIR and/or --pytest PATH");
    let mut items: Vec<(PathBuf, Provenance)> = Vec::new();
    if let Some(models) = &a.models {
        let files = crate::util::onnx_files(models)?;
        anyhow::ensure!(!files.is_empty(), "--models {}: no .onnx files", models.display());
        let hints = test_hints(models);
        items.extend(files.into_iter().map(|f| {
            let rel = f.strip_prefix(models).unwrap_or(&f).display().to_string();
            let prov = Provenance { test: hints.get(&rel).cloned(), source: rel };
            (f, prov)
        }));
    }
    let captures = tempfile::tempdir()?;
    if let Some(tests) = &a.pytest {
        let got = capture_pytest(&a, tests, captures.path())?;
        eprintln!("captured {} distinct models from {}", got.len(), tests.display());
        items.extend(got);
    }
    let n_models = items.len();
    let mut spec = WorkerSpec::new(TargetKind::Ort)?;
    spec.ort_lib = a.ort_lib.clone();
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let pool = Pool::start(&spec, jobs.clamp(1, n_models.max(1)))?;
    let tmp = tempfile::tempdir()?;
    let results = pool.map(items, |w, (path, prov)| {
        let rel = prov.source.clone();
        let r = std::fs::read(&path)
            .with_context(|| format!("cannot read {}", path.display()))
            .and_then(|b| extract_model(w, &b, &prov, tmp.path()).with_context(|| format!("{}", path.display())));
        (rel, r)
    });
    let (mut pairs, mut candidates, mut verified, mut skipped) = (0, 0, 0, 0);
    let mut library: BTreeMap<String, Pattern> = BTreeMap::new();
    for (rel, r) in results {
        match r {
            Ok(res) => {
                pairs += res.pairs.len();
                candidates += res.patterns.len() + res.rejected;
                verified += res.patterns.len();
                for p in res.patterns {
                    match library.get_mut(&p.meta.key) {
                        Some(q) => {
                            q.meta.provenance.extend(p.meta.provenance);
                            q.meta.provenance.sort();
                            q.meta.provenance.dedup();
                        }
                        None => {
                            library.insert(p.meta.key.clone(), p);
                        }
                    }
                }
            }
            Err(e) => {
                skipped += 1;
                eprintln!("skipped {rel}: {e:#}");
            }
        }
    }
    write_library(&a.out, &library)?;
    let passes: BTreeSet<&str> = library.values().map(|p| p.meta.pass.as_str()).collect();
    println!(
        "{} models ({skipped} skipped): {pairs} (graph, pass) pairs, {candidates} candidate patterns, {verified} verified, \
         {} unique over {} passes, written to {} in {:.1}s",
        n_models,
        library.len(),
        passes.len(),
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Replaces the pattern files of a library directory (files that are not patterns are left alone).
fn write_library(out: &Path, library: &BTreeMap<String, Pattern>) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    for f in crate::util::onnx_files(out)? {
        if Pattern::load(&f).is_ok() {
            std::fs::remove_file(&f).with_context(|| format!("cannot remove stale pattern {}", f.display()))?;
        }
    }
    for p in library.values() {
        crate::util::write_atomic(&out.join(p.file_name()), &p.encode()?)?;
    }
    // drop directories the rewrite left empty
    if let Ok(entries) = std::fs::read_dir(out) {
        for e in entries.flatten() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
    Ok(())
}
