//! Building pattern libraries: the ORT driver (models and pytest captures, extracted in a worker pool, duplicates
//! merged, pattern files rewritten) and the TVM driver (captured Relax patterns merged, with extraction.json).

use super::capture::{capture_pytest, capture_tvm_files, plugin_path, python_or_default, tvm_test_files};
use super::extract::extract_model;
use super::relax::RelaxPattern;
use super::repair;
use super::{Pattern, Provenance};
use crate::compiler::worker::{Pool, WorkerSpec};
use crate::compiler::TargetKind;
use anyhow::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `oatest extract ort` extracts from and where to; at least one of `models` and `pytest` is given.
#[derive(Clone, Debug)]
pub struct OrtExtraction {
    /// A directory searched recursively for .onnx models.
    pub models: Option<PathBuf>,
    /// A pytest test path run with the capture plugin; every model its tests open a session on is extracted from.
    pub pytest: Option<PathBuf>,
    /// The Python that runs `pytest` (None: the project's .venv/bin/python, else python3).
    pub python: Option<PathBuf>,
    /// The pattern library to (re)write.
    pub out: PathBuf,
    /// Workers (None: one per core); never more than there are models.
    pub jobs: Option<usize>,
    pub ort_lib: Option<PathBuf>,
    /// Repair corpus models that do not fire the pass their test names (`repair.rs`).
    pub repair: bool,
    /// Also keep each pattern below this ai.onnx opset upgraded to it, when it still fires (`repair.rs`).
    pub upgrade_opset: Option<i64>,
    /// Whose optimizer cuts and verifies (ONNX Runtime's, or ort-transformers' Python optimizer).
    pub target: TargetKind,
}

/// What an ORT extraction did.
#[derive(Clone, Debug)]
pub struct OrtSummary {
    pub models: usize,
    pub skipped: usize,
    pub pairs: usize,
    pub candidates: usize,
    pub verified: usize,
    pub unique: usize,
    pub passes: usize,
    /// Corpus models that fired their test's pass only once repaired, of those that did not fire it.
    pub repaired: usize,
    pub missed: usize,
    /// Patterns added by upgrading the opset.
    pub upgraded: usize,
    pub out: PathBuf,
    pub secs: f64,
}

impl fmt::Display for OrtSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} models ({} skipped): {} (graph, pass) pairs, {} candidate patterns, {} verified, \
             {} unique over {} passes ({} of {} models repaired to fire their test's pass, {} patterns added \
             by upgrading the opset), written to {} in {:.1}s",
            self.models,
            self.skipped,
            self.pairs,
            self.candidates,
            self.verified,
            self.unique,
            self.passes,
            self.repaired,
            self.missed,
            self.upgraded,
            self.out.display(),
            self.secs
        )
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

