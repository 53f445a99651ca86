//! `oatest bench`: measure what oatest's machinery costs. `--kind campaign` (default): a fixed-seed campaign,
//! then its own tests replayed under the same configurations by as many processes as it had workers, each
//! running bare in-process target sessions (no fuzzer, no IPC, no oracle). `--kind worker`: the same seed models
//! through a worker process and through the target called directly in this process.

use crate::compiler::worker::{own_cpu_time, Worker, WorkerSpec};
use crate::compiler::{inputs, open, Config, NamedTensor, TargetKind};
use crate::graph::onnx;
use crate::seedgen::{generate, SeedConfig};
use crate::synth::source::{Test, TestSource};
use anyhow::Context;
use clap::Args;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, default_value = "ort")]
    pub target: String,
    /// What to measure.
    #[arg(long, default_value = "campaign", value_parser = ["campaign", "worker"])]
    pub kind: String,
    /// Tests (campaign) or seed models per round (worker).
    #[arg(long)]
    pub tests: Option<u64>,
    /// Worker processes of the campaign, and replay processes (default: number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The campaign's tests: `random` seeds, or `synth` from the target's pattern library.
    #[arg(long, default_value = "random", value_parser = ["random", "synth"])]
    pub mode: String,
    /// Rounds (default: campaign 3, worker 5); medians are reported.
    #[arg(long)]
    pub rounds: Option<usize>,
    #[command(flatten)]
    pub ort: super::OrtLib,
    /// Internal: replay the tests in this file (a child of `--kind campaign`), taking the next test's index
    /// from the shared counter file `--counter`.
    #[arg(long, hide = true, requires = "counter")]
    pub replay: Option<PathBuf>,
    #[arg(long, hide = true)]
    pub counter: Option<PathBuf>,
    /// Internal: the replay's configurations.
    #[arg(long = "config", hide = true)]
    pub configs: Vec<String>,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    if let Some(file) = &a.replay {
        return replay_part(&a, file);
    }
    match a.kind.as_str() {
        "campaign" => campaign(a),
        _ => worker(a),
    }
}

/// A source that keeps every test it makes: the replay runs the campaign's own tests.
struct Recording {
    inner: Box<dyn TestSource>,
    made: Mutex<Vec<Test>>,
}

impl TestSource for Recording {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        let t = self.inner.make(id)?;
        self.made.lock().unwrap_or_else(|e| e.into_inner()).push(t.clone());
        Ok(t)
    }
    fn feedback(&self, test: &Test, clean: bool, fired: &[String]) {
        self.inner.feedback(test, clean, fired)
    }
    fn feed_seed(&self, test: &Test, fired: &[String]) {
        self.inner.feed_seed(test, fired)
    }
}

/// One round: the campaign, then its own tests replayed bare.
struct Round {
    stats: crate::campaign::stats::Stats,
    tests: usize,
    bare_rate: f64,
    bare_cpu: f64,
}

