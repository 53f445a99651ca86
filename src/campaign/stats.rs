//! Campaign statistics: what stats.json holds, updated from each processed test in test-id order.

use crate::compiler::Outcome;
use crate::finding::exemplars::KeyCount;
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
    /// Share of the workers' time spent waiting for a test to be made: the lanes' waits for the next test
    /// (`worker_wait_sec`) over the lanes' testing time (`worker_lane_sec`: lanes x testing wall time). Tests
    /// are made ahead of the workers by generator threads, so this is how much generation still holds them up.
    pub gen_time_share: f64,
    /// For each pass, in how many tests it fired (in any configuration).
    pub passes_fired: BTreeMap<String, u64>,
    /// For each pair of passes (`A+B`, names in order), in how many tests both fired.
    #[serde(default)]
    pub pass_pairs: BTreeMap<String, u64>,
    /// How many distinct pass pairs fired together in some test (the keys of `pass_pairs`).
    #[serde(default)]
    pub pass_pairs_distinct: u64,
    /// For each pass, the campaign time (seconds) at which a test first fired it.
    #[serde(default)]
    pub first_fired_sec: BTreeMap<String, f64>,
    /// Share of tests carrying a target pass in which that pass fired (near misses apart); null until tests carry
    /// target passes.
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
    /// Time the generator threads spent making tests (beside the workers, not on their path: see
    /// `gen_time_share`).
    pub gen_time_sec: f64,
    /// Seconds the lanes (one per job) waited for a test to run, summed over lanes.
    #[serde(default)]
    pub worker_wait_sec: f64,
    /// Lanes x testing wall time, in seconds: the denominator of `gen_time_share`.
    #[serde(default)]
    pub worker_lane_sec: f64,
    /// CPU time of the fuzzer process itself (generation, IPC, oracle, findings, stats; every thread).
    #[serde(default)]
    pub fuzzer_cpu_sec: f64,
    /// CPU time of the campaign's worker processes, from their own accounting.
    #[serde(default)]
    pub worker_cpu_sec: f64,
    /// Of `worker_cpu_sec`, the part inside the target (ORT: session creation and run).
    #[serde(default)]
    pub worker_target_cpu_sec: f64,
    /// Worker processes replaced by fresh ones, by reason (`tests`: the --recycle-tests budget, `memory`: the
    /// --recycle-mb budget).
    #[serde(default)]
    pub workers_recycled: BTreeMap<String, u64>,
    /// Largest resident set size, in MiB: of the fuzzer process (its peak, from getrusage), and of any one worker
    /// process (read from /proc after each test).
    #[serde(default)]
    pub fuzzer_rss_max_mb: f64,
    #[serde(default)]
    pub worker_rss_max_mb: f64,
    /// Tests whose source failed to build them.
    pub gen_failures: u64,
    /// Optimized graphs ONNX Runtime saved for passing tests that went back into the seed pool.
    #[serde(default)]
    pub optimized_fed: u64,
    /// Why invalid tests were invalid (named unsupported filters, `reference-error`, ...).
    pub invalid_reasons: BTreeMap<String, u64>,
    /// The first few reference-error messages, to see what makes tests invalid.
    pub invalid_examples: Vec<String>,
    /// Inconsistencies dropped because a re-run of the reference differed from the first run.
    pub nondeterministic: u64,
    /// Inconsistencies that did not reproduce on a re-run.
    pub flaky: u64,
    /// Tests carrying a target pass, near misses apart, and those in which it fired.
    pub tests_with_target_pass: u64,
    pub target_pass_fired: u64,
    /// Varied tests whose target pass did not fire (`--vary`): the pass refused the variant, which is counted
    /// here (and in `variations`), not against the trigger rate; its run is judged like any test's.
    #[serde(default)]
    pub near_misses: u64,
    /// For each target pass: [tests carrying it, tests in which it fired].
    pub trigger_by_pass: BTreeMap<String, [u64; 2]>,
    /// Pass -> synthesized tests (those with a target pass) it fired in: what splicing reaches, apart from the
    /// seeds and whole models a campaign also runs.
    #[serde(default)]
    pub synth_passes_fired: BTreeMap<String, u64>,
    /// For each variation kind (`--vary`, `synth::vary`): [tests with it, tests in which their target pass still
    /// fired, findings among them]; the other tests are the patterns as their tests wrote them.
    #[serde(default)]
    pub variations: BTreeMap<String, [u64; 3]>,
    /// For each variation kind: its tests that were invalid (the validity of the variation).
    #[serde(default)]
    pub variations_invalid: BTreeMap<String, u64>,
    /// signature -> number of raw findings with it.
    pub signatures: BTreeMap<String, u64>,
    /// Source key -> its count, exemplars written, first and last test ([`crate::finding::exemplars`]): the
    /// counts sum to `findings_raw`.
    #[serde(default)]
    pub keys: BTreeMap<String, KeyCount>,
    /// Of the raw findings, those written as directories (exemplars) and those only counted (from `keys`, at
    /// each refresh).
    #[serde(default)]
    pub findings_written: u64,
    #[serde(default)]
    pub findings_counted: u64,
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
    /// Triaged findings by class (optimizer, reference, precision, widened, nonfinite, undecided, unattributed, contract).
    #[serde(default)]
    pub triaged_by_class: BTreeMap<String, u64>,
    /// Distinct entries by class: `optimizer` = bugs/, the others their class folders.
    #[serde(default)]
    pub entries_by_class: BTreeMap<String, u64>,
    /// (elapsed_sec, tests_executed) samples, for the throughput plot.
    pub timeline: Vec<(f64, u64)>,
    /// (elapsed_sec, distinct passes fired, distinct pass pairs) samples, with the throughput samples: how
    /// coverage grew (empty in merged shards, whose union over time is not known).
    #[serde(default)]
    pub coverage_timeline: Vec<(f64, u64, u64)>,
    /// The discovery curve: (elapsed_sec, raw findings, distinct coarse signatures, distinct source keys,
    /// entries in bugs/) samples, thinned like the timeline.
    #[serde(default)]
    pub discovery: Vec<(f64, u64, u64, u64, u64)>,
    /// Resident memory over time (every [`MEMORY_EVERY_SEC`] seconds, thinned to at most [`MAX_SAMPLES`]
    /// points), for memory.svg.
    #[serde(default)]
    pub memory: Vec<MemSample>,
}