/// Extracts verified patterns from every model (skipped models are reported on stderr), merges duplicates by
/// structural key, and rewrites the pattern files of `cfg.out`.
pub fn extract_ort(cfg: &OrtExtraction) -> anyhow::Result<OrtSummary> {
    let start = Instant::now();
    let mut items: Vec<(PathBuf, Provenance)> = Vec::new();
    // corpus models whose test names the passes they were written for (candidates for repair)
    let mut hinted: BTreeMap<String, (PathBuf, Provenance)> = BTreeMap::new();
    if let Some(models) = &cfg.models {
        // a library's own cut patterns (extracting into the folder of the models) are not extracted from again;
        // another compiler's patterns are models like any (ONNX Runtime's, for its Python optimizer)
        let own = cfg.target.name();
        let cut = |f: &PathBuf| {
            Pattern::load(f)
                .is_ok_and(|p| p.meta.granularity != crate::pattern::Granularity::Model && p.meta.compiler == own)
        };
        let files: Vec<PathBuf> = crate::util::onnx_files(models)?.into_iter().filter(|f| !cut(f)).collect();
        anyhow::ensure!(!files.is_empty(), "--models {}: no .onnx files", models.display());
        let hints = test_hints(models);
        items.extend(files.into_iter().map(|f| {
            let rel = f.strip_prefix(models).unwrap_or(&f).display().to_string();
            let prov = Provenance { test: hints.get(&rel).cloned(), source: rel.clone() };
            if prov.test.is_some() {
                hinted.insert(rel, (f.clone(), prov.clone()));
            }
            (f, prov)
        }));
    }
    let captures = tempfile::tempdir()?;
    if let Some(tests) = &cfg.pytest {
        let got = capture_pytest(&cfg.python, tests, captures.path())?;
        eprintln!("captured {} distinct models from {}", got.len(), tests.display());
        items.extend(got);
    }
    let n_models = items.len();
    let mut spec = WorkerSpec::new(cfg.target.clone())?;
    spec.ort_lib = cfg.ort_lib.clone();
    let jobs = cfg.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let pool = Pool::start(&spec, jobs.clamp(1, n_models.max(1)))?;
    let tmp = tempfile::tempdir()?;
    let progress = std::sync::Mutex::new(crate::util::Steps::new("models extracted", n_models as u64));
    let results = pool.map(items, |w, (path, prov)| {
        let rel = prov.source.clone();
        let r = std::fs::read(&path)
            .with_context(|| format!("cannot read {}", path.display()))
            // for ort-transformers, a model naming no model type is optimized as the runner's default: said in its
            // metadata, which its patterns keep, so that campaigns treat their tests as the verification did
            .and_then(|b| match cfg.target {
                TargetKind::OrtTransformers => {
                    crate::compiler::ortx::stamp_model_type(&b, crate::compiler::ortx::DEFAULT_MODEL_TYPE)
                }
                _ => Ok(b),
            })
            .and_then(|b| extract_model(w, &b, &prov, tmp.path()).with_context(|| format!("{}", path.display())));
        progress.lock().unwrap_or_else(|e| e.into_inner()).inc("");
        (rel, r)
    });
    progress.into_inner().unwrap_or_else(|e| e.into_inner()).finish();
    let (mut pairs, mut candidates, mut verified, mut skipped) = (0, 0, 0, 0);
    let mut library: BTreeMap<String, Pattern> = BTreeMap::new();
    let mut misses = Vec::new();
    for (rel, r) in &results {
        if let (Some((path, prov)), Ok(res)) = (hinted.get(rel), r) {
            let hints = prov.test.as_deref().unwrap_or_default().split(',');
            let wanted: Vec<String> = hints
                .map(repair::pass_names)
                .filter(|names| !names.iter().any(|n| res.pairs.contains(n)))
                .flatten()
                .collect();
            if cfg.repair && !wanted.is_empty() {
                misses.push(repair::Miss { path: path.clone(), provenance: prov.clone(), wanted });
            }
        }
    }
    let python = python_or_default(&cfg.python);
    let missed = misses.len();
    let repaired = repair::repair_models(&pool, &python, crate::graph::DEFAULT_OPSET, misses, tmp.path())?;
    let n_repaired = repaired.len();
    for (rel, r) in results.into_iter().chain(repaired) {
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
    let mut upgraded = 0;
    if let Some(opset) = cfg.upgrade_opset {
        // patterns with large constants are left as they are: campaigns do not splice them
        let small = |p: &&Pattern| {
            p.model.graph.initializers.values().map(|t| t.raw().map_or(0, |r| r.len())).sum::<usize>() <= 64 << 10
        };
        let mut below: Vec<Pattern> =
            library.values().filter(|p| p.model.opset() < opset).filter(small).cloned().collect();
        // a pattern whose pass no longer fires at `opset` is tried at the highest fallback opsets below it where
        // it does (ORT's level-2 Gelu and LayerNorm fusions only fire before ONNX has Gelu and LayerNormalization)
        for target in std::iter::once(opset).chain(FALLBACK_OPSETS.iter().copied().filter(|&v| v < opset)) {
            let tried: Vec<Pattern> = below.iter().filter(|p| p.model.opset() < target).cloned().collect();
            let done: BTreeSet<String> = repair::upgrade_patterns(&pool, &python, target, tried)?
                .into_iter()
                .filter_map(|(from, p)| {
                    if !library.contains_key(&p.meta.key) {
                        library.insert(p.meta.key.clone(), p);
                        upgraded += 1;
                    }
                    Some(from)
                })
                .collect();
            below.retain(|p| !done.contains(&p.meta.key));
        }
    }
    write_library(&cfg.out, &library)?;
    let passes: BTreeSet<&str> = library.values().map(|p| p.meta.pass.as_str()).collect();
    Ok(OrtSummary {
        models: n_models,
        skipped,
        pairs,
        candidates,
        verified,
        unique: library.len(),
        passes: passes.len(),
        repaired: n_repaired,
        missed,
        upgraded,
        out: cfg.out.clone(),
        secs: start.elapsed().as_secs_f64(),
    })
}

/// Replaces the pattern files of a library directory (files that are not patterns are left alone).
fn write_library(out: &Path, library: &BTreeMap<String, Pattern>) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    for f in crate::util::onnx_files(out)? {
        // whole models (ort-transformers' library holds them beside what is cut from them) are the input
        if Pattern::load(&f).is_ok_and(|p| p.meta.granularity != crate::pattern::Granularity::Model) {
            std::fs::remove_file(&f).with_context(|| format!("cannot remove stale pattern {}", f.display()))?;
        }
    }
    for p in library.values() {
        crate::util::write_atomic(&out.join(p.file_name()), &p.encode()?)?;
    }
    remove_empty_dirs(out);
    Ok(())
}

