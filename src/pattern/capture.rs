//! Running compiler test suites under the capture plugins of the project's python/: pytest on an ORT suite
//! (models it opens), and TVM test files one pytest process each (Relax modules), with time limits and crash reruns.

use super::Provenance;
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `name` matches `pattern`, where `*` matches any run of characters.
pub fn glob_match(pattern: &str, name: &str) -> bool {
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

/// `--python`, else the project's .venv/bin/python, else python3.
pub fn python_or_default(python: &Option<PathBuf>) -> PathBuf {
    python.clone().or_else(|| crate::util::project_file(".venv/bin/python")).unwrap_or_else(|| PathBuf::from("python3"))
}

/// The PYTHONPATH that makes pytest find a capture plugin of the project's python/ directory.
pub fn plugin_path(file: &str) -> anyhow::Result<String> {
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
pub fn capture_pytest(
    python: &Option<PathBuf>,
    tests: &Path,
    dir: &Path,
) -> anyhow::Result<Vec<(PathBuf, Provenance)>> {
    let python = python_or_default(python);
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

/// The test files of `tests`: the file itself, or a directory's `*.py` files whose names match one of `include`
/// (sorted).
pub fn tvm_test_files(tests: &Path, include: &[String]) -> anyhow::Result<Vec<PathBuf>> {
    let files: Vec<PathBuf> = if tests.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(tests)
            .with_context(|| format!("cannot list {}", tests.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().is_some_and(|n| {
                    let n = n.to_string_lossy();
                    n.ends_with(".py") && include.iter().any(|g| glob_match(g, &n))
                })
            })
            .collect();
        v.sort();
        v
    } else {
        vec![tests.to_path_buf()]
    };
    anyhow::ensure!(!files.is_empty(), "--tests {}: no test files match {:?}", tests.display(), include);
    Ok(files)
}

/// What one test file's capture run gave.
pub struct FileRun {
    pub file: String,
    pub outcome: String,
    pub failed_tests: Vec<serde_json::Value>,
    pub stats: serde_json::Value,
}

/// Runs every TVM test file under the capture plugin, `jobs` files at once, file `i` capturing into
/// `captures/<i:04>`; each outcome is reported on stderr as it ends. The runs come back sorted by file name.
pub fn capture_tvm_files(
    python: &Path,
    pythonpath: &str,
    files: &[PathBuf],
    captures: &Path,
    jobs: usize,
    timeout_secs: u64,
) -> Vec<FileRun> {
    let queue = std::sync::Mutex::new(files.iter().enumerate().collect::<Vec<_>>());
    let runs = std::sync::Mutex::new(Vec::<FileRun>::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(files.len()) {
            scope.spawn(|| loop {
                let Some((i, file)) = queue.lock().unwrap().pop() else { break };
                let dir = captures.join(format!("{i:04}"));
                let r = capture_tvm_file(python, pythonpath, file, &dir, timeout_secs);
                eprintln!("{}: {}", file.display(), r.outcome);
                runs.lock().unwrap().push(r);
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    runs.sort_by(|x, y| x.file.cmp(&y.file));
    runs
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
