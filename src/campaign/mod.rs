//! The fuzz loop: make tests, run them in a pool of workers, judge, file findings, keep statistics; checkpoint
//! so a killed campaign resumes losing only the tests in flight. Results are processed in test-id order.

pub mod finding;
mod report;
pub mod source;
pub mod stats;
mod triager;

use crate::oracle::{Judgement, Oracle, Symptom};
use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::{Config, Outcome, TargetKind};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use source::{Test, TestSource};
use stats::Stats;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When a campaign stops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Budget {
    Tests(u64),
    Seconds(f64),
}

/// Everything that defines a campaign; saved in its checkpoint so `--resume` continues the same campaign.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub target: String,
    pub seed: u64,
    pub budget: Budget,
    pub jobs: usize,
    pub tolerance: f64,
    pub seeds_dir: Option<PathBuf>,
    pub out: PathBuf,
    pub timeout_ms: u64,
    pub mem_mb: u64,
    pub max_nodes: usize,
    pub ort_lib: Option<PathBuf>,
    /// Configurations to run (empty: the target's defaults).
    pub configs: Vec<Config>,
    /// Where tests come from.
    #[serde(default)]
    pub mode: Mode,
    /// The pattern library (synthesis mode).
    #[serde(default)]
    pub patterns: Option<PathBuf>,
    /// Triage findings while the campaign runs (one extra worker).
    #[serde(default = "yes")]
    pub triage: bool,
}

fn yes() -> bool {
    true
}

/// Synthesis from patterns, or the seed-only baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Synth,
    #[default]
    Random,
}

#[derive(Serialize, Deserialize)]
struct Checkpoint {
    version: u32,
    settings: Settings,
    /// Every test below this id has been processed.
    next_id: u64,
    stats: Stats,
}

/// One executed test, as a worker thread hands it back.
struct Done {
    test: Test,
    outcomes: Vec<Outcome>,
    judgement: Judgement,
    nondeterministic: u64,
    flaky: u64,
}

/// What the caller learns at the end.
pub struct Summary {
    pub out: PathBuf,
    pub stats: Stats,
    pub interrupted: bool,
}

pub fn checkpoint_path(out: &Path) -> PathBuf {
    out.join("checkpoint.json")
}

/// Reads a campaign's settings and progress for `--resume`.
pub fn load_checkpoint(dir: &Path) -> anyhow::Result<(Settings, u64, Stats)> {
    let path = checkpoint_path(dir);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let c: Checkpoint = serde_json::from_str(&text).with_context(|| format!("{}: not a checkpoint", path.display()))?;
    Ok((c.settings, c.next_id, c.stats))
}

