//! Small shared helpers: atomic writes and replacements of files and directories, file listing, hex, stable
//! hashes, where the project's files are.

use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a reader (or a
/// crash) never sees a partial file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create directory {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("cannot write in {}", dir.display()))?;
    tmp.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))?;
    tmp.persist(path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Creates directory `dir` atomically: `fill` writes into a temporary directory beside it, which is then
/// renamed into place. An existing `dir` (a resumed campaign re-running a test) is kept as it is.
pub fn write_dir_atomic(dir: &Path, fill: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let parent = dir.parent().expect("a directory inside the run directory");
    std::fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(parent)?;
    fill(tmp.path())?;
    std::fs::rename(tmp.keep(), dir)?;
    Ok(())
}

/// Replaces directory `dir` (or creates it) atomically: `fill` writes into a temporary directory beside it,
/// which then takes its place in one step (Linux: an exchange of the two names), so a reader sees the old or the
/// new directory, never a mix or nothing.
pub fn replace_dir_atomic(dir: &Path, fill: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let parent = dir.parent().context("a directory to replace has a parent")?;
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create directory {}", parent.display()))?;
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(parent)?;
    fill(tmp.path())?;
    if !dir.exists() {
        std::fs::rename(tmp.keep(), dir).with_context(|| format!("cannot create {}", dir.display()))?;
        return Ok(());
    }
    exchange(tmp.path(), dir).with_context(|| format!("cannot replace {}", dir.display()))?;
    // `tmp` now holds the old directory and is removed when dropped
    Ok(())
}

#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other);
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only reads them
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Without an atomic exchange: the old directory is moved aside for an instant.
#[cfg(not(target_os = "linux"))]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    let aside = a.with_extension("old");
    std::fs::rename(b, &aside)?;
    std::fs::rename(a, b)?;
    std::fs::rename(&aside, a)
}

/// `path` itself if it is a file, else every `*.onnx` below it (sorted).
pub fn onnx_files(path: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    files_with_ext(path, "onnx")
}

/// `path` itself if it is a file, else every file named `*.<ext>` below it (sorted).
pub fn files_with_ext(path: &Path, ext: &str) -> anyhow::Result<Vec<std::path::PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Bytes as lowercase hex digits.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of a hex string (`None` for odd lengths or non-hex digits).
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect()
}

/// A stable 64-bit FNV-1a hash as 16 hex digits (std's hasher may change between Rust versions).
pub fn stable_hash(s: &str) -> String {
    let h = s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    format!("{h:016x}")
}

/// The environment variable that names oatest's home: the checkout (or a copy of its `patterns/`, `python/`,
/// `data/` and `.venv/`) that an installed binary takes its files from.
pub const HOME_VAR: &str = "OATEST_HOME";

/// The directories oatest searches for its project's files: `$OATEST_HOME` when set, then the current directory
/// and its ancestors, then the executable's ancestors, then, when `$OATEST_HOME` is not set, the checkout it was
/// built from (a binary installed with `cargo install --path .` finds the patterns beside its sources while they
/// are there).
pub fn search_roots() -> Vec<std::path::PathBuf> {
    let mut roots: Vec<std::path::PathBuf> = Vec::new();
    let home = std::env::var_os(HOME_VAR).filter(|h| !h.is_empty());
    if let Some(home) = &home {
        roots.push(std::path::PathBuf::from(home));
    }
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().map(Path::to_path_buf));
    }
    if home.is_none() {
        roots.push(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    }
    roots
}

/// The first existing `rel` below `$OATEST_HOME`, the current directory, its ancestors, the executable's
/// ancestors, or the checkout it was built from (how oatest finds its project's files: patterns/, python/, data/,
/// .venv/).
pub fn project_file(rel: &str) -> Option<std::path::PathBuf> {
    search_roots().into_iter().map(|r| r.join(rel)).find(|p| p.exists())
}

/// Progress of a long step over a known number of items: an indicatif bar (done of total, ETA) when stderr is a
/// terminal, else a line every 10 s, so logs stay short. Shared by threads behind a `Mutex`.
pub struct Steps {
    bar: Option<indicatif::ProgressBar>,
    what: String,
    total: u64,
    done: u64,
    t0: std::time::Instant,
    said: std::time::Instant,
}

impl Steps {
    /// `what`: what the items are, e.g. `patterns checked`.
    pub fn new(what: &str, total: u64) -> Steps {
        use std::io::IsTerminal;
        let bar = (std::io::stderr().is_terminal() && total > 0).then(|| {
            let b = indicatif::ProgressBar::new(total);
            let style = indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta} left)")
                .expect("a valid template");
            b.set_style(style.progress_chars("=> "));
            b.set_message(what.to_string());
            b
        });
        let now = std::time::Instant::now();
        Steps { bar, what: what.to_string(), total, done: 0, t0: now, said: now }
    }

    /// One more item done; `note` (e.g. `(12 usable)`) follows the count.
    pub fn inc(&mut self, note: &str) {
        self.done += 1;
        match &self.bar {
            Some(b) => {
                b.inc(1);
                b.set_message(format!("{} {note}", self.what));
            }
            None if self.said.elapsed().as_secs() >= 10 && self.done < self.total => {
                self.said = std::time::Instant::now();
                let t = self.t0.elapsed().as_secs_f64();
                let left = t / self.done as f64 * (self.total - self.done) as f64;
                eprintln!("  {}: {}/{} {note} in {t:.0} s, about {left:.0} s left", self.what, self.done, self.total);
            }
            None => {}
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
