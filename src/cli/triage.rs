//! `oatest triage RUN_DIR`: culprit passes, minimized models, and bug directories with reports and
//! reproducers for a campaign's findings; the worker and reduction flags that `oatest reduce` shares.

use super::tolerance::ToleranceArgs;
use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::TargetKind;
use crate::oracle::{Oracle, Tolerance};
use crate::report::known::KnownBugs;
use crate::report::upstream::Labeler;
use crate::triage;
use crate::triage::reduce::Limits;
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Worker and reduction settings shared by triage and reduce.
#[derive(Args, Debug, Clone)]
pub struct TriageOpts {
    #[command(flatten)]
    pub ort: super::OrtLib,
    /// Another ONNX Runtime library (repeatable): every minimized ORT bug is re-run with it, and bug.json records
    /// per version whether it reproduces (default: the campaign's).
    #[arg(long = "also-ort-lib", value_name = "PATH")]
    pub also_ort_libs: Vec<PathBuf>,
    /// A directory holding another apache-tvm (repeatable): every minimized TVM bug is re-run with it, and
    /// bug.json records per version whether it reproduces (default: the campaign's).
    #[arg(long = "also-tvm", value_name = "DIR")]
    pub also_tvm: Vec<PathBuf>,
    /// Known upstream bugs to label entries with (default: the campaign's, else the project's
    /// data/known-bugs.toml).
    #[arg(long, value_name = "FILE")]
    pub known: Option<PathBuf>,
    /// Per-run time limit in milliseconds (default: the campaign's, else 10000).
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// The inconsistency oracle's tolerance (each flag not given: the campaign's, else the default).
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    /// The campaign's own tolerance, read from its checkpoint.
    #[arg(skip)]
    pub campaign_tolerance: Option<Tolerance>,
    /// At most this many reduction candidates are checked per finding.
    #[arg(long, default_value_t = 2000)]
    pub max_checks: usize,
    /// At most this many seconds of reduction per finding.
    #[arg(long, default_value_t = 120)]
    pub reduce_secs: u64,
}

/// Each `--also-tvm` directory must hold an apache-tvm package (`DIR/tvm`).
pub(super) fn check_also_tvm(dirs: &[PathBuf]) -> anyhow::Result<()> {
    for d in dirs {
        anyhow::ensure!(
            d.join("tvm").join("__init__.py").is_file(),
            "--also-tvm {}: no apache-tvm there (expected {}; scripts/setup.sh installs 0.26.0 into .venv-tvm-0.26.0)",
            d.display(),
            d.join("tvm").join("__init__.py").display()
        );
    }
    Ok(())
}

impl TriageOpts {
    /// Flags not given take the campaign's own settings (from its checkpoint), else the defaults, so that a run
    /// is triaged with the tolerance and time limit it was judged with.
    pub(super) fn with_campaign(mut self, run: &std::path::Path) -> TriageOpts {
        let campaign = crate::campaign::load_checkpoint(run).ok().map(|(s, _, _)| s);
        if let Some(s) = &campaign {
            self.campaign_tolerance = Some(s.tolerance);
            self.timeout_ms = self.timeout_ms.or(Some(s.timeout_ms));
            self.ort.ort_lib = self.ort.ort_lib.clone().or(s.ort_lib.clone());
            self.known = self.known.clone().or(s.known.clone());
            if self.also_ort_libs.is_empty() {
                self.also_ort_libs = s.also_ort_libs.clone();
            }
            if self.also_tvm.is_empty() {
                self.also_tvm = s.also_tvm.clone();
            }
        }
        self
    }

    pub(super) fn tolerance(&self) -> anyhow::Result<Tolerance> {
        self.tolerance.over(self.campaign_tolerance.unwrap_or_default())
    }

    pub(super) fn limits(&self) -> Limits {
        Limits { max_checks: self.max_checks, time: Duration::from_secs(self.reduce_secs) }
    }

    /// The labeler of filed entries: the known-bugs file read and checked, the other ORT builds.
    pub(super) fn labeler(&self) -> anyhow::Result<Labeler> {
        for lib in &self.also_ort_libs {
            anyhow::ensure!(lib.exists(), "--also-ort-lib {} does not exist", lib.display());
        }
        check_also_tvm(&self.also_tvm)?;
        Ok(Labeler::new(KnownBugs::load_or_default(self.known.as_deref())?, &self.also_ort_libs, &self.also_tvm))
    }

    pub(super) fn worker(&self, target: &str) -> anyhow::Result<Worker> {
        let mut spec = WorkerSpec::new(TargetKind::parse(target)?)?;
        spec.ort_lib = self.ort.ort_lib.clone();
        spec.timeout = Duration::from_millis(self.timeout_ms.unwrap_or(10_000));
        Worker::start(spec)
    }
}

