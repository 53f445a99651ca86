//! Triage during a campaign: one background thread with its own worker takes finding directories as they are
//! filed and triages them ([`crate::triage::session`]: the first of each coarse signature in full, the others
//! attached to its entry by a cheap check, or without a run when its source key says it is the same). Each
//! key's first finding goes first, smaller models first; while the campaign runs the thread takes its share of
//! the time (`--triage-share`), at the end it finishes every finding (unless the campaign is interrupted: then
//! `oatest triage` does the rest).

use crate::compiler::worker::{Worker, WorkerSpec};
use crate::oracle::Oracle;
use crate::report::upstream::Labeler;
use crate::triage::classify::Semantic;
use crate::triage::reduce::Limits;
use crate::triage::session::{Backlog, Session};
use crate::triage::Filed;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

enum Msg {
    /// A finding directory; `first` when it is the first with its coarse signature.
    Finding(PathBuf, bool),
    /// The campaign ended: finish every queued finding, then stop.
    Finish,
}

/// What the thread reports back.
pub enum Report {
    Filed(Filed),
    /// A finding triage has nothing to do with (cross-target: no pass set).
    Skipped,
    Failed(PathBuf, String),
}

pub struct Triager {
    tx: Sender<Msg>,
    pub results: Receiver<Report>,
    thread: Option<JoinHandle<usize>>,
    submitted: u64,
}

