//! `oatest bench`: measure what oatest's machinery costs. `--kind worker`: the same tests through a worker
//! process and through the target called directly in this process.

use crate::graph::onnx;
use crate::seedgen::{generate, SeedConfig};
use crate::target::worker::{Worker, WorkerSpec};
use crate::target::{inputs, open, Config, NamedTensor, TargetKind};
use clap::Args;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, default_value = "ort")]
    pub target: String,
    /// What to measure.
    #[arg(long, default_value = "worker", value_parser = ["worker"])]
    pub kind: String,
    /// Seed models per round.
    #[arg(long, default_value_t = 300)]
    pub tests: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
}

pub fn run(a: BenchArgs) -> anyhow::Result<()> {
    let kind = TargetKind::parse(&a.target)?;
    let cases: Vec<(Vec<u8>, Vec<NamedTensor>)> = (0..a.tests)
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
