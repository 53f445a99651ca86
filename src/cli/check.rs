//! `oatest check`: import models, validate them and type-check them against the op catalog.

use crate::graph::onnx;
use crate::ops::check_graph;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Model files.
    #[arg(required = true)]
    pub models: Vec<PathBuf>,
    /// Skip nodes whose op is not in the catalog instead of failing.
    #[arg(long)]
    pub allow_unknown: bool,
}

pub fn run(a: CheckArgs) -> anyhow::Result<()> {
    let mut failed = 0;
    for path in &a.models {
        let res = onnx::load(path).and_then(|m| {
            check_graph(&m.graph, !a.allow_unknown).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            Ok(m)
        });
        match res {
            Ok(m) => {
                println!("ok {} ({} nodes, opset {})", path.display(), m.graph.node_count(), onnx::describe_opsets(&m))
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {e:#}");
            }
        }
    }
    anyhow::ensure!(failed == 0, "{failed} of {} models failed the check", a.models.len());
    Ok(())
}
