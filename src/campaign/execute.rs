//! Executing one test: every configuration of every target in the lane's workers, judged by the oracle, with
//! inconsistencies re-run before they are believed (`oracle::Rerun`); worker processes recycled on budgets.

use crate::case::{Payload, Test};
use crate::compiler::tvm;
use crate::compiler::worker::Worker;
use crate::compiler::{Config, Outcome};
use crate::finding::Unconfirmed;
use crate::oracle::{confirm, Hints, Judgement, Oracle, Rerun, Verdict};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A made test on its way to a lane, with the seconds it took to make.
pub(super) struct Job {
    pub test: Test,
    pub gen_sec: f64,
}

/// One executed test, as a worker thread hands it back.
pub(super) struct Done {
    pub test: Test,
    pub outcomes: Vec<Outcome>,
    /// The passes the test fired under any of its configurations, sorted, each once.
    pub fired: Vec<String>,
    pub judgement: Judgement,
    pub nondeterministic: u64,
    pub flaky: u64,
    /// Inconsistencies a re-run did not confirm, and the re-runs that said so (kept under `flaky/`).
    pub unconfirmed: Vec<Unconfirmed>,
    pub reruns: Vec<Outcome>,
    /// Why the test could not be built (then nothing ran).
    pub gen_error: Option<String>,
    /// Seconds spent making the test, and seconds its lane waited for it.
    pub gen_sec: f64,
    pub wait_sec: f64,
    /// The lane's worker CPU seconds since its previous test (all, and inside the target).
    pub cpu_sec: f64,
    pub target_cpu_sec: f64,
    /// Worker processes the lane replaced after this test: on the test budget, on the memory budget.
    pub recycled: [u64; 2],
    /// The largest resident memory of the lane's worker processes after this test, in MiB.
    pub rss_mb: f64,
    /// The optimized graph the target saved for this test (`Rotation::saves`), when it passed.
    pub optimized: Option<Vec<u8>>,
}

/// What the lanes share with the campaign loop: their worker processes (for memory samples) and budgets.
pub(super) struct Lanes {
    /// The pid of each lane's workers, lane-major (0: none running).
    pub pids: Vec<AtomicU32>,
    /// Replace a worker process after this many tests (0: never).
    pub recycle_tests: u64,
    /// Replace a worker process whose resident memory exceeds this many MiB (0: never).
    pub recycle_mb: u64,
    /// Lanes triage borrowed: lane `i` pauses before its next test while `i` is below it (the triage share).
    pub borrowed: Arc<AtomicUsize>,
    /// The campaign's budget is spent: no lane pauses any more.
    pub closing: AtomicBool,
}

impl Lanes {
    /// For `workers` worker processes in all, none running yet, nothing borrowed.
    pub fn new(workers: usize, recycle_tests: u64, recycle_mb: u64) -> Lanes {
        let pids = (0..workers).map(|_| AtomicU32::new(0)).collect();
        let (borrowed, closing) = (Arc::new(AtomicUsize::new(0)), AtomicBool::new(false));
        Lanes { pids, recycle_tests, recycle_mb, borrowed, closing }
    }
}

/// Counts an inconsistency that fell at its re-run, keeping it.
fn fell(d: &mut Done, verdict: Verdict, why: Rerun) {
    match why {
        Rerun::Nondeterministic => d.nondeterministic += 1,
        Rerun::Flaky => d.flaky += 1,
        Rerun::Stands => return,
    }
    let why = if why == Rerun::Nondeterministic { "nondeterministic" } else { "flaky" };
    d.unconfirmed.push(Unconfirmed { verdict, why: why.into() });
}

impl Done {
    fn new(test: Test, valid: bool) -> Done {
        Done {
            test,
            outcomes: Vec::new(),
            fired: Vec::new(),
            judgement: Judgement { valid, invalid_reason: None, verdicts: Vec::new() },
            nondeterministic: 0,
            flaky: 0,
            unconfirmed: Vec::new(),
            reruns: Vec::new(),
            gen_error: None,
            gen_sec: 0.0,
            wait_sec: 0.0,
            cpu_sec: 0.0,
            target_cpu_sec: 0.0,
            recycled: [0, 0],
            rss_mb: 0.0,
            optimized: None,
        }
    }

    /// A placeholder for a test that could not be built (`why`): processed in order, counted as a failure.
    pub(super) fn skipped(id: u64, why: String, gen_sec: f64) -> Done {
        let test = Test {
            id,
            payload: Payload::Onnx(Vec::new()),
            inputs: Vec::new(),
            origin: String::new(),
            target_pass: None,
            extra: None,
            asks: None,
            variations: Vec::new(),
        };
        Done { gen_error: Some(why), gen_sec, ..Done::new(test, false) }
    }
}

