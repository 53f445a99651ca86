//! Checkpoints: settings, progress and statistics written atomically every few seconds (with stats.json), so
//! a killed campaign resumes losing only the tests in flight.

use super::settings::Settings;
use super::stats::Stats;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Serialize, Deserialize)]
struct Checkpoint {
    version: u32,
    settings: Settings,
    /// Every test below this id has been processed.
    next_id: u64,
    stats: Stats,
}

pub fn checkpoint_path(out: &Path) -> PathBuf {
    out.join("checkpoint.json")
}

/// Reads a campaign's settings and progress for `--resume`.
pub fn load_checkpoint(dir: &Path) -> anyhow::Result<(Settings, u64, Stats)> {
    let path = checkpoint_path(dir);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let c: Checkpoint = serde_json::from_str(&text).with_context(|| format!("{}: not a checkpoint", path.display()))?;
    Ok((c.settings, c.next_id, c.stats))
}

/// Checkpoint and stats.json, both written atomically.
pub(super) fn save(settings: &Settings, next_id: u64, stats: &Stats) -> anyhow::Result<()> {
    let cp = Checkpoint { version: 1, settings: settings.clone(), next_id, stats: stats.clone() };
    crate::util::write_atomic(&checkpoint_path(&settings.out), serde_json::to_string(&cp)?.as_bytes())?;
    crate::util::write_atomic(&settings.out.join("stats.json"), serde_json::to_string_pretty(stats)?.as_bytes())
}
