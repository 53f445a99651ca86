//! `oatest worker` (internal): host one target and serve run requests on stdin/stdout.

use crate::compiler::{worker::serve, TargetKind};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    pub target: String,
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
}

pub fn run(a: WorkerArgs) -> anyhow::Result<()> {
    serve(&TargetKind::parse(&a.target)?, a.ort_lib.as_deref())
}