/// A test whose rotated configuration overrides free dimensions (`compiler::FREE_DIM`) runs, under every
/// configuration, with its graph inputs' dims of the overridden sizes freed (named as the overrides), so that
/// FreeDimensionOverrideTransformer has dims to fix; the test, and a finding of it, hold that model. A recipe,
/// an unreadable model or one without such dims stays as it is.
pub(super) fn free_dims(test: &mut Test, config: &Config) {
    let overrides = config.dim_overrides();
    let Payload::Onnx(model) = &mut test.payload else { return };
    if overrides.is_empty() {
        return;
    }
    let Ok(mut m) = crate::graph::onnx::decode_model(model) else { return };
    if m.graph.free_input_dims(&overrides) > 0 {
        *model = crate::graph::onnx::encode_model(&m);
    }
}

/// What the oracle should know about a test's model: its graph's quantized values (for a Relax recipe, its seed
/// graph's); none when the model cannot be read. Cheap: a model naming no quantizing op is not decoded, and its
/// other hints (precision carried by casts) are computed only when a test shows an inconsistency
/// (`run_and_judge`).
pub(super) fn hints(test: &Test) -> Hints {
    // hints come only from quantizing ops: a model whose bytes name none has none (no decode per test)
    let names =
        |b: &[u8]| [&b"QuantizeLinear"[..], b"QLinear", b"QGemm"].iter().any(|n| b.windows(n.len()).any(|w| w == *n));
    // an ONNX test's declared output types are read without decoding the rest (its contract, checked per test)
    let model = match &test.payload {
        Payload::Recipe(recipe) => return recipe.seed().map(|m| Hints::of(&m.graph)).unwrap_or_default(),
        Payload::Onnx(b) if !names(b) => {
            return Hints { declared: crate::graph::onnx::declared_outputs(b), ..Hints::default() }
        }
        Payload::Onnx(b) => crate::graph::onnx::decode_model(b).ok(),
    };
    model.map(|m| Hints::of_onnx(&m.graph)).unwrap_or_default()
}

