//! Campaign statistics: what stats.json holds, updated from each processed test in test-id order.

use crate::compiler::Outcome;
use crate::oracle::{Judgement, Symptom};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub target: String,
    pub target_version: String,
    pub seed: u64,
    /// Tests the sources were asked for (including ones that failed to build).
    pub tests_generated: u64,
    /// Tests whose reference (unoptimized) configuration ran.
    pub tests_valid: u64,
    /// Tests run under every configuration.
    pub tests_executed: u64,
    /// tests_valid / tests_executed.
    pub validity_rate: f64,
    pub tests_per_sec: f64,
    /// Share of wall time spent making tests.
    pub gen_time_share: f64,
    /// For each pass, in how many tests it fired (in any configuration).
    pub passes_fired: BTreeMap<String, u64>,
    /// Share of tests carrying a target pass in which that pass fired; null until tests carry target passes.
    pub trigger_rate: Option<f64>,
    /// Tests with at least one verdict.
    pub findings_raw: u64,
    /// Distinct signatures among them.
    pub findings_unique: u64,
    /// Raw findings by their primary symptom.
    pub by_symptom: BTreeMap<String, u64>,
    pub elapsed_sec: f64,
    /// Seconds spent after the last test finished, completing the triage of each signature's first finding
    /// (not part of the testing time that `tests_per_sec` divides by).
    #[serde(default)]
    pub triage_finish_sec: f64,
    // --- beyond the required fields ---
    pub gen_time_sec: f64,
    /// Tests whose source failed to build them.
    pub gen_failures: u64,
    /// Why invalid tests were invalid (named unsupported filters, `reference-error`, ...).
    pub invalid_reasons: BTreeMap<String, u64>,
    /// The first few reference-error messages, to see what makes tests invalid.
    pub invalid_examples: Vec<String>,
    /// Inconsistencies dropped because a re-run of the reference differed from the first run.
    pub nondeterministic: u64,
    /// Inconsistencies that did not reproduce on a re-run.
    pub flaky: u64,
    pub tests_with_target_pass: u64,
    pub target_pass_fired: u64,
    /// For each target pass: [tests carrying it, tests in which it fired].
    pub trigger_by_pass: BTreeMap<String, [u64; 2]>,
    /// signature -> number of raw findings with it.
    pub signatures: BTreeMap<String, u64>,
    /// Findings triaged during the campaign (culprits, reduction).
    #[serde(default)]
    pub findings_triaged: u64,
    /// Distinct optimizer bugs among them (bugs/): signatures from target, symptom, culprit passes and
    /// normalized message.
    #[serde(default)]
    pub bugs: u64,
    /// Of the triaged findings, those attached to an existing entry by a cheap check (not triaged in full).
    #[serde(default)]
    pub findings_attached: u64,
    /// Findings left untriaged when the campaign ended (0 unless it was interrupted; `oatest triage` does them).
    #[serde(default)]
    pub findings_untriaged: u64,
    /// Triaged findings by class (optimizer, reference, precision, widened, nonfinite, undecided, unattributed).
    #[serde(default)]
    pub triaged_by_class: BTreeMap<String, u64>,
    /// Distinct entries by class: `optimizer` = bugs/, the others their class folders.
    #[serde(default)]
    pub entries_by_class: BTreeMap<String, u64>,
    /// (elapsed_sec, tests_executed) samples, for the throughput plot.
    pub timeline: Vec<(f64, u64)>,
}

/// How many invalid tests a campaign keeps as examples.
pub const INVALID_EXAMPLES: usize = 10;

impl Stats {
    pub fn new(target: &str, version: &str, seed: u64) -> Stats {
        let mut s = Stats { target: target.into(), target_version: version.into(), seed, ..Default::default() };
        for sym in Symptom::ALL {
            s.by_symptom.insert(sym.name().into(), 0);
        }
        s
    }

    /// Counts one executed test; true when it is one of the first [`INVALID_EXAMPLES`] invalid tests (whose
    /// message `invalid_examples` keeps, and which the campaign saves under `invalid/`).
    pub fn record(&mut self, id: u64, outcomes: &[Outcome], j: &Judgement, target_pass: Option<&str>) -> bool {
        self.tests_executed += 1;
        let mut example = false;
        if j.valid {
            self.tests_valid += 1;
        } else if let Some(r) = &j.invalid_reason {
            *self.invalid_reasons.entry(r.clone()).or_default() += 1;
            if self.invalid_examples.len() < INVALID_EXAMPLES {
                if let Some(o) = outcomes.first() {
                    let message: String = o.status.message().chars().take(300).collect();
                    self.invalid_examples.push(format!("test {id}: {message}"));
                    example = true;
                }
            }
        }
        let mut fired: Vec<&str> = outcomes.iter().flat_map(|o| o.passes_fired.iter().map(String::as_str)).collect();
        fired.sort_unstable();
        fired.dedup();
        for p in &fired {
            *self.passes_fired.entry(p.to_string()).or_default() += 1;
        }
        if let Some(tp) = target_pass {
            self.tests_with_target_pass += 1;
            let e = self.trigger_by_pass.entry(tp.to_string()).or_default();
            e[0] += 1;
            if fired.contains(&tp) {
                self.target_pass_fired += 1;
                e[1] += 1;
            }
        }
        example
    }

    /// Counts one finding with its primary symptom and signature.
    pub fn record_finding(&mut self, symptom: Symptom, signature: &str) {
        self.findings_raw += 1;
        *self.by_symptom.entry(symptom.name().into()).or_default() += 1;
        *self.signatures.entry(signature.into()).or_default() += 1;
        self.findings_unique = self.signatures.len() as u64;
    }

    /// Recomputes the derived rates for `elapsed` seconds of campaign time.
    pub fn refresh(&mut self, elapsed: f64) {
        self.elapsed_sec = elapsed;
        self.validity_rate =
            if self.tests_executed > 0 { self.tests_valid as f64 / self.tests_executed as f64 } else { 0.0 };
        self.tests_per_sec = if elapsed > 0.0 { self.tests_executed as f64 / elapsed } else { 0.0 };
        self.gen_time_share = if elapsed > 0.0 { (self.gen_time_sec / elapsed).min(1.0) } else { 0.0 };
        self.trigger_rate = (self.tests_with_target_pass > 0)
            .then(|| self.target_pass_fired as f64 / self.tests_with_target_pass as f64);
    }

    /// Adds a throughput sample (bounded: thinned to at most 2000 points).
    pub fn sample(&mut self, elapsed: f64) {
        self.timeline.push((elapsed, self.tests_executed));
        if self.timeline.len() > 2000 {
            self.timeline = self.timeline.iter().step_by(2).copied().collect();
        }
    }
}