#[derive(Args, Debug)]
pub struct TriageArgs {
    /// A campaign's run directory (with findings/).
    pub run: PathBuf,
    /// Triage findings again even if they have triage.json.
    #[arg(long)]
    pub again: bool,
    /// Lanes triaging at once, each with its own worker processes (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub opts: TriageOpts,
}

pub fn run(mut a: TriageArgs) -> anyhow::Result<()> {
    let dirs = crate::finding::finding_dirs(&a.run, !a.again)?;
    a.opts = a.opts.with_campaign(&a.run);
    let oracle = Oracle { tolerance: a.opts.tolerance()? };
    let filer = Box::new(crate::report::entry::Entries { labeler: a.opts.labeler()? });
    let session = triage::session::Session::new(&a.run, oracle.clone(), a.opts.limits(), !a.again, false, filer);
    let lanes = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let backlog = triage::session::Backlog::new(dirs);
    let lanes = lanes.min(backlog.len().max(1));
    let (done, new) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| -> anyhow::Result<()> {
        let lane = || -> anyhow::Result<()> {
            let mut workers: std::collections::BTreeMap<String, Worker> = Default::default();
            let mut semantic = session.semantic();
            while let Some((key, dir)) = backlog.take() {
                let triaged = triage_one(&a, &session, &dir, &mut workers, &mut semantic);
                backlog.done(&key);
                if let Some(f) = triaged? {
                    done.fetch_add(1, Ordering::Relaxed);
                    new.fetch_add(f.all().filter(|f| f.new_bug).count(), Ordering::Relaxed);
                }
            }
            Ok(())
        };
        let handles: Vec<_> = (0..lanes).map(|_| s.spawn(lane)).collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a triage lane panicked"))))
    })?;
    let (done, new) = (done.into_inner(), new.into_inner());
    println!(
        "triaged {done} findings: {new} new entries (bugs/ holds optimizer bugs; other classes have their own folders)"
    );
    let listed = crate::report::index::write(&a.run)?;
    println!("index of {listed} entries by class and culprit: {}", a.run.join("bugs/README.md").display());
    crate::report::page::write(&a.run, false)?;
    println!("campaign page: {}", a.run.join("index.html").display());
    Ok(())
}

/// Triages the finding in `dir` with the lane's worker for its target (started on first use) and prints its line;
/// a finding without one target (cross-target) is left alone. A finding that cannot be triaged is a warning; a
/// worker that cannot start is an error.
fn triage_one(
    a: &TriageArgs,
    session: &triage::session::Session,
    dir: &std::path::Path,
    workers: &mut std::collections::BTreeMap<String, Worker>,
    semantic: &mut triage::classify::Semantic,
) -> anyhow::Result<Option<triage::Filed>> {
    let target = crate::finding::load_meta(dir).map(|m| m.target).unwrap_or_default();
    if target.contains(',') || target.is_empty() {
        return Ok(None);
    }
    if !workers.contains_key(&target) {
        workers.insert(target.clone(), a.opts.worker(&target)?);
    }
    let w = workers.get_mut(&target).expect("inserted");
    match session.triage(dir, w, semantic) {
        Ok(Some(f)) => {
            let t = &f.triage;
            println!(
                "{}: {} {} {} [{} in {} runs] {} -> {} nodes -> {}/{}{}{}",
                dir.file_name().unwrap_or_default().to_string_lossy(),
                if f.new_bug { "NEW" } else { "dup" },
                t.class,
                if t.culprits.is_empty() { "-".to_string() } else { t.culprits.join("+") },
                t.method,
                t.dd_runs,
                t.original_nodes,
                t.nodes,
                t.class.folder(),
                f.signature,
                if t.confirmed { "" } else { " (not confirmed)" },
                upstream_note(&f.bug_dir)
            );
            for m in &f.more {
                let (new, culprits) = (if m.new_bug { "NEW" } else { "dup" }, m.triage.culprits.join("+"));
                println!(
                    "  and {new} {} {culprits} on its own -> {}/{}",
                    m.triage.class,
                    m.triage.class.folder(),
                    m.signature
                );
            }
            Ok(Some(f))
        }
        Ok(None) => Ok(None),
        Err(e) => {
            eprintln!("warning: {}: {e:#}", dir.display());
            Ok(None)
        }
    }
}

/// ` [known: <link> (status)]` and ` [fixed upstream in X]` for a filed entry, from its bug.json.
fn upstream_note(bug_dir: &str) -> String {
    let Ok(rec) = crate::report::record::read(std::path::Path::new(bug_dir)) else { return String::new() };
    let mut s = String::new();
    if rec.upstream.known.is_some() {
        s += &format!(" [{}]", rec.upstream.known_label());
    }
    if let Some(v) = &rec.upstream.fixed_upstream {
        s += &format!(" [fixed upstream in {v}]");
    }
    s
}