/// A worker thread: for each target, run every configuration, judge, and re-run inconsistencies to rule out
/// nondeterminism; with two targets, also compare their references.
#[allow(clippy::too_many_arguments)]
pub(super) fn execute(
    index: usize,
    mut lane: Vec<Worker>,
    rx: Arc<Mutex<Receiver<Job>>>,
    tx: std::sync::mpsc::Sender<Done>,
    (configs, rotation): (Vec<Vec<Config>>, super::Rotation),
    oracle: Oracle,
    shared: Arc<Lanes>,
) {
    let multi = lane.len() > 1;
    let mut cpu = Cpu::default();
    // tests run by each worker's current process: (its start count, tests)
    let mut since: Vec<(u64, u64)> = lane.iter().map(|w| (w.starts, 0)).collect();
    publish(index, &lane, &shared);
    loop {
        while index < shared.borrowed.load(Ordering::Relaxed) && !shared.closing.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let waited = Instant::now();
        let next = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(job) = next else { break };
        let mut all = Done::new(job.test, true);
        all.gen_sec = job.gen_sec;
        all.wait_sec = waited.elapsed().as_secs_f64();
        // the rotation's extra configuration, on the tests its id picks (single-target ORT campaigns only): the
        // test says which it ran when it is fed back
        let extra = rotation.extra(all.test.id, all.test.extra);
        all.test.extra = extra.map(|e| e.0);
        if let Some((_, extra)) = extra {
            free_dims(&mut all.test, extra);
        }
        // the named configuration the test's model asks for (a pattern of an opt-in pass), unless the rotation's
        // extra is that one
        let asked = all.test.asks.as_deref().and_then(|n| crate::compiler::named::all_with(n).ok());
        let asked = asked.filter(|a| extra.is_none_or(|(_, e)| e != a));
        let hints = hints(&all.test);
        let mut references: Vec<Outcome> = Vec::new();
        for (k, w) in lane.iter_mut().enumerate() {
            let mut mine = Cow::Borrowed(&configs[k]);
            // the most optimized configuration saves its graph on the tests picked for feedback
            let save = (k == 0 && rotation.saves(all.test.id) && all.test.payload.onnx().is_some()).then(|| {
                std::env::temp_dir().join(format!("oatest-{}-lane{index}-optimized.onnx", std::process::id()))
            });
            if let Some(path) = &save {
                let last = mine.len() - 1;
                mine.to_mut()[last].save_optimized = Some(path.clone());
            }
            if let Some((_, extra)) = extra {
                mine.to_mut().push(extra.clone());
            }
            if let Some(asked) = &asked {
                mine.to_mut().push(asked.clone());
            }
            let (outcomes, mut j, dropped, reruns) = run_and_judge(w, &all.test, &mine, &oracle, &hints);
            if let Some(path) = save {
                let passed = j.valid && j.verdicts.is_empty();
                all.optimized = std::fs::read(&path).ok().filter(|_| passed);
                let _ = std::fs::remove_file(&path);
            }
            if multi {
                for v in &mut j.verdicts {
                    v.config = format!("{}:{}", w.info.target, v.config);
                }
            }
            if k == 0 {
                all.judgement.valid = j.valid;
                all.judgement.invalid_reason = j.invalid_reason.clone();
            }
            if j.valid {
                references.push(outcomes[0].clone());
            }
            all.judgement.verdicts.extend(j.verdicts);
            all.outcomes.extend(outcomes);
            for (v, why) in dropped {
                fell(&mut all, v, why);
            }
            all.reruns.extend(reruns);
        }
        // across targets: both references ran, so they must agree; re-run both before believing a difference
        if references.len() == 2 {
            if let Some(mut v) = oracle.inconsistency_with(&references[0], &references[1], &hints) {
                let again: Vec<Outcome> = lane
                    .iter_mut()
                    .zip(&configs)
                    .map(|(w, c)| w.run(&all.test.payload.bytes(), &all.test.inputs, &c[0]))
                    .collect();
                let repeated = (0..2).all(|i| crate::oracle::same_outputs(&references[i], &again[i]));
                v.config = format!("{}~{}", lane[0].info.target, lane[1].info.target);
                match oracle.after_rerun(repeated, &again[0], Some(&again[1]), &hints) {
                    Rerun::Stands => all.judgement.verdicts.push(v),
                    why => {
                        fell(&mut all, v, why);
                        all.reruns.extend(again);
                    }
                }
            }
        }
        all.fired = all.outcomes.iter().flat_map(|o| o.passes_fired.iter().cloned()).collect();
        all.fired.sort_unstable();
        all.fired.dedup();
        // a test waits for its turn in id order holding what it carries: a passing one needs only its reference's
        // outputs (for examples/), never the others' (every other test keeps all: flaky/ and findings record them)
        if all.judgement.verdicts.is_empty() && all.unconfirmed.is_empty() {
            all.outcomes.iter_mut().skip(1).for_each(|o| o.outputs = Vec::new());
        }
        (all.recycled, all.rss_mb) = recycle(&mut lane, &mut since, &shared);
        (all.cpu_sec, all.target_cpu_sec) = cpu.since_last(&lane);
        publish(index, &lane, &shared);
        if tx.send(all).is_err() {
            break;
        }
    }
}

/// The lane's worker CPU time as last seen, to hand each test the difference.
#[derive(Default)]
struct Cpu {
    total_ms: f64,
    target_ms: f64,
}

impl Cpu {
    /// (all, inside the target) CPU seconds of the lane's workers since the last call.
    fn since_last(&mut self, lane: &[Worker]) -> (f64, f64) {
        let total: f64 = lane.iter().map(|w| w.cpu.total_ms()).sum();
        let target: f64 = lane.iter().map(|w| w.cpu.target_ms).sum();
        let d = ((total - self.total_ms) / 1e3, (target - self.target_ms) / 1e3);
        (self.total_ms, self.target_ms) = (total, target);
        d
    }
}

/// Tells the campaign loop which processes the lane's workers are now.
fn publish(index: usize, lane: &[Worker], shared: &Lanes) {
    for (k, w) in lane.iter().enumerate() {
        if let Some(slot) = shared.pids.get(index * lane.len() + k) {
            slot.store(w.pid().unwrap_or(0), Ordering::Relaxed);
        }
    }
}

/// Tests between two reads of a worker's resident memory (the memory budget is checked as often).
const RSS_EVERY: u64 = 16; // more than 1

/// Replaces the worker processes that reached a budget, between tests (so no test is affected): after
/// `recycle_tests` tests, or above `recycle_mb` MiB resident (read every RSS_EVERY tests). Returns how many on each budget, and the largest
/// resident memory seen (before recycling).
fn recycle(lane: &mut [Worker], since: &mut [(u64, u64)], shared: &Lanes) -> ([u64; 2], f64) {
    let (mut recycled, mut largest) = ([0, 0], 0f64);
    for (w, s) in lane.iter_mut().zip(since.iter_mut()) {
        // a worker restarted after a crash counts from its new process
        if w.starts != s.0 {
            *s = (w.starts, 1);
        } else {
            s.1 += 1;
        }
        let by_tests = shared.recycle_tests > 0 && s.1 >= shared.recycle_tests;
        // /proc is read at a process's first test and every RSS_EVERY tests after, not after every test
        let rss = if s.1 % RSS_EVERY == 1 {
            w.pid().and_then(|p| crate::compiler::worker::rss_bytes(Some(p))).unwrap_or(0)
        } else {
            0
        };
        largest = largest.max(rss as f64 / (1u64 << 20) as f64);
        let by_memory = !by_tests && shared.recycle_mb > 0 && rss >> 20 > shared.recycle_mb;
        if by_tests || by_memory {
            w.recycle();
            *s = (w.starts, 0);
            recycled[by_memory as usize] += 1;
        }
    }
    (recycled, largest)
}

