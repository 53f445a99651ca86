//! Triage during a campaign: lanes, each a thread with its own worker and semantic reference, take finding
//! directories as they are filed and triage them ([`crate::triage::session`]: the first of each coarse signature
//! in full, the others attached to its entry by a cheap check, or without a run when its source key says it is
//! the same). Each key's first finding goes first, smaller models first, and no two lanes work on one key.
//!
//! While the campaign runs, triage takes a real CPU share ([`Share`], `--triage-share`): a working lane borrows
//! a campaign lane, which pauses, so the share holds however many jobs share the cores; when the backlog would
//! take longer than [`BEHIND_SEC`] to finish, more lanes work, without pause. At the end every finding is
//! finished in a lane per core (unless the campaign is interrupted: then `oatest triage` does the rest).

use crate::compiler::worker::{cpu_time, thread_cpu_time, Worker, WorkerSpec};
use crate::oracle::Oracle;
use crate::report::upstream::Labeler;
use crate::triage::classify::Semantic;
use crate::triage::reduce::Limits;
use crate::triage::session::Session;
use crate::triage::Filed;
use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the lanes report back.
pub enum Report {
    /// Filed, with the finding's source key.
    Filed(Filed, String),
    /// A finding triage has nothing to do with (cross-target: no pass set).
    Skipped,
    Failed(PathBuf, String),
}

/// The estimated time to finish the backlog (in the finishing lanes) above which triage is behind and takes
/// more lanes while the campaign runs.
pub const BEHIND_SEC: f64 = 30.0;

/// How triage shares the CPU with a campaign of `jobs` lanes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share {
    /// Lanes that triage while the campaign runs and triage keeps up: the share times the jobs, at least one.
    pub steady: usize,
    /// The share of its time a steady lane works (the rest it pauses; 1: no pause).
    pub duty: f64,
    /// Lanes that triage, without pause, while triage is behind: twice the steady ones, at most half the jobs.
    pub behind: usize,
    /// Lanes that finish the backlog once the campaign ended: one per job, at most one per core.
    pub finishing: usize,
    /// Whether a working lane pauses a campaign lane: not with a share of 0 (triage then takes idle CPU only).
    pub borrow: bool,
}

impl Share {
    pub fn new(share: f64, jobs: usize, cores: usize) -> Share {
        let jobs = jobs.max(1);
        let finishing = jobs.min(cores.max(1));
        if share <= 0.0 {
            return Share { steady: 1, duty: 1.0, behind: 1, finishing, borrow: false };
        }
        let wanted = share.min(1.0) * jobs as f64;
        let steady = (wanted.ceil() as usize).clamp(1, jobs);
        let duty = (wanted / steady as f64).min(1.0);
        let behind = (2 * steady).min((jobs / 2).max(1)).max(steady);
        Share { steady, duty, behind, finishing, borrow: true }
    }

    fn lanes(&self) -> usize {
        self.steady.max(self.behind).max(self.finishing)
    }
}

/// The findings waiting for triage and what the lanes share about them.
#[derive(Default)]
struct State {
    /// (not the key's first, model size, arrival, source key, dir): each key's first finding before the
    /// others, and of each group the smaller models first.
    queue: BTreeSet<(bool, u64, u64, String, PathBuf)>,
    /// Source keys a lane is triaging now.
    busy: HashSet<String>,
    arrivals: u64,
    /// The campaign ended: every lane works, without pause, until the queue is empty.
    finishing: bool,
    /// Triage gave up on its worker: findings are counted untriaged, not queued.
    refusing: bool,
    untriaged: usize,
    start_failures: u32,
    /// CPU seconds the triaged findings took (lane thread, worker, semantic reference), and how many.
    cost: (f64, u64),
}

impl State {
    /// Seconds the queue would take to finish in `lanes` lanes, at the mean cost so far (1 s before any).
    fn estimate(&self, lanes: usize) -> f64 {
        let mean = if self.cost.1 == 0 { 1.0 } else { self.cost.0 / self.cost.1 as f64 };
        mean * self.queue.len() as f64 / lanes.max(1) as f64
    }
}

