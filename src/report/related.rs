//! One bug, several culprit sets. The 1-minimal culprit set of one optimizer bug depends on the graph: a
//! fusion that leaves stale graph edges behind (ORT's GemmTransposeFusion rebuilds a Gemm with only the first
//! removed node's input edges) fails with EliminateIdentity in one test and with MatMulAddFusion and
//! CastElimination in another, each time with "Node input ... is not a graph input". A new optimizer entry is
//! *related* to an existing one when both fail the same way (same target; errors of the same error kind, or
//! crashes of the same signal) and their key passes meet; wrong results and hangs carry no second key, so they
//! are never merged across culprit sets. Key passes are the faulty passes without the rewiring ones ([`REWIRING`]:
//! passes that only change which value a consumer reads or share equal values; they expose another pass's
//! broken graph rather than break it), or every faulty pass when only rewiring ones are left. A related
//! finding is filed into the existing entry, whose bug.json lists every culprit set seen (`culprit_sets`).

use super::record::BugRecord;
use crate::finding::signature::error_kind;
use crate::oracle::Symptom;
use crate::triage::classify::Class;
use crate::triage::Triaged;
use std::path::Path;

/// ORT passes that rewire consumers to another value (or merge equal values) and change no computation.
pub const REWIRING: &[&str] = &[
    "EliminateIdentity",
    "NoopElimination",
    "CastElimination",
    "CastChainElimination",
    "EliminateDropout",
    "ExpandElimination",
    "UnsqueezeElimination",
    "EliminateSlice",
    "ConstantSharing",
    "CommonSubexpressionElimination",
    "CommonSubexpressionEliminationApplyOnce",
    "RemoveDuplicateCastTransformer",
];

/// The passes that identify `t`'s bug: its faulty passes without the rewiring ones, or all of them when only
/// rewiring ones are left.
pub fn key_passes(t: &Triaged) -> Vec<String> {
    let all = t.faulty();
    let key: Vec<String> = all.iter().filter(|p| !REWIRING.contains(&p.as_str())).cloned().collect();
    if key.is_empty() {
        all
    } else {
        key
    }
}

/// Whether the entry `rec` and the new triage `t` (of `target`, `symptom`) are one optimizer bug.
pub fn related(rec: &BugRecord, target: &str, symptom: Symptom, t: &Triaged) -> bool {
    let e = &rec.triage;
    if t.class != Class::Optimizer || e.class != Class::Optimizer || rec.target != target || rec.symptom != symptom {
        return false;
    }
    // the second key: how it fails. Wrong values carry none (two wrong-result bugs sharing a pass are not
    // known to be one), hangs only their culprits
    let same_failure = match symptom {
        Symptom::Error => error_kind(&e.detail) == error_kind(&t.detail),
        Symptom::Crash => crate::triage::crash_kind(&e.detail) == crate::triage::crash_kind(&t.detail),
        Symptom::Inconsistency | Symptom::Hang => false,
    };
    if !same_failure {
        return false;
    }
    if e.culprits.is_empty() || t.culprits.is_empty() {
        return false;
    }
    let theirs = key_passes(e);
    key_passes(t).iter().any(|p| theirs.contains(p))
}

/// The signature of an entry in `folder` related to `t`, when there is one (the one with the most findings).
pub fn find(folder: &Path, target: &str, symptom: Symptom, t: &Triaged) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for entry in std::fs::read_dir(folder).ok()?.filter_map(|e| e.ok()) {
        let Some(rec) = read(&entry.path()) else { continue };
        let sig = entry.file_name().to_string_lossy().to_string();
        if sig != t.signature
            && related(&rec, target, symptom, t)
            && best.as_ref().is_none_or(|(n, _)| rec.findings.len() > *n)
        {
            best = Some((rec.findings.len(), sig));
        }
    }
    best.map(|(_, sig)| sig)
}

/// Records `t`'s faulty passes in the culprit sets of the entry in `dir` (written only when new).
pub fn note_culprits(dir: &Path, t: &Triaged) -> anyhow::Result<()> {
    let mut rec = super::record::read(dir)?;
    let mut set = t.faulty();
    set.sort();
    let mut representative = rec.triage.faulty();
    representative.sort();
    let mut changed = false;
    for s in [representative, set] {
        if !s.is_empty() && !rec.culprit_sets.contains(&s) {
            rec.culprit_sets.push(s);
            changed = true;
        }
    }
    if changed {
        crate::finding::record::write(dir, &rec)?;
    }
    Ok(())
}

fn read(dir: &Path) -> Option<BugRecord> {
    super::record::read(dir).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triaged(culprits: &[&str], enablers: &[&str], detail: &str) -> Triaged {
        Triaged {
            culprits: culprits.iter().map(|s| s.to_string()).collect(),
            enablers: enablers.iter().map(|s| s.to_string()).collect(),
            detail: detail.into(),
            ..Triaged::default()
        }
    }

    fn record(t: Triaged) -> BugRecord {
        BugRecord {
            target: "ort".into(),
            target_version: "1".into(),
            symptom: Symptom::Error,
            triage: t,
            representative: String::new(),
            findings: vec![],
            culprit_sets: vec![],
            upstream: Default::default(),
        }
    }

    const MISSING: &str =
        "Invalid model. Node input 'a_1' is not a graph input, initializer, or output of a previous node.";

    #[test]
    fn entries_meet_on_a_pass_that_is_not_only_rewiring() {
        let gemm = record(triaged(&["GemmTransposeFusion", "EliminateIdentity"], &[], MISSING));
        let with_matmul = triaged(&["MatMulAddFusion", "CastElimination", "GemmTransposeFusion"], &[], MISSING);
        assert!(related(&gemm, "ort", Symptom::Error, &with_matmul));
        // sharing only a rewiring pass is no evidence of one bug
        let other = triaged(&["MatMul_BatchNormalization_Fusion", "EliminateIdentity"], &[], MISSING);
        assert!(!related(&gemm, "ort", Symptom::Error, &other));
        // another kind of error, another symptom or target: another bug
        let typed = triaged(&["GemmTransposeFusion"], &[], "Type Error: Type (tensor(float16)) of input");
        assert!(!related(&gemm, "ort", Symptom::Error, &typed));
        assert!(!related(&gemm, "ort", Symptom::Crash, &with_matmul));
        let mut wrong = record(triaged(&["GemmTransposeFusion", "EliminateIdentity"], &[], "output 'y'[0]"));
        wrong.symptom = Symptom::Inconsistency;
        assert!(!related(&wrong, "ort", Symptom::Inconsistency, &triaged(&["GemmTransposeFusion"], &[], "output")));
        assert!(!related(&gemm, "tvm", Symptom::Error, &with_matmul));
        // an enabler is not part of the key
        let enabled =
            triaged(&["QDQSelectorActionTransformer", "GemmTransposeFusion"], &["GemmTransposeFusion"], MISSING);
        assert!(!related(&gemm, "ort", Symptom::Error, &enabled));
        // only rewiring passes: they are the key
        let only = record(triaged(&["ConstantSharing", "CommonSubexpressionElimination"], &[], MISSING));
        assert!(related(&only, "ort", Symptom::Error, &triaged(&["ConstantSharing"], &[], MISSING)));
        // not optimizer bugs: never merged across culprit sets
        let mut reference = with_matmul.clone();
        reference.class = Class::Reference;
        assert!(!related(&gemm, "ort", Symptom::Error, &reference));
    }
}
