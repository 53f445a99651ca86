//! `oatest merge`: the run directories of one campaign's shards joined into one run directory (stats summed
//! with per-shard entries, findings/flaky/invalid copied, examples and bugs one per pass and per signature).
//! Incremental and atomic: re-merging into the same directory adds only what is new, every write is atomic.

mod bugs;
mod stats;
#[cfg(test)]
mod tests;

pub use stats::{MergedStats, ShardStats};

use super::settings::{Settings, Shard};
use super::stats::Stats;
use crate::triage::classify::Class;
use crate::util::{replace_dir_atomic, write_atomic, write_dir_atomic};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Folders of one directory per test (named by test id, so the shards of a campaign never share a name).
const TEST_DIRS: &[&str] = &["findings", "flaky", "invalid"];

/// Settings that make two runs the same campaign (the rest, such as jobs, budget and paths, may differ).
const CAMPAIGN_KEYS: &[&str] = &["target", "seed", "mode", "max_nodes", "configs", "tolerance"];

/// `merge.json` in the merged directory: which campaign it holds and which run directories went into it.
#[derive(Serialize, Deserialize)]
struct Manifest {
    format: u32,
    campaign: serde_json::Value,
    inputs: Vec<PathBuf>,
}

/// One shard's run directory, read.
struct Input {
    dir: PathBuf,
    settings: Settings,
    next_id: u64,
    stats: Stats,
}

/// What a merge did.
#[derive(Debug, Default)]
pub struct Report {
    /// The runs merged (every run merged into this directory so far), in shard order.
    pub shards: Vec<(PathBuf, Shard)>,
    /// Shards of the campaign that no run directory holds yet.
    pub missing: Vec<u64>,
    /// New directories per folder (`findings`, `flaky`, `invalid`, `examples`, `bugs`, ...).
    pub added: BTreeMap<String, usize>,
    /// Files brought up to date in directories merged before (a finding's triage.json, a bug's findings).
    pub updated: usize,
    /// Examples and bugs whose representative changed (a smaller one came in).
    pub replaced: usize,
    /// Signatures per bug folder in the merged directory.
    pub bugs: BTreeMap<String, usize>,
    /// Bug directories that changed while they were read (their shard is still triaging): the next merge
    /// takes them.
    pub skipped: Vec<String>,
}

