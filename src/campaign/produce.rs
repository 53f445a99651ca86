//! Making tests ahead of the workers: generator threads claim test ids in order, make each test from (campaign
//! seed, id) and put it in a bounded queue the lanes take from, so generation is off the workers' path. Test
//! `i` is made only once every test `<= i - POOL_LAG * stride` is processed (what the seed pool relies on).

use super::execute::{Done, Job};
use super::settings::{Budget, Shard};
use crate::synth::source::{TestSource, POOL_LAG};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// When to stop claiming ids.
pub(super) struct Plan {
    /// The first id to make.
    pub first: u64,
    pub shard: Shard,
    pub budget: Budget,
    /// Testing seconds before this run (a resumed campaign), and when this run started.
    pub prior_elapsed: f64,
    pub start: Instant,
    pub stop: Arc<AtomicBool>,
}

struct State {
    /// The next id to claim.
    to_make: u64,
    /// Every test below this id is processed (fed back to the source).
    processed: u64,
}

struct Shared {
    state: Mutex<State>,
    moved: Condvar,
    live: AtomicUsize,
}

/// The generator threads.
pub(super) struct Producer {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Producer {
    /// Starts `n` generator threads; each claimed id comes back on `done`, through a lane or, when the test
    /// cannot be built, directly as a skipped test.
    pub fn start(
        n: usize,
        source: Arc<dyn TestSource>,
        plan: Plan,
        jobs: SyncSender<Job>,
        done: Sender<Done>,
    ) -> Producer {
        let shared = Arc::new(Shared {
            state: Mutex::new(State { to_make: plan.first, processed: plan.first }),
            moved: Condvar::new(),
            live: AtomicUsize::new(n.max(1)),
        });
        let plan = Arc::new(plan);
        let threads = (0..n.max(1))
            .map(|_| {
                let (shared, source, plan, jobs, done) =
                    (shared.clone(), source.clone(), plan.clone(), jobs.clone(), done.clone());
                std::thread::spawn(move || {
                    generate(&shared, source.as_ref(), &plan, &jobs, &done);
                    shared.live.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        Producer { shared, threads }
    }

    /// Every test below `next` is processed: ids up to `next + POOL_LAG * stride - 1` may be made.
    pub fn processed(&self, next: u64) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if next > st.processed {
            st.processed = next;
            self.shared.moved.notify_all();
        }
    }

    /// Whether generator threads may still claim ids.
    pub fn running(&self) -> bool {
        self.shared.live.load(Ordering::SeqCst) > 0
    }

    /// The first id not claimed (final once no generator runs).
    pub fn end(&self) -> u64 {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner()).to_make
    }

    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn generate(shared: &Shared, source: &dyn TestSource, plan: &Plan, jobs: &SyncSender<Job>, done: &Sender<Done>) {
    let lag = POOL_LAG * plan.shard.count;
    loop {
        let claimed = {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let exhausted = match plan.budget {
                    Budget::Tests(n) => st.to_make >= n,
                    Budget::Seconds(s) => plan.prior_elapsed + plan.start.elapsed().as_secs_f64() >= s,
                };
                if plan.stop.load(Ordering::Relaxed) || exhausted {
                    break None;
                }
                if st.to_make < st.processed + lag {
                    let id = st.to_make;
                    st.to_make = plan.shard.next(id);
                    break Some(id);
                }
                // the seed pool's promise: wait for the campaign to process what this id may draw from
                st = shared.moved.wait_timeout(st, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
            }
        };
        let Some(id) = claimed else { return };
        let t0 = Instant::now();
        let made = source.make(id);
        let gen_sec = t0.elapsed().as_secs_f64();
        let sent = match made {
            Ok(test) => jobs.send(Job { test, gen_sec }).is_ok(),
            // a test that cannot be built is counted and skipped, never fatal
            Err(e) => done.send(Done::skipped(id, format!("{e:#}"), gen_sec)).is_ok(),
        };
        if !sent {
            return;
        }
    }
}
