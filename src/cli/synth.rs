//! `oatest synth`: one synthesis, for debugging: a pattern spliced into a seed graph.

use crate::graph::onnx;
use crate::ops::Rng;
use crate::pattern::Pattern;
use clap::Args;
use rand::SeedableRng;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// The pattern file.
    #[arg(long)]
    pub pattern: PathBuf,
    /// The seed model to splice it into.
    #[arg(long)]
    pub seed_graph: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The synthesis point (index in the seed's topological order; default random).
    #[arg(long)]
    pub point: Option<usize>,
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(a: SynthArgs) -> anyhow::Result<()> {
    let p = Pattern::load(&a.pattern)?;
    let seed = onnx::load(&a.seed_graph)?;
    let mut rng = Rng::seed_from_u64(a.seed);
    let (m, info) = crate::synth::splice(&seed, &p, &mut rng, a.seed, a.point)
        .map_err(|e| anyhow::anyhow!("cannot splice {} into {}: {e}", a.pattern.display(), a.seed_graph.display()))?;
    onnx::save(&m, &a.out)?;
    println!(
        "spliced {} ({} nodes) into {} at point {}: inputs fed {:?}, bridges {:?}, {} output(s) connected; wrote {} ({} nodes)",
        p.meta.pass,
        p.model.graph.node_count(),
        a.seed_graph.display(),
        info.point,
        info.feeds,
        info.bridge_ops,
        info.connected,
        a.out.display(),
        m.graph.node_count()
    );
    Ok(())
}
