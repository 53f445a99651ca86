//! What defines a campaign: its settings (saved in the checkpoint, so `--resume` continues the same campaign).

use crate::compiler::{Config, TargetSet};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// When a campaign stops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Budget {
    Tests(u64),
    Seconds(f64),
}

/// Everything that defines a campaign; saved in its checkpoint so `--resume` continues the same campaign.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// One target, or two compared with each other.
    pub target: TargetSet,
    pub seed: u64,
    pub budget: Budget,
    pub jobs: usize,
    pub tolerance: f64,
    pub seeds_dir: Option<PathBuf>,
    pub out: PathBuf,
    pub timeout_ms: u64,
    pub mem_mb: u64,
    pub max_nodes: usize,
    pub ort_lib: Option<PathBuf>,
    /// Configurations to run (empty: the target's defaults).
    pub configs: Vec<Config>,
    /// Where tests come from.
    #[serde(default)]
    pub mode: Mode,
    /// The pattern library (synthesis mode).
    #[serde(default)]
    pub patterns: Option<PathBuf>,
    /// Triage findings while the campaign runs (one extra worker).
    #[serde(default = "yes")]
    pub triage: bool,
}

fn yes() -> bool {
    true
}

/// Synthesis from patterns, or the seed-only baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Synth,
    #[default]
    Random,
}
