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
                if s.tvm_passes.is_empty() {
                    for (p, n) in &s.per_pass {
                        println!("  {n:>5}  {p}");
                    }
                }
                for c in &s.tvm_passes {
                    let what = if c.exercised { "exercised" } else { "NOT exercised" };
                    println!(
                        "  {:>5}  {:<34} {:?}, {what}: {} targets ({} with recorded arguments)",
                        c.patterns, c.pass, c.role, c.targets, c.with_args
                    );
                    for (why, n) in &c.not_targets {
                        println!("           {n} not targets: {why}");
                    }
                }
            }
            for u in &s.unreadable {
                eprintln!("warning: {u}");
            }
            Ok(())
        }
    }
}
