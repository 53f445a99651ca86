//! `oatest extract ort`: cut verified optimization-aware patterns from captured graphs into a pattern library.

use crate::pattern::extract::extract_model;
use crate::pattern::{Pattern, Provenance};
use crate::compiler::worker::{Pool, WorkerSpec};
use crate::compiler::TargetKind;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum ExtractCmd {
    /// From ONNX Runtime's optimizer test models.
    Ort(OrtArgs),
    /// From TVM's Relax transform tests (tests/python/relax/test_transform_*.py), run with a capture plugin.
    Tvm(TvmArgs),
}

#[derive(Args, Debug)]
pub struct TvmArgs {
    /// A test file, or a directory whose files matching --include are run (TVM's tests/python/relax).
    #[arg(long)]
    pub tests: PathBuf,
    /// The Python with apache-tvm and pytest (default: .venv/bin/python of the project, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The pattern library to (re)write.
    #[arg(long, default_value = "patterns/tvm")]
    pub out: PathBuf,
    /// Test files run at once (each in its own pytest process: a TVM crash loses one file, not the run).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Per-file time limit in seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_secs: u64,
    /// Which test files of a --tests directory run (file-name patterns with `*`; repeatable).
    #[arg(long = "include", default_value = "test_transform*.py")]
    pub include: Vec<String>,
}

/// `name` matches `pattern`, where `*` matches any run of characters.
fn glob_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || !name.ends_with(last) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[derive(Args, Debug)]
pub struct OrtArgs {
    /// A directory searched recursively for .onnx models (default, when neither --models nor --pytest is given: the vendored tests/data/ort-transform-testdata).
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
        ExtractCmd::Tvm(a) => tvm(a),
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

/// `--python`, else the project's .venv/bin/python, else python3.
fn python_or_default(python: &Option<PathBuf>) -> PathBuf {
    python.clone().or_else(|| crate::util::project_file(".venv/bin/python")).unwrap_or_else(|| PathBuf::from("python3"))
}

/// The PYTHONPATH that makes pytest find a capture plugin of the project's python/ directory.
fn plugin_path(file: &str) -> anyhow::Result<String> {
    let plugin = crate::util::project_file(&format!("python/{file}"))
        .with_context(|| format!("python/{file} not found (run oatest from its project directory)"))?;
    let dir = plugin.parent().expect("a file has a parent").display().to_string();
    let path = match std::env::var_os("PYTHONPATH") {
        Some(p) => format!("{dir}:{}", p.to_string_lossy()),
        None => dir,
    };
    Ok(path)
}

/// Runs a pytest suite with the capture plugin; returns the captured models with the first test that opened
/// each. A failing suite keeps what it captured.
fn capture_pytest(a: &OrtArgs, tests: &Path, dir: &Path) -> anyhow::Result<Vec<(PathBuf, Provenance)>> {
    let python = python_or_default(&a.python);
    let pythonpath = plugin_path("oatest_capture.py")?;
    eprintln!("running pytest on {} with the capture plugin ({})", tests.display(), python.display());
    // The suite writes model files into its working directory: give it a scratch one, never ours.
    let tests = tests.canonicalize().with_context(|| format!("{}: cannot resolve the test path", tests.display()))?;
    let scratch = dir.join("cwd");
    std::fs::create_dir_all(&scratch).with_context(|| format!("cannot create {}", scratch.display()))?;
    let status = std::process::Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "oatest_capture", "-p", "no:cacheprovider"])
        .arg(&tests)
        .current_dir(&scratch)
        .env("OATEST_CAPTURE_DIR", dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf()))
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