fn campaign(a: BenchArgs) -> anyhow::Result<()> {
    let kind = TargetKind::parse(&a.target)?;
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).max(1);
    // the campaign's default pair, named explicitly so that the replay runs exactly these
    let defaults = open(&kind, a.ort.ort_lib.as_deref())?.default_configs();
    let configs = vec![defaults[0].clone(), defaults[defaults.len() - 1].clone()];
    // rounds alternate campaign and replay, so that a shared machine's load changes hit both alike
    let rounds = (0..a.rounds.unwrap_or(3).max(1))
        .map(|_| round(&a, &kind, &configs, jobs))
        .collect::<anyhow::Result<Vec<Round>>>()?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let fuzz = median(rounds.iter().map(|r| r.stats.tests_per_sec).collect());
    let bare = median(rounds.iter().map(|r| r.bare_rate).collect());
    let ratios: Vec<f64> = rounds.iter().map(|r| r.stats.tests_per_sec / r.bare_rate).collect();
    let st = &rounds[0].stats;
    println!(
        "{} {}: {} tests ({} mode, seed {}), configs [{}], {jobs} processes, median of {} rounds",
        st.target,
        st.target_version,
        rounds[0].tests,
        a.mode,
        a.seed,
        configs.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
        rounds.len()
    );
    let per = jobs as f64;
    println!(
        "campaign    ({jobs} workers, IPC, oracle, re-runs, findings, stats): {fuzz:.0} tests/s, {:.0} per process",
        fuzz / per
    );
    println!(
        "bare replay ({jobs} processes, in-process sessions, nothing else):    {bare:.0} tests/s, {:.0} per process",
        bare / per
    );
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    println!("ratio campaign / bare replay: {:.2} (rounds: {})", median(ratios.clone()), each.join(", "));
    // CPU time is what a loaded machine distorts least: per test, summed over rounds
    let sum = |f: &dyn Fn(&Round) -> f64| rounds.iter().map(f).sum::<f64>();
    let tests = sum(&|r| r.stats.tests_executed as f64).max(1.0);
    let ms = |sec: f64| sec * 1e3 / tests;
    let (worker, target, fuzzer) =
        (sum(&|r| r.stats.worker_cpu_sec), sum(&|r| r.stats.worker_target_cpu_sec), sum(&|r| r.stats.fuzzer_cpu_sec));
    let bare_cpu = sum(&|r| r.bare_cpu) * 1e3 / sum(&|r| r.tests as f64).max(1.0);
    println!(
        "CPU per test: campaign workers {:.2} ms ({:.2} ms inside the target's session creation and run, {:.2} ms \
         else: requests, responses, start-up) + fuzzer process {:.2} ms; bare replay {bare_cpu:.2} ms; ratio bare / \
         campaign {:.2}",
        ms(worker),
        ms(target),
        ms(worker - target),
        ms(fuzzer),
        bare_cpu / ms(worker + fuzzer)
    );
    let waits: Vec<String> = rounds.iter().map(|r| format!("{:.2}%", r.stats.gen_time_share * 100.0)).collect();
    println!("workers waited for a test: {}", waits.join(", "));
    // wall-clock rates need the cores to themselves: on a loaded machine the campaign's workers, which sleep
    // between requests, get more of the CPU than replay processes that never sleep; CPU per test does not care
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average {} on {} cores (rates compare only on an otherwise idle machine; the CPU ratio always)",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    Ok(())
}

fn round(a: &BenchArgs, kind: &TargetKind, configs: &[Config], jobs: usize) -> anyhow::Result<Round> {
    use crate::campaign::{self, Budget, Settings};
    let dir = tempfile::tempdir()?;
    let settings = Settings {
        target: crate::compiler::TargetSet::parse(&a.target)?,
        seed: a.seed,
        budget: Budget::Tests(a.tests.unwrap_or(2000)),
        jobs,
        tolerance: crate::oracle::Tolerance::default(),
        seeds_dir: None,
        out: dir.path().join("run"),
        timeout_ms: 10_000,
        mem_mb: 8192,
        max_nodes: 10,
        ort_lib: a.ort.ort_lib.clone(),
        configs: configs.to_vec(),
        mode: if a.mode == "synth" { campaign::Mode::Synth } else { campaign::Mode::Random },
        patterns: crate::util::project_file(&format!("patterns/{}", kind.name())).filter(|_| a.mode == "synth"),
        triage: false, // the benchmark measures the campaign loop itself
        shard: Default::default(),
        recycle_tests: campaign::RECYCLE_TESTS,
        recycle_mb: campaign::RECYCLE_MB,
        also_ort_libs: Vec::new(),
        also_tvm: Vec::new(),
        known: None,
        // the bare replay runs the reference and the most optimized configuration only
        rotate_every: 0,
        schedule: crate::synth::schedule::Schedule::Coverage, // as campaigns by default
        feedback_every: 0,
        exemplars: Some(crate::finding::exemplars::DEFAULT_LIMIT),
        triage_share: 0.0,
        vary: Vec::new(),
    };
    anyhow::ensure!(a.mode != "synth" || settings.patterns.is_some(), "--mode synth: no patterns/{}", kind.name());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let inner = campaign::sources(&settings, &stop)?;
    let source = std::sync::Arc::new(Recording { inner, made: Mutex::new(Vec::new()) });
    let summary = campaign::run(settings, None, Box::new(ArcSource(source.clone())), stop)?;
    let mut tests = std::mem::take(&mut *source.made.lock().unwrap_or_else(|e| e.into_inner()));
    tests.sort_by_key(|t| t.id);
    // the same tests, the same configurations, as many processes: bare sessions in a loop, started together
    let (bare_rate, bare_cpu) = replay(a, &tests, configs, jobs, dir.path())?;
    Ok(Round { stats: summary.stats, tests: tests.len(), bare_rate, bare_cpu })
}

