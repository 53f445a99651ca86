//! What defines a campaign: its settings (saved in the checkpoint, so `--resume` continues the same campaign),
//! and the shard: which slice of its test ids one run makes.

use crate::compiler::{Config, TargetSet};
use crate::oracle::Tolerance;
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
    /// The oracle's tolerance (older checkpoints hold a bare number: their atol).
    #[serde(default)]
    pub tolerance: Tolerance,
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
    /// Which slice of the campaign's test ids this run makes (the whole campaign by default).
    #[serde(default)]
    pub shard: Shard,
    /// A worker process is replaced by a fresh one after this many tests (0: never).
    #[serde(default = "recycle_tests")]
    pub recycle_tests: u64,
    /// A worker process is replaced by a fresh one once its resident memory exceeds this many MiB (0: never).
    #[serde(default = "recycle_mb")]
    pub recycle_mb: u64,
    /// Other ONNX Runtime libraries every minimized ORT bug is re-run with (affected versions).
    #[serde(default)]
    pub also_ort_libs: Vec<PathBuf>,
    /// Directories of other apache-tvm installations every minimized TVM bug is re-run with.
    #[serde(default)]
    pub also_tvm: Vec<PathBuf>,
    /// The known-bugs file (none: the project's `data/known-bugs.toml`).
    #[serde(default)]
    pub known: Option<PathBuf>,
    /// With the default configurations of ORT: one test in this many (chosen by test id) also runs the next
    /// configuration of the rotation of named ones (`compiler::named`); 0 never (nor in checkpoints older than it).
    #[serde(default)]
    pub rotate_every: u64,
    /// How synthesis picks patterns (checkpoints from before `--schedule` resume `uniform`, as they ran).
    #[serde(default)]
    pub schedule: crate::synth::schedule::Schedule,
    /// One passing test in this many (chosen by test id) has ORT save its most optimized graph, which goes back
    /// into the seed pool when the catalog type-checks it; 0 never (nor in checkpoints older than it).
    #[serde(default)]
    pub feedback_every: u64,
    /// Findings written as directories per source key (`finding::exemplars`); `None`: every finding
    /// (`--keep-all`, and checkpoints older than the limit, which wrote every finding).
    #[serde(default)]
    pub exemplars: Option<usize>,
    /// The share of the lanes background triage takes while the campaign runs (`triager::Share`; 0: only CPU
    /// time the campaign leaves idle; checkpoints older than the share resume with it).
    #[serde(default)]
    pub triage_share: f64,
    /// The variations synthesis makes to spliced patterns (`synth::vary`; none: patterns as their tests wrote them).
    #[serde(default)]
    pub vary: Vec<crate::synth::vary::Variation>,
}

/// Default of `--triage-share`: one lane in eight.
pub const TRIAGE_SHARE: f64 = 0.125;

/// Default of `--feedback-every`.
pub const FEEDBACK_EVERY: u64 = 16;

/// Default of `--rotate-every`: an extra configuration on one test in 8 costs about 6% of the test rate.
pub const ROTATE_EVERY: u64 = 8;

/// The extra optimized configuration some tests run (opt-in and kill switches, other levels), by test id.
#[derive(Clone, Debug, Default)]
pub struct Rotation {
    pub every: u64,
    pub configs: Vec<Config>,
    /// One test in this many saves its optimized graph (`Settings::feedback_every`; 0: none).
    pub save_every: u64,
}

/// splitmix64 of a test id: which tests get extras is a function of the id alone, so shards and resumed runs
/// agree.
fn mix(id: u64) -> u64 {
    let mut z = id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rotation {
    /// The extra configuration of test `id`, if it gets one: whether is a function of the id alone (splitmix64
    /// of it), so shards and resumed runs agree; which is the one the test's source chose (`chosen`, an index
    /// into `configs`: the coverage schedule's), else the rotation's configurations in turn. With its index.
    pub fn extra(&self, id: u64, chosen: Option<usize>) -> Option<(usize, &Config)> {
        if self.every == 0 || self.configs.is_empty() {
            return None;
        }
        let z = mix(id);
        let turn = ((z / self.every) % self.configs.len() as u64) as usize;
        let i = chosen.filter(|&i| i < self.configs.len()).unwrap_or(turn);
        (z % self.every == 0).then(|| (i, &self.configs[i]))
    }

    /// Whether test `id` has the target save its most optimized graph (for the seed pool).
    pub fn saves(&self, id: u64) -> bool {
        self.save_every > 0 && mix(id ^ 0xFEED_BAC4) % self.save_every == 0
    }
}

fn yes() -> bool {
    true
}

/// Default of `--recycle-tests`: a few minutes of an ORT worker; a fresh process costs well under a second.
pub const RECYCLE_TESTS: u64 = 20_000;
/// Default of `--recycle-mb`: far above a healthy ORT or TVM worker, far below the address-space limit.
pub const RECYCLE_MB: u64 = 2048;

fn recycle_tests() -> u64 {
    RECYCLE_TESTS
}

fn recycle_mb() -> u64 {
    RECYCLE_MB
}

/// Synthesis from patterns, or the seed-only baseline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Synth,
    #[default]
    Random,
}

