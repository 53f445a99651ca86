//! What bug.json holds (the typed record of one entry; the file is read and written by
//! [`crate::finding::record`]), and the names of a bug directory's test files.

use crate::oracle::Symptom;
use crate::triage::{Finding, Minimized, Triaged};
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

/// The record of the entry in `dir`; errors name the file.
pub fn read(dir: &Path) -> anyhow::Result<BugRecord> {
    crate::finding::record::read(dir)
}

/// Adds a finding (its source) to the entry in `dir`, unless it is already listed; returns the record as it now
/// is.
pub fn add_finding(dir: &Path, source: &str) -> anyhow::Result<BugRecord> {
    crate::finding::record::add_finding(dir, source)?;
    read(dir)
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
