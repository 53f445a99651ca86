//! `oatest patterns stats`: what a pattern library holds.

use crate::pattern::library_stats;
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum PatternsCmd {
    /// Patterns per pass, passes covered, granularity split.
    Stats {
        /// The library directory.
        #[arg(default_value = "patterns/ort")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: PatternsCmd) -> anyhow::Result<()> {
    match cmd {
        PatternsCmd::Stats { dir, json } => {
            anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
            let s = library_stats(&dir)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&s)?);
            } else {
                println!("{}: {} patterns over {} passes", dir.display(), s.total, s.passes_covered);
                for (g, n) in &s.per_granularity {
                    println!("  {g:<10} {n}");
                }
                for (p, n) in &s.per_pass {
                    println!("  {n:>5}  {p}");
                }
            }
            for u in &s.unreadable {
                eprintln!("warning: {u}");
            }
            Ok(())
        }
    }
}
