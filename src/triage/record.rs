//! bug.json, the record of one entry (what triage found and every finding that is this bug), read and written
//! here only, and the names of a bug directory's test files.

use super::{Finding, Minimized, Triaged};
use crate::oracle::Symptom;
use crate::util::write_atomic;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// bug.json: what triage found, and every finding that is this bug.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BugRecord {
    pub target: String,
    pub target_version: String,
    pub symptom: Symptom,
    pub triage: Triaged,
    /// The representative's source (finding directory or model file).
    pub representative: String,
    /// Every finding with this signature (sources).
    pub findings: Vec<String>,
    /// Every faulty pass set this bug was seen with (sorted sets; [`super::related`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub culprit_sets: Vec<Vec<String>>,
    /// `known` (the upstream issue it matches, null: new), `versions` (per ORT version: `reproduces`, `no`, ...)
    /// and `fixed_upstream`.
    #[serde(flatten)]
    pub upstream: super::upstream::Upstream,
}

/// The file of an entry's record.
pub const FILE: &str = "bug.json";

/// Whether `dir` holds an entry (its bug.json, written last, is there).
pub fn exists(dir: &Path) -> bool {
    dir.join(FILE).is_file()
}

/// The record of the entry in `dir`; errors name the file.
pub fn read(dir: &Path) -> anyhow::Result<BugRecord> {
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a bug record", path.display()))
}

/// The record of the entry in `dir` as its text and JSON value, every field kept (what merging compares and
/// copies); errors name the file.
pub fn read_raw(dir: &Path) -> anyhow::Result<(String, serde_json::Value)> {
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not a bug record", path.display()))?;
    anyhow::ensure!(
        value["triage"].is_object() && value["findings"].is_array(),
        "{}: not a bug record (no triage or findings)",
        path.display()
    );
    Ok((text, value))
}

/// Writes the record of the entry in `dir` (atomically).
pub fn write(dir: &Path, rec: &BugRecord) -> anyhow::Result<()> {
    write_atomic(&dir.join(FILE), serde_json::to_string_pretty(rec)?.as_bytes())
}

/// Adds a finding (its source) to the entry in `dir` (its bug.json), unless it is already listed; returns the
/// record as it now is.
pub fn add_finding(dir: &Path, source: &str) -> anyhow::Result<BugRecord> {
    let mut rec = read(dir)?;
    if !rec.findings.iter().any(|f| f == source) {
        rec.findings.push(source.to_string());
        write(dir, &rec)?;
    }
    Ok(rec)
}

/// The names of a bug directory's minimized test (`model.onnx`, `recipe.json` when the Relax pattern is
/// needed, `module.json` when it was reduced at Relax level) and of the finding's original test
/// (`original.onnx`, or `original.json` for a recipe).
pub fn files(f: &Finding, m: &Minimized) -> (&'static str, &'static str) {
    let test = if m.relax.is_some() {
        "module.json"
    } else {
        if m.pattern_needed {
            crate::case::RECIPE_FILE
        } else {
            crate::case::ONNX_FILE
        }
    };
    (test, if f.relax.is_some() { "original.json" } else { "original.onnx" })
}