/// One memory sample: resident set sizes in MiB, from /proc.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MemSample {
    pub elapsed_sec: f64,
    pub fuzzer_mb: f64,
    /// One per worker of the lanes, lane-major (0: no process at that moment, e.g. between two).
    pub workers_mb: Vec<f64>,
    /// Findings waiting for triage at that moment (bounded by the triage share while the campaign runs).
    #[serde(default)]
    pub triage_backlog: u64,
}

/// How often memory is sampled.
pub const MEMORY_EVERY_SEC: f64 = 10.0;
/// The most samples a series keeps: beyond, every other one is dropped.
pub const MAX_SAMPLES: usize = 2000;

/// Keeps every other point of a series longer than [`MAX_SAMPLES`].
fn thin<T: Clone>(v: &mut Vec<T>) {
    if v.len() > MAX_SAMPLES {
        *v = v.iter().step_by(2).cloned().collect();
    }
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
    /// message `invalid_examples` keeps), or of the first of its variation kind's: the campaign saves it under
    /// `invalid/`.
    /// `fired`: the passes it fired (sorted, each once); `elapsed`: campaign seconds now (for `first_fired_sec`).
    pub fn record(
        &mut self,
        id: u64,
        outcomes: &[Outcome],
        fired: &[String],
        j: &Judgement,
        target_pass: Option<&str>,
        variations: &[&str],
        elapsed: f64,
    ) -> bool {
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
        for (k, p) in fired.iter().enumerate() {
            *self.passes_fired.entry(p.to_string()).or_default() += 1;
            self.first_fired_sec.entry(p.to_string()).or_insert(elapsed);
            for q in &fired[k + 1..] {
                *self.pass_pairs.entry(format!("{p}+{q}")).or_default() += 1;
            }
        }
        self.pass_pairs_distinct = self.pass_pairs.len() as u64;
        let target_fired = target_pass.is_some_and(|tp| fired.iter().any(|f| f == tp));
        let near_miss = target_pass.is_some() && !target_fired && !variations.is_empty();
        self.near_misses += near_miss as u64;
        if target_pass.is_some() {
            for p in fired {
                *self.synth_passes_fired.entry(p.to_string()).or_default() += 1;
            }
        }
        if let Some(tp) = target_pass.filter(|_| !near_miss) {
            self.tests_with_target_pass += 1;
            let e = self.trigger_by_pass.entry(tp.to_string()).or_default();
            e[0] += 1;
            if target_fired {
                self.target_pass_fired += 1;
                e[1] += 1;
            }
        }
        for v in variations {
            let e = self.variations.entry(v.to_string()).or_default();
            e[0] += 1;
            e[1] += target_fired as u64;
            e[2] += !j.verdicts.is_empty() as u64;
            let invalid = self.variations_invalid.entry(v.to_string()).or_default();
            // each kind's first invalid tests are saved too, so a kind's validity can be read from its examples
            example |= !j.valid && j.invalid_reason.is_some() && *invalid < INVALID_EXAMPLES as u64;
            *invalid += !j.valid as u64;
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
        self.gen_time_share = wait_share(self.worker_wait_sec, self.worker_lane_sec);
        self.count_written();
        self.trigger_rate = (self.tests_with_target_pass > 0)
            .then(|| self.target_pass_fired as f64 / self.tests_with_target_pass as f64);
    }

    /// `findings_written` and `findings_counted`, from the keys' counts.
    pub fn count_written(&mut self) {
        self.findings_written = self.keys.values().map(|k| k.written).sum();
        self.findings_counted = self.keys.values().map(|k| k.count - k.written).sum();
    }

    /// Adds a throughput sample (bounded: thinned to at most [`MAX_SAMPLES`] points).
    pub fn sample(&mut self, elapsed: f64) {
        self.timeline.push((elapsed, self.tests_executed));
        thin(&mut self.timeline);
        self.coverage_timeline.push((elapsed, self.passes_fired.len() as u64, self.pass_pairs.len() as u64));
        thin(&mut self.coverage_timeline);
        let point = (elapsed, self.findings_raw, self.findings_unique, self.keys.len() as u64, self.bugs);
        // a point only when something moved (a long campaign finds most of its bugs early)
        if self.discovery.last().is_none_or(|l| (l.1, l.2, l.3, l.4) != (point.1, point.2, point.3, point.4)) {
            self.discovery.push(point);
            thin(&mut self.discovery);
        }
    }

    /// Adds a memory sample (bounded like the timeline) and keeps the maxima.
    pub fn sample_memory(&mut self, s: MemSample) {
        self.fuzzer_rss_max_mb = self.fuzzer_rss_max_mb.max(s.fuzzer_mb);
        self.worker_rss_max_mb = s.workers_mb.iter().copied().fold(self.worker_rss_max_mb, f64::max);
        self.memory.push(s);
        thin(&mut self.memory);
    }
}

/// `gen_time_share` from the lanes' waits and their testing time.
pub fn wait_share(wait_sec: f64, lane_sec: f64) -> f64 {
    if lane_sec > 0.0 {
        (wait_sec / lane_sec).min(1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::Stats;
    use crate::oracle::Judgement;

    /// A varied test whose target pass refused the variant is a near miss: counted apart, and not against the
    /// trigger rate; a test as its pattern's test wrote it that does not fire counts against it as before.
    #[test]
    fn a_varied_test_whose_pass_did_not_fire_is_a_near_miss_not_a_trigger_failure() {
        let mut st = Stats::default();
        let j = Judgement { valid: true, invalid_reason: None, verdicts: Vec::new() };
        let fired = ["P".to_string()];
        st.record(1, &[], &fired, &j, Some("P"), &["extra-reader"], 1.0);
        st.record(2, &[], &[], &j, Some("P"), &["extra-reader"], 1.0);
        st.record(3, &[], &fired, &j, Some("P"), &[], 1.0);
        st.record(4, &[], &[], &j, Some("P"), &[], 1.0);
        st.refresh(1.0);
        assert_eq!((st.near_misses, st.tests_with_target_pass, st.target_pass_fired), (1, 3, 2));
        assert_eq!(st.trigger_rate, Some(2.0 / 3.0));
        assert_eq!(st.variations["extra-reader"], [2, 1, 0]);
        // an invalid varied test counts against its variation's validity
        let invalid = Judgement { valid: false, invalid_reason: Some("reference-error".into()), verdicts: Vec::new() };
        st.record(5, &[], &[], &invalid, Some("P"), &["dtype"], 1.0);
        assert_eq!((st.variations["dtype"], st.variations_invalid["dtype"]), ([1, 0, 0], 1));
        assert_eq!(st.variations_invalid["extra-reader"], 0);
    }

    /// Past the campaign's first invalid tests, each variation kind's first ones are still saved under invalid/.
    #[test]
    fn each_variation_kinds_first_invalid_tests_are_saved() {
        use super::INVALID_EXAMPLES;
        use crate::compiler::{Config, Outcome, Status};
        let mut st = Stats::default();
        let invalid = Judgement { valid: false, invalid_reason: Some("reference-error".into()), verdicts: Vec::new() };
        let o = [Outcome::failed(&Config::parse("disable").unwrap(), Status::Ok, 1.0)];
        let saved = |st: &mut Stats, n: u64, kinds: &[&str]| {
            (0..n).filter(|&i| st.record(i, &o, &[], &invalid, None, kinds, 1.0)).count()
        };
        assert_eq!(saved(&mut st, 2 * INVALID_EXAMPLES as u64, &[]), INVALID_EXAMPLES);
        assert_eq!(saved(&mut st, 2 * INVALID_EXAMPLES as u64, &["attr"]), INVALID_EXAMPLES, "attr's first ones");
        assert_eq!(saved(&mut st, 3, &["attr", "dtype"]), 3, "dtype's first ones");
        assert_eq!(st.invalid_examples.len(), INVALID_EXAMPLES, "stats.json keeps the campaign's first ones");
    }
}