/// Drops the subdirectories of `out` a rewrite left empty.
fn remove_empty_dirs(out: &Path) {
    if let Ok(entries) = std::fs::read_dir(out) {
        for e in entries.flatten() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// The opsets a pattern that no longer fires at `--upgrade-opset` is upgraded to instead, highest first: the last
/// before ONNX added Gelu (20) and LayerNormalization (17), where ORT fuses them into its own contrib ops at level 2.
pub const FALLBACK_OPSETS: &[i64] = &[19, 16];

/// What `oatest extract tvm` runs and where it writes.
#[derive(Clone, Debug)]
pub struct TvmExtraction {
    /// A test file, or a directory whose files matching `include` are run (TVM's tests/python/relax).
    pub tests: PathBuf,
    /// The Python with apache-tvm and pytest (None: the project's .venv/bin/python, else python3).
    pub python: Option<PathBuf>,
    /// The pattern library to (re)write.
    pub out: PathBuf,
    /// Test files run at once (None: one per core).
    pub jobs: Option<usize>,
    /// Per-file time limit in seconds.
    pub timeout_secs: u64,
    /// File-name patterns (with `*`) selecting the test files of a `tests` directory.
    pub include: Vec<String>,
}

/// What a TVM extraction did.
#[derive(Clone, Debug)]
pub struct TvmSummary {
    pub files: usize,
    pub failed_tests: usize,
    /// The extraction report (extraction.json in the library).
    pub report: PathBuf,
    pub patterns: usize,
    pub passes: usize,
    pub out: PathBuf,
    pub secs: f64,
}

impl fmt::Display for TvmSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} test files ({} failing tests reported in {}), {} unique verified patterns over {} passes, \
             written to {} in {:.1}s",
            self.files,
            self.failed_tests,
            self.report.display(),
            self.patterns,
            self.passes,
            self.out.display(),
            self.secs
        )
    }
}

/// Runs the TVM test files under the capture plugin, rewrites the Relax pattern files of `cfg.out` (one per pass
/// and module hash, the first provenance wins) and writes its report, extraction.json.
pub fn extract_tvm(cfg: &TvmExtraction) -> anyhow::Result<TvmSummary> {
    let start = Instant::now();
    let files = tvm_test_files(&cfg.tests, &cfg.include)?;
    let python = python_or_default(&cfg.python);
    let pythonpath = plugin_path("oatest_tvm_capture.py")?;
    let captures = tempfile::tempdir()?;
    let jobs = cfg.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    let runs = capture_tvm_files(&python, &pythonpath, &files, captures.path(), jobs, cfg.timeout_secs);
    // merge: one file per (pass, module hash); the first provenance wins
    std::fs::create_dir_all(&cfg.out).with_context(|| format!("cannot create {}", cfg.out.display()))?;
    for f in crate::util::files_with_ext(&cfg.out, "json")? {
        if RelaxPattern::load(&f).ok().flatten().is_some() {
            std::fs::remove_file(&f)?;
        }
    }
    let mut written: BTreeMap<String, String> = BTreeMap::new();
    for f in crate::util::files_with_ext(captures.path(), "json")? {
        let Ok(Some(p)) = RelaxPattern::load(&f) else { continue };
        let name = f.file_name().unwrap_or_default().to_string_lossy().to_string();
        let rel = format!("{}/{name}", p.pass);
        if written.contains_key(&rel) {
            continue;
        }
        crate::util::write_atomic(&cfg.out.join(&rel), &std::fs::read(&f)?)?;
        written.insert(rel, p.pass.clone());
    }
    remove_empty_dirs(&cfg.out);
    let passes: BTreeSet<&String> = written.values().collect();
    let failed: usize = runs.iter().map(|r| r.failed_tests.len()).sum();
    // the report is committed with the library: it names the test directory by its last components, and paths
    // of this machine (the tests, the project) inside failure messages are written relative to them
    let tests_abs = cfg.tests.canonicalize().unwrap_or_else(|_| cfg.tests.clone());
    let tests_shown: PathBuf = {
        let parts: Vec<_> = tests_abs.components().collect();
        parts[parts.len().saturating_sub(3)..].iter().collect()
    };
    let report = serde_json::json!({
        "tests": tests_shown.display().to_string(),
        "files": runs.iter().map(|r| serde_json::json!({
            "file": r.file, "outcome": r.outcome, "failed_tests": r.failed_tests, "capture": r.stats,
        })).collect::<Vec<_>>(),
        "patterns": written.len(),
        "passes": passes.len(),
    });
    let mut text = serde_json::to_string_pretty(&report)?;
    text = text.replace(&format!("{}/", tests_abs.display()), &format!("{}/", tests_shown.display()));
    if let Some(root) = crate::util::project_file("python").and_then(|p| p.parent().map(Path::to_path_buf)) {
        text = text.replace(&format!("{}/", root.display()), "");
    }
    let report_path = cfg.out.join("extraction.json");
    crate::util::write_atomic(&report_path, text.as_bytes())?;
    Ok(TvmSummary {
        files: runs.len(),
        failed_tests: failed,
        report: report_path,
        patterns: written.len(),
        passes: passes.len(),
        out: cfg.out.clone(),
        secs: start.elapsed().as_secs_f64(),
    })
}
