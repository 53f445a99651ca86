//! A fixed set of workers sharing a list of items: each worker is used by one thread at a time, and results
//! come back in item order.

use super::parent::{Worker, WorkerInfo, WorkerSpec};
use std::collections::VecDeque;
use std::sync::Mutex;

/// N workers, each used by one thread at a time.
pub struct Pool {
    workers: Vec<Mutex<Worker>>,
}

impl Pool {
    pub fn start(spec: &WorkerSpec, n: usize) -> anyhow::Result<Pool> {
        let workers =
            (0..n.max(1)).map(|_| Worker::start(spec.clone()).map(Mutex::new)).collect::<anyhow::Result<_>>()?;
        Ok(Pool { workers })
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    pub fn info(&self) -> WorkerInfo {
        self.workers[0].lock().unwrap().info.clone()
    }

    /// Applies `f` to every item, spreading them over the workers; results come back in item order.
    pub fn map<T: Send, R: Send>(&self, items: Vec<T>, f: impl Fn(&mut Worker, T) -> R + Sync) -> Vec<R> {
        let n = items.len();
        let queue = Mutex::new(items.into_iter().enumerate().collect::<VecDeque<_>>());
        let results = Mutex::new((0..n).map(|_| None).collect::<Vec<Option<R>>>());
        std::thread::scope(|s| {
            for w in &self.workers {
                let (queue, results, f) = (&queue, &results, &f);
                s.spawn(move || {
                    let mut worker = w.lock().unwrap();
                    loop {
                        let Some((i, item)) = queue.lock().unwrap().pop_front() else { break };
                        let r = f(&mut worker, item);
                        results.lock().unwrap()[i] = Some(r);
                    }
                });
            }
        });
        results.into_inner().unwrap().into_iter().map(|r| r.expect("every item ran")).collect()
    }
}
