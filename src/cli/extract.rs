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
    pub models: PathBuf,
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

fn ort(a: OrtArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    let files = crate::util::onnx_files(&a.models)?;
    anyhow::ensure!(!files.is_empty(), "--models {}: no .onnx files", a.models.display());
    let hints = test_hints(&a.models);
    let mut spec = WorkerSpec::new(TargetKind::Ort)?;
    spec.ort_lib = a.ort_lib.clone();
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let pool = Pool::start(&spec, jobs.min(files.len()))?;
    let tmp = tempfile::tempdir()?;
    let results = pool.map(files, |w, path| {
        let rel = path.strip_prefix(&a.models).unwrap_or(&path).display().to_string();
        let prov = Provenance { source: rel.clone(), test: hints.get(&rel).cloned() };
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
        count_models(&a.models),
        library.len(),
        passes.len(),
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn count_models(dir: &Path) -> usize {
    crate::util::onnx_files(dir).map(|f| f.len()).unwrap_or(0)
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
