//! `oatest worker` (internal): host one target and serve run requests on stdin/stdout.

use crate::compiler::{worker::serve, TargetKind};
use clap::Args;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    pub target: String,
    #[command(flatten)]
    pub ort: super::OrtLib,
}

pub fn run(a: WorkerArgs) -> anyhow::Result<()> {
    serve(&TargetKind::parse(&a.target)?, a.ort.ort_lib.as_deref())
}
