//! `oatest worker` (internal): host one target and serve run requests on stdin/stdout.

use crate::compiler::{worker::serve, TargetKind};
use clap::Args;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    pub target: String,
    #[command(flatten)]
    pub ort: super::OrtLib,
    /// Serve as a zygote: fork a fresh worker for each request on stdin (a Unix socket).
    #[arg(long)]
    pub zygote: bool,
}

pub fn run(a: WorkerArgs) -> anyhow::Result<()> {
    serve(&TargetKind::parse(&a.target)?, a.ort.ort_lib.as_deref(), a.zygote)
}
