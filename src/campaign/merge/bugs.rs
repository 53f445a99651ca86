//! Bug folders merged: every top-level folder of `<signature>/` directories with a bug.json (`bugs/`, and any
//! other result class filed the same way) gets one directory per signature across shards. The representative is
//! the smallest (confirmed first, then fewest nodes in bug.json's `triage`, as triage's own filing chooses), and
//! `findings` lists every shard's findings of that bug. bug.json is handled as JSON, keeping fields it does not
//! know.

use super::{copy_tree, subdirs, Input, Report};
use crate::finding::record;
use crate::util::replace_dir_atomic;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level folders that are not bug folders even if a child had a bug.json.
const NOT_BUGS: &[&str] = &["findings", "flaky", "invalid", "examples"];

/// One shard's directory of a signature.
struct Candidate {
    dir: PathBuf,
    /// bug.json as read (to see whether it changed while the directory was copied).
    text: String,
    record: Value,
}

impl Candidate {
    /// Smaller is better: confirmed first, then fewer nodes.
    fn rank(&self) -> (bool, u64) {
        let t = &self.record["triage"];
        (!t["confirmed"].as_bool().unwrap_or(false), t["nodes"].as_u64().unwrap_or(u64::MAX))
    }
}

/// The shard's bug.json changed while its directory was copied (its triage filed a smaller representative).
#[derive(Debug)]
struct Changed;

impl std::fmt::Display for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("changed while it was copied")
    }
}

impl std::error::Error for Changed {}

/// The bug folders of the runs: folders whose subdirectories have a bug.json.
fn classes(inputs: &[Input]) -> anyhow::Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for i in inputs {
        for name in subdirs(&i.dir)? {
            if NOT_BUGS.contains(&name.as_str()) || out.contains(&name) {
                continue;
            }
            if subdirs(&i.dir.join(&name))?.iter().any(|s| record::exists(&i.dir.join(&name).join(s))) {
                out.insert(name);
            }
        }
    }
    Ok(out)
}

fn read_candidate(dir: &Path) -> anyhow::Result<Candidate> {
    let (text, record) = record::read_raw(dir)?;
    Ok(Candidate { dir: dir.to_path_buf(), text, record })
}

/// Merges every bug folder of the runs into `out`.
pub(super) fn merge(inputs: &[Input], out: &Path, report: &mut Report) -> anyhow::Result<()> {
    for class in classes(inputs)? {
        let mut by_sig: BTreeMap<String, Vec<Candidate>> = BTreeMap::new();
        for i in inputs {
            for sig in subdirs(&i.dir.join(&class))? {
                let dir = i.dir.join(&class).join(&sig);
                // a directory without bug.json is still being written (bug.json comes last)
                if record::exists(&dir) {
                    by_sig.entry(sig).or_default().push(read_candidate(&dir)?);
                }
            }
        }
        for (sig, cands) in &by_sig {
            merge_one(cands, &out.join(&class).join(sig), &class, report)?;
        }
        report.bugs.insert(class.clone(), subdirs(&out.join(&class))?.len());
    }
    Ok(())
}

/// One signature: the best candidate's directory, with every candidate's findings in bug.json.
fn merge_one(cands: &[Candidate], dst: &Path, class: &str, report: &mut Report) -> anyhow::Result<()> {
    let best = cands.iter().min_by_key(|c| c.rank()).expect("a signature has a candidate");
    let mut findings: Vec<Value> = Vec::new();
    for f in cands.iter().flat_map(|c| c.record["findings"].as_array().into_iter().flatten()) {
        if !findings.contains(f) {
            findings.push(f.clone());
        }
    }
    let mut want = best.record.clone();
    want["findings"] = Value::Array(findings);
    let current: Option<Value> = record::read_raw(dst).ok().map(|(_, v)| v);
    let same_representative = current
        .as_ref()
        .is_some_and(|c| c["representative"] == best.record["representative"] && c["triage"] == best.record["triage"]);
    if same_representative {
        if current.as_ref() != Some(&want) {
            record::write(dst, &want)?;
            report.updated += 1;
        }
        return Ok(());
    }
    let existed = dst.exists();
    let copied = replace_dir_atomic(dst, |tmp| {
        copy_tree(&best.dir, tmp)?;
        let now = record::read_raw(&best.dir).map(|(t, _)| t).unwrap_or_default();
        if now != best.text {
            return Err(Changed.into());
        }
        record::write(tmp, &want)?;
        Ok(())
    });
    match copied {
        Ok(()) if existed => report.replaced += 1,
        Ok(()) => *report.added.entry(class.to_string()).or_default() += 1,
        Err(e) if e.is::<Changed>() => report.skipped.push(format!("{}: {e}", best.dir.display())),
        Err(e) => return Err(e),
    }
    Ok(())
}