/// Runs (or resumes) a campaign until its budget is spent or `stop` is raised.
pub fn run(
    settings: Settings,
    resume: Option<(u64, Stats)>,
    mut source: Box<dyn TestSource>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(&settings.out).with_context(|| format!("cannot create {}", settings.out.display()))?;
    // one target, or two compared with each other (`ort,tract`): every job runs one worker per target
    let kinds: Vec<TargetKind> = settings.target.split(',').map(TargetKind::parse).collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(kinds.len() <= 2, "--target takes one target or two (e.g. ort,tract)");
    let mut lanes: Vec<Vec<Worker>> = Vec::new();
    for _ in 0..settings.jobs.max(1) {
        let mut lane = Vec::new();
        for kind in &kinds {
            let mut spec = WorkerSpec::new(kind.clone())?;
            spec.ort_lib = settings.ort_lib.clone();
            spec.timeout = Duration::from_millis(settings.timeout_ms);
            spec.mem_limit_mb = Some(settings.mem_mb);
            lane.push(Worker::start(spec)?);
        }
        lanes.push(lane);
    }
    let infos: Vec<_> = lanes[0].iter().map(|w| w.info.clone()).collect();
    // by default the reference and the most optimized configuration: every pass runs in the latter, and the
    // test rate doubles compared to all four ORT levels (--config chooses others)
    let configs: Vec<Vec<Config>> = infos
        .iter()
        .map(|info| {
            if settings.configs.is_empty() {
                let d = &info.default_configs;
                vec![d[0].clone(), d[d.len() - 1].clone()]
            } else {
                settings.configs.clone()
            }
        })
        .collect();
    anyhow::ensure!(configs.iter().all(|c| c.len() >= 2), "a differential campaign needs at least two configurations");
    let target_name = infos.iter().map(|i| i.target.clone()).collect::<Vec<_>>().join(",");
    let target_version = infos.iter().map(|i| i.version.clone()).collect::<Vec<_>>().join(",");
    let (mut next_id, mut stats) =
        resume.unwrap_or_else(|| (0, Stats::new(&target_name, &target_version, settings.seed)));
    let prior_elapsed = stats.elapsed_sec - stats.triage_finish_sec; // testing time so far
    let oracle = Oracle { tolerance: settings.tolerance };

    // worker threads: each owns its workers, takes tests from a bounded queue, runs and judges them
    let depth = 2 * lanes.len();
    anyhow::ensure!(
        (depth as u64) < source::POOL_LAG,
        "--jobs {} is more than this campaign loop supports",
        lanes.len()
    );
    let (job_tx, job_rx) = sync_channel::<Test>(depth);
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (done_tx, done_rx) = channel::<Done>();
    let threads: Vec<_> = lanes
        .into_iter()
        .map(|lane| {
            let (rx, tx, configs, oracle) = (job_rx.clone(), done_tx.clone(), configs.clone(), oracle.clone());
            std::thread::spawn(move || execute(lane, rx, tx, configs, oracle))
        })
        .collect();
    drop(done_tx);

    // triage in the background: findings left from an interrupted run first
    let mut triager = (settings.triage && kinds.len() == 1).then(|| {
        let mut spec = WorkerSpec::new(kinds[0].clone()).expect("the lanes started this kind");
        spec.ort_lib = settings.ort_lib.clone();
        // the triager must not slow the campaign: its worker only gets CPU time the campaign leaves (it catches
        // up when the campaign's workers stop), and its hang limit counts that CPU time
        spec.timeout = Duration::from_millis(settings.timeout_ms);
        spec.background = true;
        spec.mem_limit_mb = Some(settings.mem_mb);
        let limits = crate::triage::reduce::Limits { max_checks: 1000, time: Duration::from_secs(60) };
        triager::Triager::start(spec, settings.out.join("bugs"), oracle.clone(), limits, stop.clone())
    });
    if let Some(t) = &triager {
        let mut seen = std::collections::HashSet::new();
        for dir in crate::triage::finding_dirs(&settings.out, true)? {
            let sig = std::fs::read_to_string(dir.join("meta.json"))
                .ok()
                .and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok())
                .and_then(|m| m["signature"].as_str().map(str::to_string))
                .unwrap_or_default();
            let first = seen.insert(sig);
            t.submit(dir, first);
        }
    }
    let mut examples = finding::Examples::open(&settings.out);

    let start = Instant::now();
    let elapsed = || prior_elapsed + start.elapsed().as_secs_f64();
    let exhausted = |id: u64, el: f64| match settings.budget {
        Budget::Tests(n) => id >= n,
        Budget::Seconds(s) => el >= s,
    };
    let mut progress = report::Progress::new(&settings, &stats);
    let mut to_make = next_id;
    let mut in_flight = 0usize;
    let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
    let (mut last_save, mut last_sample) = (Instant::now(), Instant::now());
    loop {
        let stopping = stop.load(Ordering::Relaxed) || exhausted(to_make, elapsed());
        while !stopping && in_flight < depth && !exhausted(to_make, elapsed()) {
            let t0 = Instant::now();
            let made = source.make(to_make);
            stats.gen_time_sec += t0.elapsed().as_secs_f64();
            stats.tests_generated += 1;
            match made {
                Ok(test) => {
                    job_tx.send(test).expect("worker threads live while the queue is open");
                    in_flight += 1;
                }
                Err(e) => {
                    // a test that cannot be built is counted and skipped, never fatal
                    stats.gen_failures += 1;
                    progress.note(&format!("test {to_make}: cannot be built: {e:#}"));
                    pending.insert(to_make, Done::skipped(to_make));
                }
            }
            to_make += 1;
        }
        if in_flight == 0 && pending.is_empty() && stopping {
            break;
        }
        match done_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(d) => {
                in_flight -= 1;
                pending.insert(d.test.id, d);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => anyhow::bail!("all worker threads ended"),
        }
        while let Some(d) = pending.remove(&next_id) {
            let clean = d.judgement.valid && d.judgement.verdicts.is_empty() && !d.outcomes.is_empty();
            source.feedback(&d.test, clean);
            if clean {
                examples.offer(&d.test, &d.outcomes)?;
            }
            process(&settings, &target_name, &target_version, &mut stats, d, &mut progress, triager.as_ref())?;
            next_id += 1;
        }
        if let Some(t) = &triager {
            triaged(t, &mut stats, &mut progress);
        }
        let el = elapsed();
        if last_sample.elapsed() >= Duration::from_secs(1) {
            stats.refresh(el);
            stats.sample(el);
            progress.update(&stats, &settings.budget);
            last_sample = Instant::now();
        }
        if last_save.elapsed() >= Duration::from_secs(5) {
            stats.refresh(el);
            save(&settings, next_id, &stats)?;
            last_save = Instant::now();
        }
    }
    drop(job_tx);
    for t in threads {
        let _ = t.join();
    }
    // rates are over the testing time; finishing triage is reported on its own
    let tested = elapsed();
    stats.refresh(tested);
    if let Some(mut t) = triager.take() {
        progress.note("finishing triage of the first finding of each signature");
        let left = t.finish();
        triaged(&t, &mut stats, &mut progress);
        if left > 0 {
            progress.note(&format!(
                "{left} findings are not triaged yet: oatest triage {} does the rest",
                settings.out.display()
            ));
        }
    }
    let el = elapsed();
    stats.triage_finish_sec += el - tested;
    stats.elapsed_sec = el;
    stats.sample(el);
    save(&settings, next_id, &stats)?;
    progress.finish();
    report::plots(&settings.out, &stats);
    Ok(Summary { out: settings.out.clone(), stats, interrupted: stop.load(Ordering::Relaxed) })
}

