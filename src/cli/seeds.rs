//! `oatest seeds gen`: write random valid seed models.

use crate::graph::onnx;
use crate::seedgen::{generate, SeedConfig};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum SeedsCmd {
    /// Generate N random models into a directory (seed_00000.onnx, ...). Same --seed, same bytes.
    Gen(GenArgs),
}

#[derive(Args, Debug)]
pub struct GenArgs {
    /// How many models.
    #[arg(long, default_value_t = 100)]
    pub count: u64,
    /// Output directory (created if missing).
    #[arg(long, default_value = "seeds/generated")]
    pub out: PathBuf,
    /// Random seed; model i depends only on (seed, i).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Largest number of nodes per model.
    #[arg(long, default_value_t = 10)]
    pub max_nodes: usize,
    /// Smallest number of nodes per model.
    #[arg(long, default_value_t = 3)]
    pub min_nodes: usize,
    /// Largest element count of any tensor (inputs, constants, intermediates).
    #[arg(long, default_value_t = 1024)]
    pub max_elems: usize,
    /// Also ONNX Runtime's contrib ops (com.microsoft: the Gelu family, FusedMatMul, FusedGemm, FusedConv).
    #[arg(long)]
    pub contrib: bool,
    /// Share of seeds (0..=1) holding one If, Loop or Scan node whose bodies read the enclosing graph.
    #[arg(long, default_value_t = 0.0)]
    pub control_flow: f64,
    #[command(flatten)]
    pub export: super::ExportArgs,
}

impl GenArgs {
    fn config(&self) -> anyhow::Result<SeedConfig> {
        self.export.validate()?;
        anyhow::ensure!(self.max_nodes >= 1, "--max-nodes must be at least 1");
        anyhow::ensure!(
            self.min_nodes <= self.max_nodes,
            "--min-nodes {} exceeds --max-nodes {}",
            self.min_nodes,
            self.max_nodes
        );
        anyhow::ensure!(self.max_elems >= 16, "--max-elems must be at least 16");
        anyhow::ensure!((0.0..=1.0).contains(&self.control_flow), "--control-flow must be between 0 and 1");
        let mut cfg = SeedConfig {
            min_nodes: self.min_nodes.max(1),
            max_nodes: self.max_nodes,
            contrib: self.contrib,
            control_flow: self.control_flow,
            ..Default::default()
        };
        cfg.limits.max_elems = self.max_elems;
        cfg.opset = self.export.opset;
        cfg.ir_version = self.export.ir_version;
        Ok(cfg)
    }
}

pub fn run(cmd: SeedsCmd) -> anyhow::Result<()> {
    match cmd {
        SeedsCmd::Gen(a) => gen(a),
    }
}

fn gen(a: GenArgs) -> anyhow::Result<()> {
    let cfg = a.config()?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let start = std::time::Instant::now();
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) as u64;
    std::thread::scope(|s| -> anyhow::Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (cfg, a) = (&cfg, &a);
                s.spawn(move || -> anyhow::Result<()> {
                    for i in (t..a.count).step_by(threads as usize) {
                        let m = generate(a.seed, i, cfg);
                        onnx::save(&m, &a.out.join(format!("seed_{i:05}.onnx")))?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| w.join().expect("seed generator thread panicked"))
    })?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "wrote {} seeds to {} in {:.2}s ({:.0} seeds/s)",
        a.count,
        a.out.display(),
        secs,
        a.count as f64 / secs.max(1e-9)
    );
    Ok(())
}