fn ort(mut a: OrtArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    if a.models.is_none() && a.pytest.is_none() {
        a.models = crate::util::project_file("tests/data/ort-transform-testdata");
        anyhow::ensure!(a.models.is_some(), "give --models DIR and/or --pytest PATH");
    }
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

/// What one test file's capture run gave.
struct FileRun {
    file: String,
    outcome: String,
    failed_tests: Vec<serde_json::Value>,
    stats: serde_json::Value,
}

fn tvm(a: TvmArgs) -> anyhow::Result<()> {
    let start = Instant::now();
    let files: Vec<PathBuf> = if a.tests.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&a.tests)
            .with_context(|| format!("cannot list {}", a.tests.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.ends_with(".py") && a.include.iter().any(|g| glob_match(g, &n))
                })
            })
            .collect();
        v.sort();
        v
    } else {
        vec![a.tests.clone()]
    };
    anyhow::ensure!(!files.is_empty(), "--tests {}: no test files match {:?}", a.tests.display(), a.include);
    let python = python_or_default(&a.python);
    let pythonpath = plugin_path("oatest_tvm_capture.py")?;
    let captures = tempfile::tempdir()?;
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    let queue = std::sync::Mutex::new(files.iter().enumerate().collect::<Vec<_>>());
    let runs = std::sync::Mutex::new(Vec::<FileRun>::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(files.len()) {
            scope.spawn(|| loop {
                let Some((i, file)) = queue.lock().unwrap().pop() else { break };
                let dir = captures.path().join(format!("{i:04}"));
                let r = capture_tvm_file(&python, &pythonpath, file, &dir, a.timeout_secs);
                eprintln!("{}: {}", file.display(), r.outcome);
                runs.lock().unwrap().push(r);
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    runs.sort_by(|x, y| x.file.cmp(&y.file));
    // merge: one file per (pass, module hash); the first provenance wins
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    for f in crate::util::files_with_ext(&a.out, "json")? {
        if crate::pattern::relax::RelaxPattern::load(&f).ok().flatten().is_some() {
            std::fs::remove_file(&f)?;
        }
    }
    let mut written: BTreeMap<String, String> = BTreeMap::new();
    for f in crate::util::files_with_ext(captures.path(), "json")? {
        let Ok(Some(p)) = crate::pattern::relax::RelaxPattern::load(&f) else { continue };
        let name = f.file_name().unwrap_or_default().to_string_lossy().to_string();
        let rel = format!("{}/{name}", p.pass);
        if written.contains_key(&rel) {
            continue;
        }
        crate::util::write_atomic(&a.out.join(&rel), &std::fs::read(&f)?)?;
        written.insert(rel, p.pass.clone());
    }
    if let Ok(entries) = std::fs::read_dir(&a.out) {
        for e in entries.flatten() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
    let passes: BTreeSet<&String> = written.values().collect();
    let failed: usize = runs.iter().map(|r| r.failed_tests.len()).sum();
    // the report is committed with the library: it names the test directory by its last components, and paths
    // of this machine (the tests, the project) inside failure messages are written relative to them
    let tests_abs = a.tests.canonicalize().unwrap_or_else(|_| a.tests.clone());
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
    crate::util::write_atomic(&a.out.join("extraction.json"), text.as_bytes())?;
    println!(
        "{} test files ({failed} failing tests reported in {}), {} unique verified patterns over {} passes, \
         written to {} in {:.1}s",
        runs.len(),
        a.out.join("extraction.json").display(),
        written.len(),
        passes.len(),
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Runs one test file under pytest with the capture plugin in its own process (its directory as cwd, so
/// TVM's conftest.py applies).
fn capture_tvm_file(python: &Path, pythonpath: &str, file: &Path, out: &Path, timeout_secs: u64) -> FileRun {
    let name = file.file_name().unwrap_or_default().to_string_lossy().to_string();
    // a test that crashes the process is deselected and the file run again (at most 5 times)
    let mut crashed: Vec<String> = Vec::new();
    let mut outcome = String::new();
    for _ in 0..6 {
        let mut cmd = std::process::Command::new(python);
        cmd.args(["-m", "pytest", "-q", "-p", "oatest_tvm_capture", "-p", "no:cacheprovider"]).arg(&name);
        for t in &crashed {
            cmd.arg("--deselect").arg(t);
        }
        let child = cmd
            .current_dir(file.parent().unwrap_or(Path::new(".")))
            .env("OATEST_CAPTURE_DIR", out)
            .env("PYTHONPATH", pythonpath)
            .env("TVM_NUM_THREADS", "1")
            .stdout(
                std::fs::File::create(out.join("pytest.log")).map(Into::into).unwrap_or(std::process::Stdio::null()),
            )
            .stderr(std::process::Stdio::null())
            .spawn();
        outcome = run_capture(child, timeout_secs, python);
        if outcome.starts_with("pytest exited") {
            // collection errors and the like: the end of pytest's report says why
            let log = std::fs::read_to_string(out.join("pytest.log")).unwrap_or_default();
            let why: Vec<&str> = log.lines().filter(|l| l.starts_with("E ") || l.contains("rror")).take(2).collect();
            if !why.is_empty() {
                outcome = format!("{outcome}: {}", why.join(" | "));
            }
        }
        let current = std::fs::read_to_string(out.join("current_test")).unwrap_or_default();
        if !outcome.starts_with("crashed") || current.is_empty() || crashed.contains(&current) {
            break;
        }
        let _ = std::fs::remove_file(out.join("current_test"));
        crashed.push(current);
    }
    if !crashed.is_empty() {
        outcome = format!("{outcome}; tests that crashed the process (rerun without them): {}", crashed.join(", "));
    }
    let failed_tests = std::fs::read_to_string(out.join("failed.jsonl"))
        .map(|t| t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
        .unwrap_or_default();
    let stats = std::fs::read_to_string(out.join("capture_stats.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    FileRun { file: name, outcome, failed_tests, stats }
}

/// Waits for one pytest run within the time limit; what happened, in words.
fn run_capture(child: std::io::Result<std::process::Child>, timeout_secs: u64, python: &Path) -> String {
    match child {
        Err(e) => format!("cannot run {}: {e}", python.display()),
        Ok(mut c) => {
            let deadline = Instant::now() + std::time::Duration::from_secs(timeout_secs);
            loop {
                match c.try_wait() {
                    Ok(Some(st)) => {
                        use std::os::unix::process::ExitStatusExt;
                        break match (st.code(), st.signal()) {
                            (Some(0), _) => "all tests passed".to_string(),
                            (Some(1), _) => "some tests failed (kept what was captured)".to_string(),
                            (Some(c), _) => format!("pytest exited with {c}"),
                            (None, Some(s)) => {
                                format!("crashed ({}; kept what was captured)", crate::compiler::signal_name(s))
                            }
                            _ => "ended abnormally".to_string(),
                        };
                    }
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break format!("timed out after {timeout_secs} s (kept what was captured)");
                    }
                    Ok(None) => std::thread::sleep(std::time::Duration::from_millis(100)),
                    Err(e) => break format!("cannot wait for pytest: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn globs_match_file_names() {
        use super::glob_match;
        assert!(glob_match("test_transform*.py", "test_transform_fuse_ops.py"));
        assert!(!glob_match("test_transform*.py", "test_backend_dispatch.py"));
        assert!(glob_match("test_fast_math_transform.py", "test_fast_math_transform.py"));
        assert!(glob_match("test_*_dispatch_*.py", "test_backend_dispatch_sort_scan.py"));
        assert!(!glob_match("a*b*c", "acb"));
    }
}