impl Done {
    /// A placeholder for a test that could not be built: processed in order, counted nowhere else.
    fn skipped(id: u64) -> Done {
        Done {
            test: Test { id, model: Vec::new(), inputs: Vec::new(), origin: String::new(), target_pass: None },
            outcomes: Vec::new(),
            judgement: Judgement { valid: false, invalid_reason: None, verdicts: Vec::new() },
            nondeterministic: 0,
            flaky: 0,
        }
    }
}

/// Checkpoint and stats.json, both written atomically.
fn save(settings: &Settings, next_id: u64, stats: &Stats) -> anyhow::Result<()> {
    let cp = Checkpoint { version: 1, settings: settings.clone(), next_id, stats: stats.clone() };
    crate::util::write_atomic(&checkpoint_path(&settings.out), serde_json::to_string(&cp)?.as_bytes())?;
    crate::util::write_atomic(&settings.out.join("stats.json"), serde_json::to_string_pretty(stats)?.as_bytes())
}

/// Counts what the triage thread filed since the last call.
fn triaged(t: &triager::Triager, stats: &mut Stats, progress: &mut report::Progress) {
    while let Ok(r) = t.results.try_recv() {
        match r {
            triager::Report::Filed(f) => {
                stats.findings_triaged += 1;
                if f.new_bug {
                    stats.bugs += 1;
                    let tr = &f.triage;
                    progress.note(&format!(
                        "bug {}: {} by {}, minimized {} -> {} nodes ({})",
                        f.signature,
                        tr.detail.chars().take(80).collect::<String>(),
                        if tr.culprits.is_empty() { "unknown passes".into() } else { tr.culprits.join("+") },
                        tr.original_nodes,
                        tr.nodes,
                        f.bug_dir
                    ));
                }
            }
            triager::Report::Failed(dir, e) => progress.note(&format!("triage of {} failed: {e}", dir.display())),
        }
    }
}

