//! `oatest bench`: measure what oatest's machinery costs. `--kind campaign` (default): a fixed-seed campaign,
//! then the same tests replayed through bare target sessions in a loop. `--kind worker`: the same tests
//! through a worker process and through the target called directly in this process.

use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::{inputs, open, Config, NamedTensor, TargetKind};
use crate::graph::onnx;
use crate::seedgen::{generate, SeedConfig};
use clap::Args;
use std::path::PathBuf;
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
    /// Worker processes of the campaign (default: number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    match a.kind.as_str() {
        "campaign" => campaign(a),
        _ => worker(a),
    }
}

fn campaign(a: BenchArgs) -> anyhow::Result<()> {
    use crate::campaign::{self, Budget, Settings};
    use crate::synth::source::{SeedgenSource, TestSource};
    let kind = TargetKind::parse(&a.target)?;
    let n = a.tests.unwrap_or(2000);
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let dir = tempfile::tempdir()?;
    let settings = Settings {
        target: crate::compiler::TargetSet::parse(&a.target)?,
        seed: a.seed,
        budget: Budget::Tests(n),
        jobs,
        tolerance: crate::oracle::Tolerance::default(),
        seeds_dir: None,
        out: dir.path().join("run"),
        timeout_ms: 10_000,
        mem_mb: 8192,
        max_nodes: 10,
        ort_lib: a.ort_lib.clone(),
        configs: Vec::new(),
        mode: campaign::Mode::Random,
        patterns: None,
        triage: false, // the benchmark measures the campaign loop itself
        shard: Default::default(),
    };
    let src = || SeedgenSource { seed: a.seed, cfg: SeedConfig::default() };
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let summary = campaign::run(settings, None, Box::new(src()), stop)?;
    let fuzz_rate = summary.stats.tests_per_sec;
    // the same tests, through bare sessions of the target in this process, one loop
    let mut target = open(&kind, a.ort_lib.as_deref())?;
    let configs = target.default_configs();
    let mut source = src();
    let tests: Vec<_> = (0..n).map(|i| source.make(i)).collect::<anyhow::Result<_>>()?;
    let t = Instant::now();
    for test in &tests {
        for c in &configs {
            std::hint::black_box(target.run(&test.model, &test.inputs, c));
        }
    }
    let bare_rate = n as f64 / t.elapsed().as_secs_f64();
    println!(
        "{} {}: {n} tests (seed {}), configs [{}]",
        summary.stats.target,
        summary.stats.target_version,
        a.seed,
        configs.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
    );
    println!("campaign ({jobs} workers, oracle, findings, stats): {fuzz_rate:.0} tests/s");
    println!("bare replay (one loop, in-process, no oracle):      {bare_rate:.0} tests/s");
    println!("ratio campaign / bare: {:.2}", fuzz_rate / bare_rate);
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
    spec.ort_lib = a.ort_lib.clone();
    let mut worker = Worker::start(spec)?;
    let configs = worker.info.default_configs.clone();
    let (first, last) = (configs[0].clone(), configs[configs.len() - 1].clone());
    let pair: Vec<Config> = vec![first, last];
    let mut direct = open(&kind, a.ort_lib.as_deref())?;
    let runs = (cases.len() * pair.len()) as f64;
    let (mut d_rates, mut w_rates) = (Vec::new(), Vec::new());
    for _ in 0..a.rounds.max(1) {
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
        a.rounds
    );
    println!("direct (in-process): {d:.0} runs/s ({:.3} ms/run)", 1e3 / d);
    println!("worker (subprocess): {w:.0} runs/s ({:.3} ms/run)", 1e3 / w);
    println!("worker overhead: {:+.1}%", (d / w - 1.0) * 100.0);
    Ok(())
}