impl Triager {
    /// Starts the thread and its worker; `run` is the run directory (bugs/ and the class folders).
    /// `labeler` labels the entries it files (known upstream bugs, other ORT builds). `duty`: the share of its
    /// time the thread works while the campaign runs (0 or 1: no pause; with 0 the worker is expected to run at
    /// idle priority, `spec.background`). `lanes`: how many workers finish the backlog once the campaign ended.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        spec: WorkerSpec,
        run: PathBuf,
        oracle: Oracle,
        limits: Limits,
        labeler: Labeler,
        duty: f64,
        lanes: usize,
        stop: Arc<AtomicBool>,
    ) -> Triager {
        let (tx, rx) = channel::<Msg>();
        let (rtx, results) = channel::<Report>();
        let thread =
            std::thread::spawn(move || serve(spec, run, oracle, limits, labeler, (duty, lanes), rx, rtx, stop));
        Triager { tx, results, thread: Some(thread), submitted: 0 }
    }

    pub fn submit(&mut self, dir: PathBuf, first: bool) {
        self.submitted += 1;
        let _ = self.tx.send(Msg::Finding(dir, first));
    }

    /// How many findings were submitted so far (each comes back as one report, unless left untriaged).
    pub fn submitted(&self) -> u64 {
        self.submitted
    }

    /// Asks the thread to finish every queued finding, without pause; [`Triager::join`] waits for it.
    pub fn finish(&mut self) {
        let _ = self.tx.send(Msg::Finish);
    }

    /// Whether the thread has ended.
    pub fn ended(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Waits for the thread (after [`Triager::finish`]); returns how many findings were left untriaged (the
    /// campaign was interrupted, or its triage worker could not start).
    pub fn join(&mut self) -> usize {
        self.thread.take().map(|t| t.join().unwrap_or(0)).unwrap_or(0)
    }
}

/// The triage thread's queue: (not first, smaller model first, arrival order, dir): each key's first finding
/// before the others, and of each group the smaller models first.
type Queue = BinaryHeap<Reverse<(bool, u64, u64, PathBuf)>>;

/// What the thread has been told so far.
struct Inbox {
    queue: Queue,
    arrivals: u64,
    finishing: bool,
    /// Findings refused because triage gave up on its worker (counted untriaged).
    refused: usize,
}

impl Inbox {
    fn take(&mut self, msg: Msg, refuse: bool) {
        match msg {
            Msg::Finding(_, _) if refuse => self.refused += 1,
            Msg::Finding(dir, first) => {
                // the model's size on disk stands for its size: cheap, and smaller models reduce faster
                let size = std::fs::metadata(dir.join("model.onnx")).map(|m| m.len()).unwrap_or(u64::MAX);
                self.queue.push(Reverse((!first, size, self.arrivals, dir)));
                self.arrivals += 1;
            }
            Msg::Finish => self.finishing = true,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn serve(
    spec: WorkerSpec,
    run: PathBuf,
    oracle: Oracle,
    limits: Limits,
    labeler: Labeler,
    (duty, lanes): (f64, usize),
    rx: Receiver<Msg>,
    tx: Sender<Report>,
    stop: Arc<AtomicBool>,
) -> usize {
    let mut worker: Option<Worker> = None;
    let filer = Box::new(crate::report::entry::Entries { labeler });
    let session = crate::triage::session::Session::new(&run, oracle, limits, true, spec.background, filer);
    let mut semantic = session.semantic();
    let mut inbox = Inbox { queue: BinaryHeap::new(), arrivals: 0, finishing: false, refused: 0 };
    // findings left to `oatest triage`: those whose worker could not start, and every one after the worker
    // failed to start MAX_START_FAILURES times in a row (the target cannot serve triage in this campaign)
    let (mut untriaged, mut start_failures) = (0usize, 0u32);
    let mut pause = Duration::ZERO;
    loop {
        // while the campaign runs, triage takes its share: after `busy` seconds of work it waits
        // busy * (1/duty - 1), taking new findings meanwhile; finishing, it works without pause
        let until = Instant::now() + pause;
        loop {
            let refuse = start_failures >= MAX_START_FAILURES;
            let wait = until.saturating_duration_since(Instant::now());
            let msg = if inbox.queue.is_empty() && !inbox.finishing {
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => return untriaged + inbox.refused,
                }
            } else if !inbox.finishing && !wait.is_zero() {
                match rx.recv_timeout(wait) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => {
                        inbox.finishing = true;
                        break;
                    }
                }
            } else {
                match rx.try_recv() {
                    Ok(m) => m,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        inbox.finishing = true;
                        break;
                    }
                }
            };
            inbox.take(msg, refuse);
        }
        let untriaged_now = untriaged + inbox.refused;
        if inbox.queue.is_empty() {
            if inbox.finishing {
                return untriaged_now;
            }
            continue;
        }
        if stop.load(Ordering::Relaxed) {
            return untriaged_now + inbox.queue.len();
        }
        // the campaign ended: the backlog is finished in lanes, each with its own worker
        if inbox.finishing && lanes > 1 && inbox.queue.len() > 1 && start_failures == 0 {
            let dirs = std::iter::from_fn(|| inbox.queue.pop().map(|Reverse((_, _, _, d))| d)).collect();
            let lane = Lane { session: &session, spec: &spec, tx: &tx, stop: &stop };
            return untriaged_now + lane.finish(lanes, dirs, (worker, semantic));
        }
        let Some(Reverse((_, _, _, dir))) = inbox.queue.pop() else { continue };
        if worker.is_none() {
            match Worker::start(spec.clone()) {
                Ok(w) => {
                    worker = Some(w);
                    start_failures = 0;
                }
                Err(e) => {
                    start_failures += 1;
                    untriaged += 1;
                    let mut why = format!("cannot start a triage worker: {e:#}");
                    if start_failures >= MAX_START_FAILURES {
                        why.push_str(&format!(
                            " ({MAX_START_FAILURES} failed starts in a row: the campaign triages no more; \
                             `oatest triage` does the rest)"
                        ));
                        untriaged += inbox.queue.len();
                        inbox.queue.clear();
                    }
                    if tx.send(Report::Failed(dir, why)).is_err() {
                        return untriaged + inbox.refused + inbox.queue.len();
                    }
                    continue;
                }
            }
        }
        let w = worker.as_mut().expect("started");
        let started = Instant::now();
        let report = match session.triage(&dir, w, &mut semantic) {
            Ok(Some(f)) => Report::Filed(f),
            Ok(None) => Report::Skipped,
            Err(e) => Report::Failed(dir, format!("{e:#}")),
        };
        pause = if duty > 0.0 && duty < 1.0 { started.elapsed().mul_f64(1.0 / duty - 1.0) } else { Duration::ZERO };
        if tx.send(report).is_err() {
            return untriaged + inbox.refused + inbox.queue.len();
        }
    }
}

/// What the lanes finishing a campaign's triage share.
struct Lane<'a> {
    session: &'a Session,
    spec: &'a WorkerSpec,
    tx: &'a Sender<Report>,
    stop: &'a AtomicBool,
}

