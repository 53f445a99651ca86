//! The fuzz loop (the paper's algorithm): make tests, run them in a pool of workers, judge, file findings,
//! triage in the background, keep statistics; checkpoint so a killed campaign resumes losing only the tests in
//! flight. Results are processed in test-id order.

mod checkpoint;
mod examples;
mod execute;
pub mod merge;
mod progress;
mod settings;
mod sources;
pub mod stats;
mod triager;

pub use checkpoint::{checkpoint_path, load_checkpoint};
pub use settings::{Budget, Mode, Settings, Shard};
pub use sources::sources;

use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::Config;
use crate::finding;
use crate::oracle::Oracle;
use crate::synth::source::{self, Test, TestSource};
use anyhow::Context;
use execute::{execute, Done};
use stats::Stats;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the caller learns at the end.
pub struct Summary {
    pub out: PathBuf,
    pub stats: Stats,
    pub interrupted: bool,
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
    let kinds = settings.target.kinds();
    let mut lanes: Vec<Vec<Worker>> = Vec::new();
    for _ in 0..settings.jobs.max(1) {
        let mut lane = Vec::new();
        for kind in kinds {
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
    // a shard makes every `count`-th id from its own first one (the whole campaign: every id)
    let shard = settings.shard;
    let (mut next_id, mut stats) =
        resume.unwrap_or_else(|| (shard.first(), Stats::new(&target_name, &target_version, settings.seed)));
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
        triager::Triager::start(spec, settings.out.clone(), oracle.clone(), limits, stop.clone())
    });
    if let Some(t) = &triager {
        let mut seen = std::collections::HashSet::new();
        for dir in finding::finding_dirs(&settings.out, true)? {
            let sig = finding::load_meta(&dir).map(|m| m.signature).unwrap_or_default();
            let first = seen.insert(sig);
            t.submit(dir, first);
        }
    }
    let mut examples = examples::Examples::open(&settings.out);

    let start = Instant::now();
    let elapsed = || prior_elapsed + start.elapsed().as_secs_f64();
    let exhausted = |id: u64, el: f64| match settings.budget {
        Budget::Tests(n) => id >= n,
        Budget::Seconds(s) => el >= s,
    };
    let mut progress = progress::Progress::new(&settings, &stats);
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
            to_make = shard.next(to_make);
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
            next_id = shard.next(next_id);
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
            checkpoint::save(&settings, next_id, &stats)?;
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
        progress.note("finishing triage: every finding is attached to an entry or triaged in full");
        let left = t.finish();
        triaged(&t, &mut stats, &mut progress);
        stats.findings_untriaged = left as u64;
        if let Err(e) = crate::triage::index::write(&settings.out) {
            progress.note(&format!("cannot write bugs/README.md: {e:#}"));
        }
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
    checkpoint::save(&settings, next_id, &stats)?;
    progress.finish();
    progress::plots(&settings.out, &stats);
    Ok(Summary { out: settings.out.clone(), stats, interrupted: stop.load(Ordering::Relaxed) })
}

/// Counts what the triage thread filed since the last call.
fn triaged(t: &triager::Triager, stats: &mut Stats, progress: &mut progress::Progress) {
    while let Ok(r) = t.results.try_recv() {
        match r {
            triager::Report::Filed(f) => {
                stats.findings_triaged += 1;
                stats.findings_attached += (f.triage.method == crate::triage::session::ATTACHED) as u64;
                let class = f.triage.class;
                *stats.triaged_by_class.entry(class.name().into()).or_default() += 1;
                if f.new_bug {
                    *stats.entries_by_class.entry(class.name().into()).or_default() += 1;
                    stats.bugs += (class == crate::triage::classify::Class::Optimizer) as u64;
                    let tr = &f.triage;
                    progress.note(&format!(
                        "{} {}: {} by {}, minimized {} -> {} nodes ({})",
                        if class == crate::triage::classify::Class::Optimizer { "bug" } else { class.name() },
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
    progress: &mut progress::Progress,
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
    if !d.unconfirmed.is_empty() {
        // never dropped silently: kept with every run, counted in stats (nondeterministic, flaky)
        let runs: Vec<_> = d.outcomes.iter().chain(&d.reruns).cloned().collect();
        finding::write_unconfirmed(&settings.out, target, version, settings.seed, &d.test, &runs, &d.unconfirmed)?;
    }
    if let Some(v) = finding::signature::primary(&d.judgement) {
        let sig = finding::signature::coarse(target, v);
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
