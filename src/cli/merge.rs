//! `oatest merge RUN_DIR... --out DIR`: the run directories of a campaign's shards joined into one.

use crate::campaign::merge;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' run directories (`oatest fuzz --shard K/N`); those merged into --out before are merged again.
    pub runs: Vec<PathBuf>,
    /// The merged run directory (created; re-running merge into it adds only what is new).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(a: MergeArgs) -> anyhow::Result<()> {
    let r = merge::merge(&a.runs, &a.out)?;
    let n = r.shards.first().map(|s| s.1.count).unwrap_or(0);
    println!("merged {} of {n} shards into {}", r.shards.len(), a.out.display());
    for (dir, shard) in &r.shards {
        println!("  shard {shard}: {}", dir.display());
    }
    if !r.missing.is_empty() {
        let m: Vec<String> = r.missing.iter().map(|k| format!("{k}/{n}")).collect();
        println!("  not merged yet: shard {}", m.join(", "));
    }
    let added: Vec<String> = r.added.iter().map(|(k, v)| format!("{v} {k}")).collect();
    println!(
        "  new: {}; {} files updated, {} representatives replaced",
        if added.is_empty() { "nothing".to_string() } else { added.join(", ") },
        r.updated,
        r.replaced
    );
    for (class, k) in &r.bugs {
        println!("  {class}/: {k} signatures");
    }
    for s in &r.skipped {
        println!("  not yet (its shard is writing it): {s}");
    }
    crate::report::page::write(&a.out, false)?;
    println!("  campaign page: {}", a.out.join("index.html").display());
    Ok(())
}
