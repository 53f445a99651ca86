//! Command-line interface.
use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "oatest", version, about)]
pub struct Cli {}

pub fn run(_cli: Cli) -> anyhow::Result<()> {
    Ok(())
}
