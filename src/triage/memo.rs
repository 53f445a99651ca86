//! The outcomes a finding's triage already has: the same model with the same inputs under the same configuration,
//! run again in the same worker process, gives the same outcome (a culprit search and the checks after it, the
//! reference of each reduction candidate, often ask twice). Kept per [`super::Reproducer`], emptied whenever its
//! worker is replaced by a fresh process (the runs that must happen there do). A crash, a hang or an exhausted
//! memory is never kept: the worker died, and the next run is in another process.

use super::Reproducer;
use crate::compiler::{Config, Outcome, Status};
use crate::graph::NamedTensor;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

impl Reproducer<'_> {
    /// Runs `model` under `config` with the finding's worker, counting the run; an identical earlier run in the
    /// same worker process answers from the memo instead, and is not counted.
    pub fn run(&mut self, model: &[u8], feeds: &[NamedTensor], config: &Config) -> Outcome {
        if let Some(o) = self.memo.get(model, feeds, config) {
            return o;
        }
        self.runs += 1;
        if let Some(saving) = self.saving(config) {
            // the run writes its optimized graph (a dangling value's search): not answered from the memo
            return self.worker.run(model, feeds, &saving);
        }
        let start = std::time::Instant::now();
        let o = self.worker.run(model, feeds, config);
        if std::env::var_os(TRACE_RUNS).is_some() {
            let ms = start.elapsed().as_secs_f64() * 1e3;
            eprintln!("oatest: triage run: {ms:.1} ms, {config}, {}, {} bytes", o.status.kind(), model.len());
        }
        self.memo.put(model, feeds, config, &o);
        o
    }

    /// Replaces the worker by a fresh process, whose runs start with an empty memo.
    pub fn fresh(&mut self) {
        self.worker.fresh();
        self.memo.clear();
    }
}

/// Set (to anything), every run a triage makes is written to standard error: its time, configuration, how it ended
/// and the size of what it ran (where a finding's triage spends its time).
pub const TRACE_RUNS: &str = "OATEST_TRACE_RUNS";

/// Outcomes kept per finding, at most.
const MAX_ENTRIES: usize = 4096;
/// An outcome whose outputs are larger is not kept (bytes).
const MAX_OUTPUT_BYTES: usize = 1 << 20;

#[derive(Default)]
pub struct Memo {
    outcomes: HashMap<(u64, usize, String), Outcome>,
    /// Runs answered from the memo.
    pub hits: usize,
}

impl Memo {
    fn key(model: &[u8], feeds: &[NamedTensor], config: &Config) -> (u64, usize, String) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        model.hash(&mut h);
        for f in feeds {
            (&f.name, &f.tensor).hash(&mut h);
        }
        let config = serde_json::to_string(config).unwrap_or_else(|_| format!("{config:?}"));
        (h.finish(), model.len(), config)
    }

    /// The outcome of an earlier identical run, if any.
    pub fn get(&mut self, model: &[u8], feeds: &[NamedTensor], config: &Config) -> Option<Outcome> {
        let o = self.outcomes.get(&Self::key(model, feeds, config)).cloned();
        self.hits += o.is_some() as usize;
        o
    }

    /// Keeps `outcome` of a run (unless the worker died in it, or it is too large to keep).
    pub fn put(&mut self, model: &[u8], feeds: &[NamedTensor], config: &Config, outcome: &Outcome) {
        let died = matches!(outcome.status, Status::Crash { .. } | Status::Timeout { .. } | Status::Oom { .. });
        let bytes: usize = outcome.outputs.iter().map(|t| t.tensor.raw().map_or(0, |r| r.len())).sum();
        if died || bytes > MAX_OUTPUT_BYTES || self.outcomes.len() >= MAX_ENTRIES {
            return;
        }
        self.outcomes.insert(Self::key(model, feeds, config), outcome.clone());
    }

    /// Forgets every outcome (the worker is a fresh process now).
    pub fn clear(&mut self) {
        self.outcomes.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;
    use crate::compiler::{Config, Outcome, Status};
    use crate::graph::{NamedTensor, Tensor};

    fn feeds(x: f32) -> Vec<NamedTensor> {
        vec![NamedTensor { name: "x".into(), tensor: Tensor::from_f32(&[1], &[x]) }]
    }

    #[test]
    fn only_the_same_model_inputs_and_configuration_hit_and_deaths_are_never_kept() {
        let mut m = Memo::default();
        let all = Config::parse("all").unwrap();
        let ok = Outcome::failed(&all, Status::Ok, 1.0);
        m.put(b"model", &feeds(1.0), &all, &ok);
        assert!(m.get(b"model", &feeds(1.0), &all).is_some());
        assert!(m.get(b"model", &feeds(2.0), &all).is_none(), "other input values");
        assert!(m.get(b"other", &feeds(1.0), &all).is_none(), "another model");
        let mut fewer = all.clone();
        fewer.disabled.push("FuseOps".into());
        assert!(m.get(b"model", &feeds(1.0), &fewer).is_none(), "another configuration");
        assert_eq!(m.hits, 1);
        let crash = Outcome::failed(&fewer, Status::Crash { signal: Some(11), message: String::new() }, 1.0);
        m.put(b"model", &feeds(1.0), &fewer, &crash);
        assert!(m.get(b"model", &feeds(1.0), &fewer).is_none(), "a crash is run again");
        m.clear();
        assert!(m.get(b"model", &feeds(1.0), &all).is_none(), "a fresh process runs everything again");
    }
}