fn process(
    settings: &Settings,
    target: &str,
    version: &str,
    stats: &mut Stats,
    d: Done,
    progress: &mut report::Progress,
    triager: Option<&triager::Triager>,
) -> anyhow::Result<()> {
    if d.outcomes.is_empty() {
        return Ok(());
    }
    stats.nondeterministic += d.nondeterministic;
    stats.flaky += d.flaky;
    if stats.record(d.test.id, &d.outcomes, &d.judgement, d.test.target_pass.as_deref()) {
        finding::write_invalid(&settings.out, &d.test, &d.outcomes)?;
    }
    if let Some(v) = finding::primary(&d.judgement) {
        let sig = finding::signature(target, v);
        let new = !stats.signatures.contains_key(&sig);
        stats.record_finding(v.symptom, &sig);
        let dir = finding::write(&settings.out, target, version, settings.seed, &d.test, &d.outcomes, &d.judgement)?;
        if let Some(t) = triager {
            t.submit(dir.clone(), new);
        }
        if new {
            let detail: String = v.detail.chars().take(120).collect();
            progress.note(&format!("new {} under {}: {} ({})", v.symptom, v.config, detail, dir.display()));
        }
    }
    Ok(())
}

/// A worker thread: for each target, run every configuration, judge, and re-run inconsistencies to rule out
/// nondeterminism; with two targets, also compare their references.
fn execute(
    mut lane: Vec<Worker>,
    rx: Arc<Mutex<Receiver<Test>>>,
    tx: std::sync::mpsc::Sender<Done>,
    configs: Vec<Vec<Config>>,
    oracle: Oracle,
) {
    let multi = lane.len() > 1;
    loop {
        let next = rx.lock().unwrap().recv();
        let Ok(test) = next else { break };
        let mut all = Done {
            test,
            outcomes: Vec::new(),
            judgement: Judgement { valid: true, invalid_reason: None, verdicts: Vec::new() },
            nondeterministic: 0,
            flaky: 0,
        };
        let mut references: Vec<Outcome> = Vec::new();
        for (k, w) in lane.iter_mut().enumerate() {
            let (outcomes, mut j, nondet, flaky) = run_and_judge(w, &all.test, &configs[k], &oracle);
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
            all.nondeterministic += nondet;
            all.flaky += flaky;
        }
        // across targets: both references ran, so they must agree; re-run both before believing a difference
        if references.len() == 2 {
            if let Some(mut v) = oracle.inconsistency(&references[0], &references[1]) {
                let again: Vec<Outcome> = lane
                    .iter_mut()
                    .zip(&configs)
                    .map(|(w, c)| w.run(&all.test.model, &all.test.inputs, &c[0]))
                    .collect();
                let stable = (0..2).all(|i| {
                    crate::oracle::distance(&references[i].outputs, &again[i].outputs, 0.0).is_ok_and(|d| d.max == 0.0)
                });
                if !stable {
                    all.nondeterministic += 1;
                } else if oracle.inconsistency(&again[0], &again[1]).is_some() {
                    v.config = format!("{}~{}", lane[0].info.target, lane[1].info.target);
                    all.judgement.verdicts.push(v);
                } else {
                    all.flaky += 1;
                }
            }
        }
        if tx.send(all).is_err() {
            break;
        }
    }
}