impl Lane<'_> {
    /// Triages `dirs` (in that order, [`Backlog`]'s rule) in `lanes` threads: the first with the thread's own
    /// worker and semantic reference, the others with fresh ones; returns how many findings were left untriaged.
    fn finish(&self, lanes: usize, dirs: Vec<PathBuf>, own: (Option<Worker>, Semantic)) -> usize {
        let backlog = Backlog::new(dirs);
        let left = AtomicUsize::new(0);
        let own = Mutex::new(Some(own));
        std::thread::scope(|s| {
            for _ in 0..lanes.min(backlog.len()) {
                let taken = own.lock().unwrap_or_else(|e| e.into_inner()).take();
                let (worker, semantic) = taken.unwrap_or_else(|| (None, self.session.semantic()));
                let (backlog, left) = (&backlog, &left);
                s.spawn(move || self.work(backlog, left, worker, semantic));
            }
        });
        left.into_inner()
    }

    /// One lane: takes findings until the backlog is empty.
    fn work(&self, backlog: &Backlog, left: &AtomicUsize, mut worker: Option<Worker>, mut semantic: Semantic) {
        while let Some((key, dir)) = backlog.take() {
            let stopped = self.stop.load(Ordering::Relaxed);
            let started = match &worker {
                None if !stopped => Worker::start(self.spec.clone()).map(|w| worker = Some(w)),
                _ => Ok(()),
            };
            let report = if stopped {
                left.fetch_add(1, Ordering::Relaxed);
                None
            } else if let Err(e) = started {
                left.fetch_add(1, Ordering::Relaxed);
                Some(Report::Failed(dir, format!("cannot start a triage worker: {e:#}")))
            } else {
                let w = worker.as_mut().expect("started");
                Some(match self.session.triage(&dir, w, &mut semantic) {
                    Ok(Some(f)) => Report::Filed(f),
                    Ok(None) => Report::Skipped,
                    Err(e) => Report::Failed(dir, format!("{e:#}")),
                })
            };
            backlog.done(&key);
            if let Some(r) = report {
                let _ = self.tx.send(r);
            }
        }
    }
}

/// Failed starts of the triage worker in a row after which the campaign leaves triage to `oatest triage`.
const MAX_START_FAILURES: u32 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    /// A triage worker that cannot start leaves every finding untriaged, counted, for `oatest triage`; the
    /// thread neither stops at the first failure nor loses the findings filed after it.
    #[test]
    fn findings_whose_triage_worker_cannot_start_are_counted_untriaged() {
        let run = std::env::temp_dir().join(format!("oatest-triager-{}", std::process::id()));
        std::fs::create_dir_all(&run).unwrap();
        let mut spec = WorkerSpec::new(crate::compiler::TargetKind::Tract).unwrap();
        spec.exe = PathBuf::from("/bin/false"); // exits before it greets
        let stop = Arc::new(AtomicBool::new(false));
        let oracle = Oracle { tolerance: Default::default() };
        let mut t = Triager::start(spec, run.clone(), oracle, Limits::default(), Labeler::default(), 0.0, 1, stop);
        for i in 0..5 {
            t.submit(run.join(format!("findings/{i:08}-error")), i == 0);
        }
        let mut failed = 0;
        t.finish();
        let left = t.join();
        while let Ok(r) = t.results.try_recv() {
            failed += matches!(r, Report::Failed(..)) as usize;
        }
        let _ = std::fs::remove_dir_all(&run);
        assert_eq!(left, 5, "every finding is left to oatest triage");
        assert_eq!(failed, MAX_START_FAILURES as usize, "one message per failed start, then none");
    }
}