/// The lanes' common ground.
struct Pending {
    state: Mutex<State>,
    changed: Condvar,
    share: Share,
    /// Campaign lanes paused now (a working lane's borrow); the campaign's lane `i` pauses while `i` is below it.
    borrowed: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Pending {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next finding for lane `lane`, once it may work (None: nothing more to do); whether it borrowed a
    /// campaign lane for it.
    fn take(&self, lane: usize) -> Option<(String, PathBuf, bool)> {
        let mut st = self.lock();
        loop {
            if self.stop.load(Ordering::Relaxed) || (st.finishing && st.queue.is_empty()) {
                return None;
            }
            let active = if st.finishing {
                self.share.finishing
            } else if st.estimate(self.share.finishing) > BEHIND_SEC {
                self.share.behind
            } else {
                self.share.steady
            };
            if lane < active {
                let free = st.queue.iter().find(|(_, _, _, k, _)| k.is_empty() || !st.busy.contains(k)).cloned();
                if let Some(item) = free {
                    st.queue.remove(&item);
                    let (_, _, _, key, dir) = item;
                    st.busy.insert(key.clone());
                    let borrow = self.share.borrow && !st.finishing;
                    if borrow {
                        self.borrowed.fetch_add(1, Ordering::SeqCst);
                    }
                    return Some((key, dir, borrow));
                }
            }
            st = self.changed.wait_timeout(st, Duration::from_millis(200)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// The lane finished the finding of `key`, which took `cost` seconds of CPU.
    fn done(&self, key: &str, cost: f64, borrowed: bool) {
        let mut st = self.lock();
        st.busy.remove(key);
        st.cost.0 += cost;
        st.cost.1 += 1;
        if borrowed {
            self.borrowed.fetch_sub(1, Ordering::SeqCst);
        }
        drop(st);
        self.changed.notify_all();
    }

    /// A steady lane's pause after working `busy`: busy * (1/duty - 1), cut short when the campaign ends or
    /// triage falls behind.
    fn pause(&self, busy: Duration) {
        let duty = self.share.duty;
        if duty <= 0.0 || duty >= 1.0 {
            return;
        }
        let until = Instant::now() + busy.mul_f64(1.0 / duty - 1.0);
        let mut st = self.lock();
        while !st.finishing && !self.stop.load(Ordering::Relaxed) && st.estimate(self.share.finishing) <= BEHIND_SEC {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            st = self
                .changed
                .wait_timeout(st, left.min(Duration::from_millis(200)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

pub struct Triager {
    pending: Arc<Pending>,
    pub results: Receiver<Report>,
    lanes: Vec<JoinHandle<()>>,
    submitted: u64,
}

impl Triager {
    /// Starts the lanes (each starts its worker at its first finding); `run` is the run directory (bugs/ and
    /// the class folders), `labeler` labels the entries filed (known upstream bugs, other ORT builds), `share`
    /// says how many lanes work when, and `borrowed` counts the campaign lanes paused for them.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        spec: WorkerSpec,
        run: PathBuf,
        oracle: Oracle,
        limits: Limits,
        labeler: Labeler,
        share: Share,
        borrowed: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
    ) -> Triager {
        let (tx, results) = channel::<Report>();
        let filer = Box::new(crate::report::entry::Entries { labeler });
        let session = Arc::new(Session::new(&run, oracle, limits, true, spec.background, filer));
        let pending = Arc::new(Pending { state: Mutex::default(), changed: Condvar::new(), share, borrowed, stop });
        let lanes = (0..share.lanes())
            .map(|i| {
                let lane = Lane { index: i, pending: pending.clone(), session: session.clone(), spec: spec.clone() };
                let tx = tx.clone();
                std::thread::spawn(move || lane.work(&tx))
            })
            .collect();
        Triager { pending, results, lanes, submitted: 0 }
    }

    /// Queues a finding directory; `first`: the first of its source key.
    pub fn submit(&mut self, dir: PathBuf, first: bool) {
        self.submitted += 1;
        // the model's size on disk stands for its size: cheap, and smaller models reduce faster
        let size = std::fs::metadata(dir.join("model.onnx")).map(|m| m.len()).unwrap_or(u64::MAX);
        let key = crate::finding::load_meta(&dir).map(|m| if m.key.is_empty() { m.signature } else { m.key });
        let mut st = self.pending.lock();
        if st.refusing {
            st.untriaged += 1;
            return;
        }
        let arrival = st.arrivals;
        st.arrivals += 1;
        st.queue.insert((!first, size, arrival, key.unwrap_or_default(), dir));
        drop(st);
        self.pending.changed.notify_all();
    }

    /// How many findings were submitted so far (each comes back as one report, unless left untriaged).
    pub fn submitted(&self) -> u64 {
        self.submitted
    }

    /// Findings waiting for a lane.
    pub fn backlog(&self) -> usize {
        self.pending.lock().queue.len()
    }

    /// Asks the lanes to finish every queued finding, without pause; [`Triager::join`] waits for them.
    pub fn finish(&mut self) {
        self.pending.lock().finishing = true;
        self.pending.changed.notify_all();
    }

    /// Whether every lane has ended.
    pub fn ended(&self) -> bool {
        self.lanes.iter().all(|t| t.is_finished())
    }

    /// Waits for the lanes (after [`Triager::finish`]); returns how many findings were left untriaged (the
    /// campaign was interrupted, or the triage worker could not start).
    pub fn join(&mut self) -> usize {
        for t in self.lanes.drain(..) {
            let _ = t.join();
        }
        let st = self.pending.lock();
        st.untriaged + st.queue.len()
    }
}

/// One triage lane.
struct Lane {
    index: usize,
    pending: Arc<Pending>,
    session: Arc<Session>,
    spec: WorkerSpec,
}

impl Lane {
    /// Takes findings until there are no more, starting its worker and semantic reference at the first.
    fn work(&self, tx: &Sender<Report>) {
        let (mut worker, mut semantic): (Option<Worker>, Option<Semantic>) = (None, None);
        while let Some((key, dir, borrowed)) = self.pending.take(self.index) {
            let started = Instant::now();
            if worker.is_none() {
                if let Err(why) = self.start(&mut worker) {
                    self.pending.done(&key, 0.0, borrowed);
                    let _ = tx.send(Report::Failed(dir, why));
                    continue;
                }
            }
            let (w, s) = (worker.as_mut().expect("started"), semantic.get_or_insert_with(|| self.session.semantic()));
            let cpu = |w: &Worker, s: &Semantic| {
                let of = |pid: Option<u32>| pid.and_then(cpu_time).unwrap_or_default();
                (of(w.pid()) + of(s.pid()) + thread_cpu_time()).as_secs_f64()
            };
            let before = cpu(w, s);
            let report = match self.session.triage(&dir, w, s) {
                Ok(Some(f)) => Report::Filed(f, key.clone()),
                Ok(None) => Report::Skipped,
                Err(e) => Report::Failed(dir, format!("{e:#}")),
            };
            // (a worker replaced during the finding counts from zero: the estimate errs low, never negative)
            self.pending.done(&key, (cpu(w, s) - before).max(0.0), borrowed);
            if tx.send(report).is_err() {
                return;
            }
            self.pending.pause(started.elapsed());
        }
    }

    /// Starts the lane's worker, or says why not; after [`MAX_START_FAILURES`] failed starts in a row (over
    /// every lane) the campaign triages no more: every queued and later finding is left to `oatest triage`.
    fn start(&self, worker: &mut Option<Worker>) -> Result<(), String> {
        match Worker::start(self.spec.clone()) {
            Ok(w) => {
                *worker = Some(w);
                self.pending.lock().start_failures = 0;
                Ok(())
            }
            Err(e) => {
                let mut st = self.pending.lock();
                st.start_failures += 1;
                st.untriaged += 1;
                let mut why = format!("cannot start a triage worker: {e:#}");
                if st.start_failures >= MAX_START_FAILURES {
                    why.push_str(&format!(
                        " ({MAX_START_FAILURES} failed starts in a row: the campaign triages no more; \
                         `oatest triage` does the rest)"
                    ));
                    st.untriaged += st.queue.len();
                    st.queue.clear();
                    st.refusing = true;
                }
                Err(why)
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
    /// lanes neither stop at the first failure nor lose the findings filed after it.
    #[test]
    fn findings_whose_triage_worker_cannot_start_are_counted_untriaged() {
        let run = std::env::temp_dir().join(format!("oatest-triager-{}", std::process::id()));
        std::fs::create_dir_all(&run).unwrap();
        let mut spec = WorkerSpec::new(crate::compiler::TargetKind::Tract).unwrap();
        spec.exe = PathBuf::from("/bin/false"); // exits before it greets
        let stop = Arc::new(AtomicBool::new(false));
        let oracle = Oracle { tolerance: Default::default() };
        let (share, borrowed) = (Share::new(0.0, 1, 1), Arc::new(AtomicUsize::new(0)));
        let mut t =
            Triager::start(spec, run.clone(), oracle, Limits::default(), Labeler::default(), share, borrowed, stop);
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

    /// The share in lanes: one lane in eight at 16 jobs (two lanes, no pause), a quarter of one lane's time at
    /// 2 jobs; twice the lanes, at most half the jobs, when behind; idle CPU only with a share of 0.
    #[test]
    fn the_share_is_lanes_and_a_duty() {
        let s = Share::new(0.125, 16, 16);
        assert_eq!((s.steady, s.duty, s.behind, s.finishing, s.borrow), (2, 1.0, 4, 16, true));
        let s = Share::new(0.125, 16, 2);
        assert_eq!((s.steady, s.behind, s.finishing), (2, 4, 2));
        let s = Share::new(0.125, 2, 2);
        assert_eq!((s.steady, s.duty, s.behind, s.finishing), (1, 0.25, 1, 2));
        let s = Share::new(0.125, 1, 2);
        assert_eq!((s.steady, s.duty, s.behind, s.finishing), (1, 0.125, 1, 1));
        let s = Share::new(0.0, 8, 8);
        assert_eq!((s.steady, s.behind, s.borrow), (1, 1, false));
        assert_eq!(Share::new(0.125, 64, 64).steady, 8);
    }

    /// Lanes borrow a campaign lane while they work and give it back when done; no two lanes take one key.
    #[test]
    fn a_working_lane_borrows_a_campaign_lane_and_keys_stay_apart() {
        let share = Share::new(0.25, 8, 8); // two steady lanes
        let borrowed = Arc::new(AtomicUsize::new(0));
        let pending = Pending {
            state: Mutex::default(),
            changed: Condvar::new(),
            share,
            borrowed: borrowed.clone(),
            stop: Arc::new(AtomicBool::new(false)),
        };
        for (i, key) in ["a", "a", "b"].iter().enumerate() {
            pending.lock().queue.insert((i > 0, 1, i as u64, key.to_string(), PathBuf::from(i.to_string())));
        }
        let (k0, d0, b0) = pending.take(0).unwrap();
        assert_eq!((k0.as_str(), d0, b0), ("a", PathBuf::from("0"), true));
        let (k1, _, b1) = pending.take(1).unwrap();
        assert_eq!((k1.as_str(), b1), ("b", true), "the other lane skips the busy key");
        assert_eq!(borrowed.load(Ordering::SeqCst), 2);
        pending.done("a", 0.5, true);
        pending.done("b", 0.5, true);
        assert_eq!(borrowed.load(Ordering::SeqCst), 0);
        pending.lock().finishing = true;
        let (k, _, b) = pending.take(0).unwrap();
        assert_eq!((k.as_str(), b), ("a", false), "finishing lanes borrow nothing: the campaign's lanes are done");
    }
}