/// One target: run the test's configurations, judge, and drop inconsistencies that a re-run shows to be
/// nondeterministic (the reference itself changes) or flaky (they do not come back).
fn run_and_judge(
    w: &mut Worker,
    test: &Test,
    configs: &[Config],
    oracle: &Oracle,
) -> (Vec<Outcome>, Judgement, u64, u64) {
    // a rewrite rule is not logged on its own: for a test built for one, ask the optimized configurations
    // to attribute just that rule (one extra session when its container fired)
    let rule = test.target_pass.as_deref().filter(|p| crate::compiler::rules::container_of(p).is_some());
    let configs: Vec<Config> = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut c = c.clone();
            if let (Some(r), true) = (rule, i > 0) {
                c.attribute_rules = true;
                c.rules_of_interest = vec![r.to_string()];
            }
            c
        })
        .collect();
    let outcomes = w.run_configs(&test.model, &test.inputs, &configs);
    let mut judgement = oracle.judge(&outcomes);
    let (mut nondeterministic, mut flaky) = (0, 0);
    if judgement.verdicts.iter().any(|v| v.symptom == Symptom::Inconsistency) {
        // run the reference and each inconsistent configuration again
        let again: Vec<Config> = std::iter::once(configs[0].clone())
            .chain(
                judgement
                    .verdicts
                    .iter()
                    .filter(|v| v.symptom == Symptom::Inconsistency)
                    .filter_map(|v| configs.iter().find(|c| c.to_string() == v.config).cloned()),
            )
            .collect();
        let rerun = w.run_configs(&test.model, &test.inputs, &again);
        let reference_stable = oracle.inconsistency(&outcomes[0], &rerun[0]).is_none()
            && crate::oracle::distance(&outcomes[0].outputs, &rerun[0].outputs, 0.0).is_ok_and(|d| d.max == 0.0);
        judgement.verdicts.retain(|v| {
            if v.symptom != Symptom::Inconsistency {
                return true;
            }
            if !reference_stable {
                nondeterministic += 1;
                return false;
            }
            let still = rerun[1..]
                .iter()
                .find(|o| o.config.to_string() == v.config)
                .is_some_and(|o| oracle.inconsistency(&rerun[0], o).is_some());
            if !still {
                flaky += 1;
            }
            still
        });
    }
    (outcomes, judgement, nondeterministic, flaky)
}

/// Patterns larger than this are left out of synthesis: their sessions cost more than they add.
const MAX_PATTERN_NODES: usize = 32;
const MAX_PATTERN_CONST_BYTES: usize = 64 << 10;
const MAX_PORT_ELEMS: usize = 8192;

fn constant_bytes(p: &crate::pattern::Pattern) -> usize {
    p.model.graph.initializers.values().map(|t| t.raw().map_or(0, |r| r.len())).sum()
}

/// The patterns of a library that still fire their pass when placed in a model of ai.onnx opset `opset`
/// (seeds are written at that opset): each is bumped to max(its opset, `opset`) and verified in a worker.
pub fn usable_patterns(
    spec: &WorkerSpec,
    jobs: usize,
    patterns: Vec<crate::pattern::Pattern>,
    opset: i64,
) -> anyhow::Result<Vec<crate::pattern::Pattern>> {
    let pool = crate::compiler::worker::Pool::start(spec, jobs.clamp(1, patterns.len().max(1)))?;
    let bumped: Vec<crate::pattern::Pattern> = patterns
        .into_iter()
        .filter(|p| {
            p.model.graph.node_count() <= MAX_PATTERN_NODES
                && constant_bytes(p) <= MAX_PATTERN_CONST_BYTES
                && p.meta
                    .inputs
                    .iter()
                    .chain(&p.meta.outputs)
                    .all(|port| port.ty.numel().is_some_and(|n| n > 0 && n <= MAX_PORT_ELEMS))
        })
        .map(|mut p| {
            let old = p.model.opsets.remove("ai.onnx");
            let v = p.model.opsets.entry(String::new()).or_insert(old.unwrap_or(opset));
            *v = (*v).max(opset);
            p
        })
        .collect();
    let ok = pool.map(bumped, |w, p| crate::pattern::extract::verify(w, &p).then_some(p));
    Ok(ok.into_iter().flatten().collect())
}
