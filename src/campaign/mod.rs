//! The fuzz loop (the paper's algorithm): make tests, run them in a pool of workers, judge, file findings,
//! triage in the background, keep statistics; checkpoint so a killed campaign resumes losing only the tests in
//! flight. Results are processed in test-id order.

mod checkpoint;
mod examples;
mod execute;
pub mod merge;
mod produce;
mod progress;
mod settings;
mod sources;
pub mod stats;
mod triager;

pub use checkpoint::{checkpoint_path, load_checkpoint};
pub use settings::{
    Budget, Mode, Rotation, Settings, Shard, FEEDBACK_EVERY, RECYCLE_MB, RECYCLE_TESTS, ROTATE_EVERY, TRIAGE_SHARE,
};
pub use sources::sources;

use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::Config;
use crate::finding;
use crate::oracle::Oracle;
use crate::synth::source::TestSource;
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
    source: Box<dyn TestSource>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(&settings.out).with_context(|| format!("cannot create {}", settings.out.display()))?;
    // one target, or two compared with each other (`ort,tract`): every job runs one worker per target
    let kinds = settings.target.kinds();
    let lanes = start_lanes(&settings, kinds)?;
    let infos: Vec<_> = lanes[0].iter().map(|w| w.info.clone()).collect();
    let (configs, rotation) = configurations(&settings, &infos)?;
    source.rotation(if rotation.every > 0 { rotation.configs.len() } else { 0 });
    let target_name = infos.iter().map(|i| i.target.clone()).collect::<Vec<_>>().join(",");
    let target_version = infos.iter().map(|i| i.version.clone()).collect::<Vec<_>>().join(",");
    announce(&settings, &infos);
    // a shard makes every `count`-th id from its own first one (the whole campaign: every id)
    let shard = settings.shard;
    let (mut next_id, mut stats) =
        resume.unwrap_or_else(|| (shard.first(), Stats::new(&target_name, &target_version, settings.seed)));
    let prior_elapsed = stats.elapsed_sec - stats.triage_finish_sec; // testing time so far
    let oracle = Oracle { tolerance: settings.tolerance };

    // lane threads: each owns its workers, takes tests from a bounded queue, runs and judges them
    let (nlanes, nkinds) = (lanes.len(), kinds.len());
    let shared = Arc::new(execute::Lanes::new(nlanes * nkinds, settings.recycle_tests, settings.recycle_mb));
    let (job_tx, job_rx) = sync_channel::<execute::Job>(2 * nlanes);
    let job_rx = Arc::new(Mutex::new(job_rx));
    let (done_tx, done_rx) = channel::<Done>();
    let threads: Vec<_> = lanes
        .into_iter()
        .enumerate()
        .map(|(i, lane)| {
            let (rx, tx, configs, oracle, shared) =
                (job_rx.clone(), done_tx.clone(), (configs.clone(), rotation.clone()), oracle.clone(), shared.clone());
            std::thread::spawn(move || execute(i, lane, rx, tx, configs, oracle, shared))
        })
        .collect();

    // triage in the background: findings left from an interrupted run first; entries labeled with the known
    // upstream bugs and the other ORT builds
    let mut triager = start_triager(&settings, kinds, &oracle, &stop, &shared.borrowed)?;
    let mut filing = Filing {
        settings: &settings,
        exemplars: finding::exemplars::Exemplars::new(&settings.out, settings.exemplars),
        examples: examples::Examples::open(&settings.out),
        target: target_name.clone(),
        version: target_version.clone(),
    };

    let start = Instant::now();
    let elapsed = || prior_elapsed + start.elapsed().as_secs_f64();
    // generator threads make tests ahead of the lanes (one per 8 lanes: making a test costs a fraction of
    // running it), so the lanes find one waiting
    let source: Arc<dyn TestSource> = Arc::from(source);
    let plan = produce::Plan {
        first: next_id,
        shard,
        budget: settings.budget.clone(),
        prior_elapsed,
        start,
        stop: stop.clone(),
    };
    let producer = produce::Producer::start(nlanes.div_ceil(8), source.clone(), plan, job_tx, done_tx);
    let (prior_lane_sec, prior_cpu) = (stats.worker_lane_sec, stats.fuzzer_cpu_sec);
    let cpu0 = crate::compiler::worker::own_cpu_time().as_secs_f64();
    let account = |stats: &mut Stats| {
        stats.worker_lane_sec = prior_lane_sec + nlanes as f64 * start.elapsed().as_secs_f64();
        stats.fuzzer_cpu_sec = prior_cpu + crate::compiler::worker::own_cpu_time().as_secs_f64() - cpu0;
        stats.fuzzer_rss_max_mb = stats.fuzzer_rss_max_mb.max(crate::compiler::worker::own_peak_rss_mb());
    };
    let mut progress = progress::Progress::new(&settings, &stats);
    let mut pending: BTreeMap<u64, Done> = BTreeMap::new();
    let mut reported = 0u64; // triage reports received (filed, skipped or failed) this run
    let (mut last_save, mut last_sample, mut last_page) = (Instant::now(), Instant::now(), Instant::now());
    let mut last_memory: Option<Instant> = None;
    loop {
        // done when the generators stopped claiming ids and every claimed id is processed
        if !producer.running() && next_id >= producer.end() {
            break;
        }
        let disconnected = match done_rx.recv_timeout(Duration::from_millis(100)) {
            Ok(d) => {
                pending.insert(d.test.id, d);
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        while let Some(d) = pending.remove(&next_id) {
            stats.elapsed_sec = elapsed(); // the time a pass first fired is this test's
            filing.take(d, source.as_ref(), &mut stats, &mut progress, triager.as_mut())?;
            next_id = shard.next(next_id);
        }
        producer.processed(next_id);
        // the budget spent, no lane pauses for triage any more: the last tests drain at once
        shared.closing.store(!producer.running(), Ordering::Relaxed);
        if disconnected && !(!producer.running() && next_id >= producer.end()) {
            anyhow::bail!("all worker threads ended with test {next_id} not run");
        }
        if let Some(t) = &triager {
            reported += triaged(t, &mut stats, &mut progress);
        }
        let el = elapsed();
        if last_memory.is_none_or(|t| t.elapsed().as_secs_f64() >= stats::MEMORY_EVERY_SEC) {
            stats.sample_memory(memory_sample(el, &shared.pids, triager.as_ref()));
            last_memory = Some(Instant::now());
        }
        if last_sample.elapsed() >= Duration::from_secs(1) {
            account(&mut stats);
            stats.refresh(el);
            stats.sample(el);
            progress.update(&stats, &settings.budget);
            last_sample = Instant::now();
        }
        if last_save.elapsed() >= Duration::from_secs(5) {
            account(&mut stats);
            stats.refresh(el);
            checkpoint::save(&settings, next_id, &stats)?;
            last_save = Instant::now();
        }
        if last_page.elapsed() >= Duration::from_secs(crate::report::page::RELOAD_SEC as u64) {
            page(&settings.out, &stats, true);
            last_page = Instant::now();
        }
    }
    stats.sample_memory(memory_sample(elapsed(), &shared.pids, triager.as_ref()));
    account(&mut stats);
    producer.join();
    for t in threads {
        let _ = t.join();
    }
    // rates are over the testing time; finishing triage is reported on its own
    let tested = elapsed();
    stats.refresh(tested);
    if let Some(t) = triager.take() {
        finish_triage(t, &settings.out, reported, &mut stats, &mut progress);
    }
    let el = elapsed();
    stats.triage_finish_sec += el - tested;
    stats.elapsed_sec = el;
    stats.sample(el);
    checkpoint::save(&settings, next_id, &stats)?;
    progress.finish();
    page(&settings.out, &stats, false);
    Ok(Summary { out: settings.out.clone(), stats, interrupted: stop.load(Ordering::Relaxed) })
}

/// Which build runs, first: a maintainer's first question about any finding.
fn announce(settings: &Settings, infos: &[crate::compiler::worker::WorkerInfo]) {
    for i in infos {
        let lib = settings.ort_lib.as_ref().filter(|_| i.target == "ort");
        eprintln!("{} {}{}", i.target, i.version, lib.map_or(String::new(), |l| format!(" ({})", l.display())));
    }
}

/// The plots and the campaign page (`index.html`, which reloads itself while `live`); a page that cannot be
/// written is reported, not fatal.
fn page(out: &std::path::Path, stats: &Stats, live: bool) {
    progress::plots(out, stats);
    if let Err(e) = crate::report::page::write(out, live) {
        eprintln!("warning: cannot write {}: {e:#}", out.join("index.html").display());
    }
}

/// Each target's configurations (by default the reference and the most optimized one: every pass runs in the
/// latter, and the test rate doubles compared to all four ORT levels; `--config` chooses others) and, with ORT's
/// default set, the rotation: some tests also run a named configuration (opt-in and kill switches,
/// ORT_ENABLE_LAYOUT) and some passing tests have ORT save its optimized graph for the seed pool (synthesis only).
fn configurations(
    settings: &Settings,
    infos: &[crate::compiler::worker::WorkerInfo],
) -> anyhow::Result<(Vec<Vec<Config>>, Rotation)> {
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
    let ort = settings.target.is(crate::compiler::TargetKind::Ort);
    let rotation = Rotation {
        every: if ort && settings.configs.is_empty() { settings.rotate_every } else { 0 },
        configs: if ort { crate::compiler::named::rotation(&infos[0].version) } else { Vec::new() },
        save_every: if ort && settings.mode == Mode::Synth { settings.feedback_every } else { 0 },
    };
    Ok((configs, rotation))
}

/// Starts every lane's workers: one per target of the campaign, `settings.jobs` lanes.
fn start_lanes(settings: &Settings, kinds: &[crate::compiler::TargetKind]) -> anyhow::Result<Vec<Vec<Worker>>> {
    let mut lanes = Vec::new();
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
    Ok(lanes)
}

/// Background triage (one target only): entries labeled with the known upstream bugs and the other ORT builds;
/// findings an interrupted run left untriaged are submitted first, each source key's first one as such.
fn start_triager(
    settings: &Settings,
    kinds: &[crate::compiler::TargetKind],
    oracle: &Oracle,
    stop: &Arc<AtomicBool>,
    borrowed: &Arc<std::sync::atomic::AtomicUsize>,
) -> anyhow::Result<Option<triager::Triager>> {
    if !settings.triage || kinds.len() != 1 {
        return Ok(None);
    }
    let known = crate::report::known::KnownBugs::load_or_default(settings.known.as_deref())?;
    let labeler = crate::report::upstream::Labeler::new(known, &settings.also_ort_libs, &settings.also_tvm);
    let mut spec = WorkerSpec::new(kinds[0].clone())?;
    spec.ort_lib = settings.ort_lib.clone();
    // triage takes its share of the lanes (`--triage-share`: its working lanes pause campaign lanes, so the
    // share holds on oversubscribed cores too), or with a share of 0 only CPU time the campaign leaves idle (it
    // catches up when the campaign's workers stop); its hang limit counts the CPU time it got
    spec.timeout = Duration::from_millis(settings.timeout_ms);
    spec.background = settings.triage_share <= 0.0;
    spec.mem_limit_mb = Some(settings.mem_mb);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let share = triager::Share::new(settings.triage_share, settings.jobs, cores);
    let limits = crate::triage::reduce::Limits { max_checks: 1000, time: Duration::from_secs(60) };
    let out = settings.out.clone();
    let mut t =
        triager::Triager::start(spec, out, oracle.clone(), limits, labeler, share, borrowed.clone(), stop.clone());
    let mut seen = std::collections::HashSet::new();
    for dir in finding::finding_dirs(&settings.out, true)? {
        let sig = finding::load_meta(&dir).map(|m| if m.key.is_empty() { m.signature } else { m.key });
        let first = seen.insert(sig.unwrap_or_default());
        t.submit(dir, first);
    }
    Ok(Some(t))
}

/// Finishes background triage after the last test, without pause, showing its progress; `reported`: the reports
/// already received this run. Writes the run's index `bugs/README.md`.
fn finish_triage(
    mut t: triager::Triager,
    out: &std::path::Path,
    mut reported: u64,
    stats: &mut Stats,
    progress: &mut progress::Progress,
) {
    progress.note("finishing triage: every finding is attached to an entry or triaged in full");
    t.finish();
    while !t.ended() {
        std::thread::sleep(Duration::from_millis(200));
        reported += triaged(&t, stats, progress);
        progress.finishing(reported, t.submitted());
    }
    let left = t.join();
    reported += triaged(&t, stats, progress);
    progress.finishing(reported, t.submitted());
    stats.findings_untriaged = left as u64;
    if let Err(e) = crate::report::index::write(out) {
        progress.note(&format!("cannot write bugs/README.md: {e:#}"));
    }
    if left > 0 {
        progress.note(&format!("{left} findings are not triaged yet: oatest triage {} does the rest", out.display()));
    }
}

/// Resident memory now: this process and each lane's workers; and triage's backlog.
fn memory_sample(
    elapsed: f64,
    pids: &[std::sync::atomic::AtomicU32],
    triager: Option<&triager::Triager>,
) -> stats::MemSample {
    use crate::compiler::worker::rss_bytes;
    let mb = |b: u64| b as f64 / (1u64 << 20) as f64;
    let worker = |p: u32| if p == 0 { 0.0 } else { rss_bytes(Some(p)).map_or(0.0, mb) };
    stats::MemSample {
        elapsed_sec: elapsed,
        fuzzer_mb: rss_bytes(None).map_or(0.0, mb),
        workers_mb: pids.iter().map(|p| worker(p.load(Ordering::Relaxed))).collect(),
        triage_backlog: triager.map_or(0, |t| t.backlog() as u64),
    }
}

/// Counts what the triage thread filed since the last call; returns how many reports came.
fn triaged(t: &triager::Triager, stats: &mut Stats, progress: &mut progress::Progress) -> u64 {
    let mut n = 0;
    while let Ok(r) = t.results.try_recv() {
        n += 1;
        match r {
            triager::Report::Filed(filed, key) => {
                // what triage learned decides which later findings of the key are written (`KeyCount::explains`);
                // an error raised in a pass is keyed by that pass alone (`finding::source_key`), its crash site
                let set = |t: &crate::triage::Triaged| match crate::compiler::tvm::raised_in(&t.detail) {
                    Some(p) => vec![p.to_string()],
                    None => t.culprits.clone(),
                };
                if let Some(k) = stats.keys.get_mut(&key) {
                    k.culprits.extend(filed.all().map(|f| set(&f.triage)).filter(|c| !c.is_empty()));
                }
                stats.findings_triaged += 1;
                stats.findings_attached += (filed.triage.method == crate::triage::session::ATTACHED) as u64;
                *stats.triaged_by_class.entry(filed.triage.class.name().into()).or_default() += 1;
                // (a second faulty pass's entry comes with the first: `Filed::more`)
                for f in filed.all().filter(|f| f.new_bug) {
                    let class = f.triage.class;
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
            triager::Report::Skipped => {}
            triager::Report::Failed(dir, e) => progress.note(&format!("triage of {} failed: {e}", dir.display())),
        }
    }
    n
}

/// Where processed tests go, in test-id order: the source's feedback, examples, statistics and findings.
struct Filing<'a> {
    settings: &'a Settings,
    exemplars: finding::exemplars::Exemplars,
    examples: examples::Examples,
    target: String,
    version: String,
}

impl Filing<'_> {
    /// Takes one processed test: feeds it back to the source, keeps it as an example when it passed, counts it,
    /// and writes (or counts) its finding, submitting written ones to triage.
    fn take(
        &mut self,
        d: Done,
        source: &dyn TestSource,
        stats: &mut Stats,
        progress: &mut progress::Progress,
        triager: Option<&mut triager::Triager>,
    ) -> anyhow::Result<()> {
        let clean = d.judgement.valid && d.judgement.verdicts.is_empty() && !d.outcomes.is_empty();
        source.feedback(&d.test, clean, &d.fired);
        // ORT's own optimized graph of a passing test: a second-order seed whose inputs are fusion results
        let fed = d.optimized.as_deref().filter(|_| clean).and_then(crate::synth::source::optimized_seed);
        if let Some(model) = fed {
            let payload = crate::case::Payload::Onnx(model);
            source.feed_seed(&crate::case::Test { payload, ..d.test.clone() }, &d.fired);
            stats.optimized_fed += 1;
        }
        if clean {
            self.examples.offer(&d.test, &d.outcomes)?;
        }
        self.process(stats, d, progress, triager)
    }

    fn process(
        &self,
        stats: &mut Stats,
        d: Done,
        progress: &mut progress::Progress,
        triager: Option<&mut triager::Triager>,
    ) -> anyhow::Result<()> {
        let (settings, target, version, exemplars) = (self.settings, &self.target, &self.version, &self.exemplars);
        stats.tests_generated += 1;
        stats.gen_time_sec += d.gen_sec;
        stats.worker_wait_sec += d.wait_sec;
        stats.worker_cpu_sec += d.cpu_sec;
        stats.worker_target_cpu_sec += d.target_cpu_sec;
        stats.worker_rss_max_mb = stats.worker_rss_max_mb.max(d.rss_mb);
        for (why, n) in ["tests", "memory"].iter().zip(d.recycled) {
            if n > 0 {
                *stats.workers_recycled.entry(why.to_string()).or_default() += n;
            }
        }
        if let Some(e) = &d.gen_error {
            stats.gen_failures += 1;
            progress.note(&format!("test {}: cannot be built: {e}", d.test.id));
        }
        if d.outcomes.is_empty() {
            return Ok(());
        }
        stats.nondeterministic += d.nondeterministic;
        stats.flaky += d.flaky;
        if stats.record(
            d.test.id,
            &d.outcomes,
            &d.fired,
            &d.judgement,
            d.test.target_pass.as_deref(),
            &d.test.variations,
            stats.elapsed_sec,
        ) {
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
            // deduplication at the source: the first few findings of a key are written, later ones counted
            let key = finding::source_key(target, &d.test, &d.outcomes, v);
            let new_key = !stats.keys.contains_key(&key.key);
            if !exemplars.admit(
                &mut stats.keys,
                &key.key,
                &key.passes,
                &sig,
                v.symptom,
                d.test.id,
                stats.elapsed_sec,
            )? {
                return Ok(());
            }
            let (out, seed) = (&settings.out, settings.seed);
            let dir = finding::write(out, target, version, seed, &d.test, &d.outcomes, &d.judgement, &key)?;
            if let Some(t) = triager {
                t.submit(dir.clone(), new_key);
            }
            if new {
                let detail: String = v.detail.chars().take(120).collect();
                progress.note(&format!("new {} under {}: {} ({})", v.symptom, v.config, detail, dir.display()));
            }
        }
        Ok(())
    }
}