/// One test in this many also attributes one rewrite rule no matter what it targets (each rule in turn).
const RULE_SAMPLE: u64 = 16;

/// The rewrite rules test `id` asks an optimized configuration `c` to attribute (rules are not logged one by one;
/// each costs one extra session when its container fired): the rule it was built for, those a named
/// configuration of `c` switches on (CastChainElimination under `cast_chain`), and, in one test of
/// [`RULE_SAMPLE`], one more rule in turn by test id, so that rules no pattern targets are seen when they fire.
pub fn rules_to_attribute(id: u64, target_pass: Option<&str>, c: &Config) -> Vec<String> {
    let is_rule = |p: &&str| crate::compiler::rules::container_of(p).is_some();
    let sampled = (id % RULE_SAMPLE == 0).then(|| {
        let every = crate::compiler::rules::all_rules();
        every[(id / RULE_SAMPLE) as usize % every.len()]
    });
    let mut rules: Vec<String> = target_pass.filter(is_rule).into_iter().chain(sampled).map(String::from).collect();
    for n in crate::compiler::named::of(c) {
        rules.extend(n.on.iter().map(String::as_str).filter(is_rule).map(String::from));
    }
    rules.sort();
    rules.dedup();
    rules
}

/// One target: the test's configurations, each attributing its rules ([`rules_to_attribute`]), run and judged
/// with confirmation ([`confirm::judge`]).
fn run_and_judge(
    w: &mut Worker,
    test: &Test,
    configs: &[Config],
    oracle: &Oracle,
    hints: &Hints,
) -> (Vec<Outcome>, Judgement, Vec<(Verdict, Rerun)>, Vec<Outcome>) {
    let configs: Vec<Config> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            let rules = rules_to_attribute(test.id, test.target_pass.as_deref(), &c);
            if i > 0 && !rules.is_empty() {
                c.attribute_rules = true;
                c.rules_of_interest = rules;
            }
            c
        })
        .collect();
    let bytes = test.payload.bytes();
    // a Relax test built for a pass that changes results by design (ToMixedPrecision) is judged on failures only
    let failures_only =
        test.payload.recipe().is_some() && test.target_pass.as_deref().is_some_and(tvm::changes_results_by_design);
    // an inconsistency is judged again with every hint (precision carried by casts needs the model decoded)
    let full_hints =
        || test.payload.onnx().and_then(|b| crate::graph::onnx::decode_model(b).ok()).map(|m| Hints::of_onnx(&m.graph));
    let c = confirm::judge(
        oracle,
        &configs,
        hints,
        &mut |c: &[Config]| w.run_configs(&bytes, &test.inputs, c),
        full_hints,
        failures_only,
    );
    (c.outcomes, c.judgement, c.dropped, c.reruns)
}

#[cfg(test)]
mod tests {
    use super::{rules_to_attribute, RULE_SAMPLE};
    use crate::compiler::{Config, Level};

    #[test]
    fn a_test_attributes_its_rule_its_configurations_opt_in_rules_and_now_and_then_one_more() {
        let all = Config::level(Level::All);
        assert_eq!(rules_to_attribute(1, Some("FuseReluClip"), &all), ["FuseReluClip"]);
        assert!(rules_to_attribute(1, Some("ConstantFolding"), &all).is_empty(), "a transformer is logged");
        let mut cast_chain = all.clone();
        cast_chain.options = crate::compiler::named::lookup("cast_chain").unwrap().pairs();
        assert_eq!(rules_to_attribute(3, None, &cast_chain), ["CastChainElimination"]);
        // one test in RULE_SAMPLE samples a rule, every rule in turn
        let sampled: std::collections::BTreeSet<String> =
            (0..64).flat_map(|k| rules_to_attribute(k * RULE_SAMPLE, None, &all)).collect();
        assert_eq!(sampled.len(), crate::compiler::rules::all_rules().len());
        assert!((1..RULE_SAMPLE).all(|k| rules_to_attribute(k, None, &all).is_empty()));
    }
}