/// Lets the campaign own a source the bench still reads.
struct ArcSource(std::sync::Arc<Recording>);

impl TestSource for ArcSource {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        self.0.make(id)
    }
    fn feedback(&self, test: &Test, clean: bool, fired: &[String]) {
        self.0.feedback(test, clean, fired)
    }
    fn feed_seed(&self, test: &Test, fired: &[String]) {
        self.0.feed_seed(test, fired)
    }
    fn rotation(&self, configs: usize) {
        self.0.rotation(configs)
    }
}

type Case = (Vec<u8>, Vec<NamedTensor>);

/// Replays `tests` in `jobs` child processes, each loading them all first and starting on a common signal, then
/// taking the next test from a counter in shared memory (as the campaign's lanes take the next test from its
/// queue, so one slow test does not hold the others up); returns tests per second over the slowest process,
/// and the CPU seconds used.
fn replay(
    a: &BenchArgs,
    tests: &[Test],
    configs: &[Config],
    jobs: usize,
    dir: &std::path::Path,
) -> anyhow::Result<(f64, f64)> {
    let file = dir.join("tests.bin");
    let cases: Vec<Case> = tests.iter().map(|t| (t.payload.bytes().into_owned(), t.inputs.clone())).collect();
    crate::util::write_atomic(&file, &bincode::serialize(&cases)?)?;
    let counter = dir.join("next");
    crate::util::write_atomic(&counter, &[0u8; 8])?;
    let exe = std::env::current_exe().context("cannot locate the oatest executable")?;
    let mut children = Vec::new();
    for _ in 0..jobs {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["bench", "--target", &a.target, "--replay"]).arg(&file).arg("--counter").arg(&counter);
        for c in configs {
            cmd.arg("--config").arg(c.to_string());
        }
        if let Some(lib) = &a.ort.ort_lib {
            cmd.arg("--ort-lib").arg(lib);
        }
        cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        children.push(cmd.spawn().context("cannot start a replay process")?);
    }
    let mut outs: Vec<_> =
        children.iter_mut().map(|c| std::io::BufReader::new(c.stdout.take().expect("piped"))).collect();
    for o in &mut outs {
        let mut line = String::new();
        o.read_line(&mut line)?;
        anyhow::ensure!(line.trim() == "ready", "a replay process failed to load its tests");
    }
    for c in &mut children {
        writeln!(c.stdin.as_mut().expect("piped"), "go")?;
    }
    let (mut slowest, mut cpu) = (0f64, 0f64);
    for (c, o) in children.iter_mut().zip(&mut outs) {
        let mut line = String::new();
        o.read_line(&mut line)?;
        let mut f = line.split_whitespace().map(|x| x.parse::<f64>());
        let (Some(Ok(wall)), Some(Ok(used))) = (f.next(), f.next()) else {
            anyhow::bail!("a replay process said {line:?} instead of its times")
        };
        slowest = slowest.max(wall);
        cpu += used;
        c.wait()?;
    }
    Ok((tests.len() as f64 / slowest, cpu))
}