/// The `index`-th of `count` disjoint slices of a campaign: the test ids `id` with `id % count == index`. Every
/// test is still made from (campaign seed, test id), so the shards of a campaign together run exactly the tests
/// of the unsharded campaign, and each shard can be run (and resumed) alone. `--tests N` counts the whole
/// campaign's ids: a shard runs the ids below `N` of its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// `K/N` with `0 <= K < N`.
    pub fn parse(s: &str) -> anyhow::Result<Shard> {
        let bad = || anyhow::anyhow!("--shard {s}: expected K/N with 0 <= K < N (e.g. 0/4)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u64, u64) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        anyhow::ensure!(count >= 1 && index < count, bad());
        Ok(Shard { index, count })
    }

    /// The shard's first test id.
    pub fn first(&self) -> u64 {
        self.index
    }

    /// The shard's test id after `id` (one of its own).
    pub fn next(&self, id: u64) -> u64 {
        id + self.count
    }

    pub fn contains(&self, id: u64) -> bool {
        id % self.count == self.index
    }

    /// How many of the ids below `n` are this shard's.
    pub fn tests_below(&self, n: u64) -> u64 {
        if n <= self.index {
            0
        } else {
            (n - self.index).div_ceil(self.count)
        }
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::Shard;

    /// The ids a shard makes below `n`, walked the way the campaign loop walks them.
    fn ids(s: Shard, n: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut id = s.first();
        while id < n {
            out.push(id);
            id = s.next(id);
        }
        out
    }

    #[test]
    fn shards_are_disjoint_and_cover_the_campaign() {
        for count in 1..=5u64 {
            for n in [0u64, 1, 7, 10, 33] {
                let mut all: Vec<u64> = Vec::new();
                for index in 0..count {
                    let s = Shard { index, count };
                    let mine = ids(s, n);
                    assert_eq!(mine.len() as u64, s.tests_below(n), "shard {s} below {n}");
                    assert!(mine.iter().all(|&id| s.contains(id)));
                    all.extend(mine);
                }
                all.sort_unstable();
                // covering and disjoint: every id below n exactly once
                assert_eq!(all, (0..n).collect::<Vec<_>>(), "{count} shards below {n}");
            }
        }
    }

    #[test]
    fn the_rotation_picks_one_test_in_every_and_each_configuration_in_turn() {
        let configs = crate::compiler::named::rotation("1.31.1");
        let r = super::Rotation { every: 8, configs: configs.clone(), save_every: 0 };
        let picked: Vec<&crate::compiler::Config> =
            (0..80_000).filter_map(|id| r.extra(id, None)).map(|e| e.1).collect();
        assert!((9_000..11_000).contains(&picked.len()), "{} of 80000", picked.len());
        for c in &configs {
            assert!(picked.iter().filter(|p| **p == c).count() > 800, "{c} comes too rarely");
        }
        assert_eq!(r.extra(12345, None), r.extra(12345, None));
        // a source's choice picks which, never whether
        let chosen: Vec<usize> = (0..80_000).filter_map(|id| r.extra(id, Some(2))).map(|e| e.0).collect();
        assert_eq!(chosen.len(), picked.len());
        assert!(chosen.iter().all(|&i| i == 2));
        assert!(super::Rotation { every: 0, configs, save_every: 16 }.extra(0, Some(1)).is_none());
    }

    #[test]
    fn shard_flags_parse_and_bad_ones_are_refused() {
        assert_eq!(Shard::parse("1/4").unwrap(), Shard { index: 1, count: 4 });
        assert_eq!(Shard::parse("0/1").unwrap(), Shard::default());
        for bad in ["4/4", "1/0", "1", "a/2", "-1/2", "1/2/3"] {
            let e = Shard::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn settings_saved_before_shards_load_as_the_whole_campaign() {
        let old = r#"{"target":"tract","seed":1,"budget":{"Tests":60},"jobs":1,"tolerance":0.001,"seeds_dir":null,
            "out":"r","timeout_ms":10000,"mem_mb":8192,"max_nodes":10,"ort_lib":null,"configs":[],"mode":"random",
            "patterns":null,"triage":true}"#;
        let s: super::Settings = serde_json::from_str(old).unwrap();
        assert!(s.shard.is_whole());
        let mut s2 = s.clone();
        s2.shard = Shard { index: 2, count: 3 };
        let back: super::Settings = serde_json::from_str(&serde_json::to_string(&s2).unwrap()).unwrap();
        assert_eq!(back.shard.to_string(), "2/3");
    }
}