/// Merges the run directories `runs` (and those merged into `out` before) into `out`.
pub fn merge(runs: &[PathBuf], out: &Path) -> anyhow::Result<Report> {
    let manifest_path = out.join("merge.json");
    let manifest: Option<Manifest> = if manifest_path.exists() {
        let text = std::fs::read_to_string(&manifest_path)
            .with_context(|| format!("cannot read {}", manifest_path.display()))?;
        Some(serde_json::from_str(&text).with_context(|| format!("{}: not a merge record", manifest_path.display()))?)
    } else {
        let used = std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(false);
        anyhow::ensure!(
            !used,
            "{}: exists and is not a merged run directory (no merge.json): choose a new --out",
            out.display()
        );
        None
    };
    let mut dirs: Vec<PathBuf> = manifest.as_ref().map(|m| m.inputs.clone()).unwrap_or_default();
    for r in runs {
        let dir = std::fs::canonicalize(r)
            .with_context(|| format!("{}: not a run directory (cannot read it)", r.display()))?;
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    anyhow::ensure!(!dirs.is_empty(), "nothing to merge: name the shards' run directories");
    let out_abs = std::fs::canonicalize(out).ok();
    let mut inputs = Vec::new();
    for dir in dirs {
        anyhow::ensure!(Some(&dir) != out_abs.as_ref(), "{}: is the --out directory itself", dir.display());
        anyhow::ensure!(
            super::checkpoint_path(&dir).exists(),
            "{}: not a run directory (no checkpoint.json; a shard writes its first one a few seconds after it starts)",
            dir.display()
        );
        let (settings, next_id, stats) = super::load_checkpoint(&dir).with_context(|| format!("{}", dir.display()))?;
        inputs.push(Input { dir, settings, next_id, stats });
    }
    inputs.sort_by_key(|i| i.settings.shard.index);
    let campaign = check_one_campaign(&inputs, manifest.as_ref().map(|m| (&m.campaign, out)))?;

    let mut report = Report::default();
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut progress = crate::util::Steps::new("merge steps done", TEST_DIRS.len() as u64 + 3);
    for folder in TEST_DIRS {
        merge_test_dirs(&inputs, out, folder, &mut report)?;
        progress.inc(folder);
    }
    merge_counted(&inputs, out)?;
    progress.inc("counted findings");
    merge_examples(&inputs, out, &mut report)?;
    progress.inc("examples");
    bugs::merge(&inputs, out, &mut report)?;
    progress.inc("entries");
    progress.finish();

    let parts: Vec<&Stats> = inputs.iter().map(|i| &i.stats).collect();
    let mut total = stats::sum(&parts);
    total.bugs = report.bugs.get("bugs").copied().unwrap_or(0) as u64;
    for (folder, n) in &report.bugs {
        // entries by class name (`optimizer` is bugs/); a folder of no known class under its own name
        let class = Class::ALL.iter().find(|c| c.folder() == folder).map_or(folder.as_str(), |c| c.name());
        total.entries_by_class.insert(class.to_string(), *n as u64);
    }
    let merged = MergedStats {
        total,
        shards: inputs
            .iter()
            .map(|i| ShardStats {
                dir: i.dir.display().to_string(),
                shard: i.settings.shard.to_string(),
                next_id: i.next_id,
                stats: i.stats.clone(),
            })
            .collect(),
    };
    write_atomic(&out.join("stats.json"), serde_json::to_string_pretty(&merged)?.as_bytes())?;
    super::progress::plots(out, &merged.total);
    let count = inputs[0].settings.shard.count;
    report.shards = inputs.iter().map(|i| (i.dir.clone(), i.settings.shard)).collect();
    report.missing = (0..count).filter(|k| !inputs.iter().any(|i| i.settings.shard.index == *k)).collect();
    let m = Manifest { format: 1, campaign, inputs: inputs.iter().map(|i| i.dir.clone()).collect() };
    write_atomic(&manifest_path, serde_json::to_string_pretty(&m)?.as_bytes())?;
    Ok(report)
}

/// The settings that make a campaign, as JSON (robust to how each is typed).
fn campaign_of(s: &Settings) -> anyhow::Result<serde_json::Value> {
    let all = serde_json::to_value(s)?;
    let picked = CAMPAIGN_KEYS.iter().filter_map(|k| all.get(*k).map(|v| (k.to_string(), v.clone())));
    Ok(serde_json::Value::Object(picked.collect()))
}

/// The runs are shards of one campaign (same campaign settings and target version, as many shards, each once)
/// and of the campaign merged before; returns that campaign's settings.
fn check_one_campaign(
    inputs: &[Input],
    before: Option<(&serde_json::Value, &Path)>,
) -> anyhow::Result<serde_json::Value> {
    let first = &inputs[0];
    let (want, what) = match before {
        Some((c, out)) => (c.clone(), format!("the campaign merged into {} before", out.display())),
        None => (campaign_of(&first.settings)?, first.dir.display().to_string()),
    };
    for i in inputs {
        let have = campaign_of(&i.settings)?;
        if let Some(k) = CAMPAIGN_KEYS.iter().find(|k| have.get(**k) != want.get(**k)) {
            let show = |v: &serde_json::Value| v.get(*k).map(|x| x.to_string()).unwrap_or_else(|| "none".into());
            anyhow::bail!(
                "{}: not the same campaign as {what} ({k} {} here, {} there)",
                i.dir.display(),
                show(&have),
                show(&want)
            );
        }
        anyhow::ensure!(
            i.stats.target_version == first.stats.target_version,
            "{}: ran {} {}, {} ran {}: one merged campaign has one compiler version",
            i.dir.display(),
            i.stats.target,
            i.stats.target_version,
            first.dir.display(),
            first.stats.target_version
        );
        anyhow::ensure!(
            i.settings.shard.count == first.settings.shard.count,
            "{}: shard {} of a campaign in {} shards, {} is shard {}",
            i.dir.display(),
            i.settings.shard,
            i.settings.shard.count,
            first.dir.display(),
            first.settings.shard
        );
    }
    for w in inputs.windows(2) {
        anyhow::ensure!(
            w[0].settings.shard != w[1].settings.shard,
            "{} and {}: both are shard {} (merge each shard once)",
            w[0].dir.display(),
            w[1].dir.display(),
            w[0].settings.shard
        );
    }
    Ok(want)
}

/// The directories in `dir` (sorted, none hidden: `.tmp-*` is a directory being written); none if it is absent.
fn subdirs(dir: &Path) -> anyhow::Result<Vec<String>> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    for e in rd {
        let e = e.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = e.file_name().to_string_lossy().to_string();
        if e.path().is_dir() && !name.starts_with('.') {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Copies the files and folders of `src` into the existing directory `dst`.
fn copy_tree(src: &Path, dst: &Path) -> anyhow::Result<()> {
    for e in std::fs::read_dir(src).with_context(|| format!("cannot list {}", src.display()))? {
        let p = e?.path();
        let to = dst.join(p.file_name().unwrap_or_default());
        if p.is_dir() {
            std::fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
            copy_tree(&p, &to)?;
        } else {
            std::fs::copy(&p, &to).with_context(|| format!("cannot copy {} to {}", p.display(), to.display()))?;
        }
    }
    Ok(())
}

/// Brings the files of `dst` up to date with those of `src` (new or changed files, each written atomically);
/// returns how many were written.
fn sync_tree(src: &Path, dst: &Path) -> anyhow::Result<usize> {
    let mut n = 0;
    for e in std::fs::read_dir(src).with_context(|| format!("cannot list {}", src.display()))? {
        let p = e?.path();
        let name = p.file_name().unwrap_or_default();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let to = dst.join(name);
        if p.is_dir() {
            std::fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
            n += sync_tree(&p, &to)?;
            continue;
        }
        let bytes = std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
        if std::fs::read(&to).ok().as_deref() != Some(&bytes[..]) {
            write_atomic(&to, &bytes)?;
            n += 1;
        }
    }
    Ok(n)
}

/// `findings/`, `flaky/`, `invalid/`: every test's directory, copied once and then kept up to date (triage adds
/// triage.json to a finding later). Two runs holding the same test name is an error.
fn merge_test_dirs(inputs: &[Input], out: &Path, folder: &str, report: &mut Report) -> anyhow::Result<()> {
    let mut seen: BTreeMap<String, &Path> = BTreeMap::new();
    for i in inputs {
        for name in subdirs(&i.dir.join(folder))? {
            if let Some(other) = seen.insert(name.clone(), &i.dir) {
                anyhow::bail!(
                    "{}/{folder}/{name} and {}/{folder}/{name}: two runs hold the same test (are they shards of one \
                     campaign?)",
                    other.display(),
                    i.dir.display()
                );
            }
            let (src, dst) = (i.dir.join(folder).join(&name), out.join(folder).join(&name));
            if dst.exists() {
                report.updated += sync_tree(&src, &dst)?;
            } else {
                write_dir_atomic(&dst, |tmp| copy_tree(&src, tmp))?;
                *report.added.entry(folder.to_string()).or_default() += 1;
            }
        }
    }
    Ok(())
}

/// `findings/counted.tsv`: every shard's counted findings (`finding::exemplars`), in shard order.
fn merge_counted(inputs: &[Input], out: &Path) -> anyhow::Result<()> {
    let name = crate::finding::exemplars::COUNTED_LOG;
    let mut text = String::new();
    for i in inputs {
        let path = i.dir.join("findings").join(name);
        match std::fs::read_to_string(&path) {
            Ok(t) => text.extend(t.lines().filter(|l| l.split('\t').count() == 3).map(|l| format!("{l}\n"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }
    if !text.is_empty() {
        std::fs::create_dir_all(out.join("findings"))?;
        crate::util::write_atomic(&out.join("findings").join(name), text.as_bytes())?;
    }
    Ok(())
}

/// The test id of an example (`"source": "test <id>"` in example.json).
fn example_id(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("example.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["source"].as_str()?.strip_prefix("test ")?.parse().ok()
}

/// `examples/<pass>/`: for each pass the example of the smallest test id across shards (the one the unsharded
/// campaign keeps: its first passing test that fired the pass).
fn merge_examples(inputs: &[Input], out: &Path, report: &mut Report) -> anyhow::Result<()> {
    let mut best: BTreeMap<String, (u64, PathBuf)> = BTreeMap::new();
    for i in inputs {
        for name in subdirs(&i.dir.join("examples"))? {
            let src = i.dir.join("examples").join(&name);
            let Some(id) = example_id(&src) else { continue };
            if best.get(&name).is_none_or(|(b, _)| id < *b) {
                best.insert(name, (id, src));
            }
        }
    }
    for (name, (id, src)) in best {
        let dst = out.join("examples").join(&name);
        if !dst.exists() {
            write_dir_atomic(&dst, |tmp| copy_tree(&src, tmp))?;
            *report.added.entry("examples".into()).or_default() += 1;
        } else if example_id(&dst) != Some(id) {
            replace_dir_atomic(&dst, |tmp| copy_tree(&src, tmp))?;
            report.replaced += 1;
        }
    }
    Ok(())
}
