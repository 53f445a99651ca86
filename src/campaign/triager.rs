//! Triage during a campaign: one background thread with its own worker takes finding directories as they are
//! filed and triages them ([`crate::triage::session`]: the first of each coarse signature in full, the others
//! attached to its entry by a cheap check). First findings go first; at the end of the campaign the thread
//! finishes every finding (unless the campaign is interrupted: then `oatest triage` does the rest).

use crate::compiler::worker::{Worker, WorkerSpec};
use crate::oracle::Oracle;
use crate::triage::reduce::Limits;
use crate::triage::upstream::Labeler;
use crate::triage::Filed;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

enum Msg {
    /// A finding directory; `first` when it is the first with its coarse signature.
    Finding(PathBuf, bool),
    /// The campaign ended: finish every queued finding, then stop.
    Finish,
}

/// What the thread reports back.
pub enum Report {
    Filed(Filed),
    Failed(PathBuf, String),
}

pub struct Triager {
    tx: Sender<Msg>,
    pub results: Receiver<Report>,
    thread: Option<JoinHandle<usize>>,
}

impl Triager {
    /// Starts the thread and its worker; `run` is the run directory (bugs/ and the class folders).
    /// `labeler` labels the entries it files (known upstream bugs, other ORT builds).
    pub fn start(
        spec: WorkerSpec,
        run: PathBuf,
        oracle: Oracle,
        limits: Limits,
        labeler: Labeler,
        stop: Arc<AtomicBool>,
    ) -> Triager {
        let (tx, rx) = channel::<Msg>();
        let (rtx, results) = channel::<Report>();
        let thread = std::thread::spawn(move || serve(spec, run, oracle, limits, labeler, rx, rtx, stop));
        Triager { tx, results, thread: Some(thread) }
    }

    pub fn submit(&self, dir: PathBuf, first: bool) {
        let _ = self.tx.send(Msg::Finding(dir, first));
    }

    /// Asks the thread to finish every queued finding and waits for it; returns how many findings were left
    /// untriaged (the campaign was interrupted, or its triage worker could not start).
    pub fn finish(&mut self) -> usize {
        let _ = self.tx.send(Msg::Finish);
        self.thread.take().map(|t| t.join().unwrap_or(0)).unwrap_or(0)
    }
}

fn serve(
    spec: WorkerSpec,
    run: PathBuf,
    oracle: Oracle,
    limits: Limits,
    labeler: Labeler,
    rx: Receiver<Msg>,
    tx: Sender<Report>,
    stop: Arc<AtomicBool>,
) -> usize {
    let mut worker: Option<Worker> = None;
    let mut session =
        crate::triage::session::Session::new(&run, oracle, limits, true, spec.background).with_labeler(labeler);
    // (not first, arrival order, dir): firsts before duplicates, each in filing order
    let mut queue: BinaryHeap<Reverse<(bool, u64, PathBuf)>> = BinaryHeap::new();
    let (mut arrivals, mut finishing) = (0u64, false);
    // findings left to `oatest triage`: those whose worker could not start, and every one after the worker
    // failed to start MAX_START_FAILURES times in a row (the target cannot serve triage in this campaign)
    let (mut untriaged, mut start_failures) = (0usize, 0u32);
    loop {
        loop {
            let msg = if queue.is_empty() && !finishing {
                match rx.recv() {
                    Ok(m) => m,
                    Err(_) => return untriaged,
                }
            } else {
                match rx.try_recv() {
                    Ok(m) => m,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        finishing = true;
                        break;
                    }
                }
            };
            match msg {
                Msg::Finding(_, _) if start_failures >= MAX_START_FAILURES => untriaged += 1,
                Msg::Finding(dir, first) => {
                    queue.push(Reverse((!first, arrivals, dir)));
                    arrivals += 1;
                }
                Msg::Finish => finishing = true,
            }
        }
        let next = queue.peek().map(|_| ());
        match next {
            None if finishing => return untriaged,
            None => continue,
            _ if stop.load(Ordering::Relaxed) => return untriaged + queue.len(),
            _ => {}
        }
        let Some(Reverse((_, _, dir))) = queue.pop() else { continue };
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
                        untriaged += queue.len();
                        queue.clear();
                    }
                    if tx.send(Report::Failed(dir, why)).is_err() {
                        return untriaged + queue.len();
                    }
                    continue;
                }
            }
        }
        let w = worker.as_mut().expect("started");
        let report = match session.triage(&dir, w) {
            Ok(Some(f)) => Report::Filed(f),
            Ok(None) => continue,
            Err(e) => Report::Failed(dir, format!("{e:#}")),
        };
        if tx.send(report).is_err() {
            return untriaged + queue.len();
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
        let mut t = Triager::start(spec, run.clone(), oracle, Limits::default(), Labeler::default(), stop);
        for i in 0..5 {
            t.submit(run.join(format!("findings/{i:08}-error")), i == 0);
        }
        let mut failed = 0;
        let left = t.finish();
        while let Ok(r) = t.results.try_recv() {
            failed += matches!(r, Report::Failed(..)) as usize;
        }
        let _ = std::fs::remove_dir_all(&run);
        assert_eq!(left, 5, "every finding is left to oatest triage");
        assert_eq!(failed, MAX_START_FAILURES as usize, "one message per failed start, then none");
    }
}