/// A replay process: tests taken in turn from the shared counter, each under every configuration, through one
/// in-process target.
fn replay_part(a: &BenchArgs, file: &std::path::Path) -> anyhow::Result<()> {
    let kind = TargetKind::parse(&a.target)?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let cases: Vec<Case> =
        bincode::deserialize(&bytes).with_context(|| format!("{}: not a test list", file.display()))?;
    let configs: Vec<Config> = a.configs.iter().map(|c| Config::parse(c)).collect::<anyhow::Result<_>>()?;
    let path = a.counter.as_deref().context("--counter")?;
    let counter = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    use std::os::fd::AsRawFd;
    // SAFETY: maps the 8-byte file shared; the mapping lives until this process exits and is only used as an
    // AtomicU64 (8-byte aligned: mappings are page-aligned).
    let next = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            8,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            counter.as_raw_fd(),
            0,
        );
        anyhow::ensure!(p != libc::MAP_FAILED, "{}: cannot map the counter", path.display());
        &*(p as *const std::sync::atomic::AtomicU64)
    };
    let mut target = open(&kind, a.ort.ort_lib.as_deref())?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    let (t, cpu0) = (Instant::now(), own_cpu_time());
    loop {
        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize;
        let Some((model, feeds)) = cases.get(i) else { break };
        for c in &configs {
            std::hint::black_box(target.run(model, feeds, c));
        }
    }
    println!("{} {}", t.elapsed().as_secs_f64(), (own_cpu_time() - cpu0).as_secs_f64());
    Ok(())
}

fn worker(a: BenchArgs) -> anyhow::Result<()> {
    let kind = TargetKind::parse(&a.target)?;
    let cases: Vec<(Vec<u8>, Vec<NamedTensor>)> = (0..a.tests.unwrap_or(300))
        .map(|i| {
            let m = generate(a.seed, i, &SeedConfig::default());
            let feeds = inputs::generate(&m.graph, i)?;
            Ok((onnx::encode_model(&m), feeds))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut spec = WorkerSpec::new(kind.clone())?;
    spec.ort_lib = a.ort.ort_lib.clone();
    let mut worker = Worker::start(spec)?;
    let configs = worker.info.default_configs.clone();
    let (first, last) = (configs[0].clone(), configs[configs.len() - 1].clone());
    let pair: Vec<Config> = vec![first, last];
    let mut direct = open(&kind, a.ort.ort_lib.as_deref())?;
    let runs = (cases.len() * pair.len()) as f64;
    let (mut d_rates, mut w_rates) = (Vec::new(), Vec::new());
    let rounds = a.rounds.unwrap_or(5).max(1);
    for _ in 0..rounds {
        let t = Instant::now();
        for (m, f) in &cases {
            for c in &pair {
                std::hint::black_box(direct.run(m, f, c));
            }
        }
        d_rates.push(runs / t.elapsed().as_secs_f64());
        let t = Instant::now();
        for (m, f) in &cases {
            std::hint::black_box(worker.run_configs(m, f, &pair));
        }
        w_rates.push(runs / t.elapsed().as_secs_f64());
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let (d, w) = (median(&mut d_rates), median(&mut w_rates));
    println!(
        "{} {}: {} seed models x configs [{}], median of {} rounds",
        worker.info.target,
        worker.info.version,
        cases.len(),
        pair.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "),
        rounds
    );
    println!("direct (in-process): {d:.0} runs/s ({:.3} ms/run)", 1e3 / d);
    println!("worker (subprocess): {w:.0} runs/s ({:.3} ms/run)", 1e3 / w);
    println!("worker overhead: {:+.1}%", (d / w - 1.0) * 100.0);
    Ok(())
}
