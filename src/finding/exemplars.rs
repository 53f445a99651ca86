//! Deduplication at the source: a finding's source key ([`super::signature::source_key`]) decides whether it is
//! written as a directory (an exemplar: one of the first `limit` findings of its key, or a later one that fired a
//! key pass none of the key's exemplars fired, up to [`COVER`] times `limit`: the culprit of a second bug behind
//! one message is among the passes its findings fired; or one that no culprit set triage found for the key can
//! explain, up to [`EXPLAIN`] times `limit`) or only counted: its key's count grows and one line (test id, key,
//! symptom) is appended to `findings/counted.tsv`, from which any counted finding can be made again from
//! (campaign seed, test id). Nothing is lost: the counts sum to the raw findings.

use crate::oracle::Symptom;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The exemplars a key gets by default.
pub const DEFAULT_LIMIT: usize = 8;

/// A key's exemplars, at most this many times the limit, so that they fire every pass its findings fired.
pub const COVER: usize = 4;

/// A key's exemplars, at most this many times the limit, so that triage sees every finding none of the key's
/// culprit sets can explain (one message, e.g. "a node reads a value nothing defines", stands for many passes' bugs).
pub const EXPLAIN: usize = 8;

/// The log of counted findings, in the findings directory.
pub const COUNTED_LOG: &str = "counted.tsv";

/// What the campaign knows of one source key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyCount {
    /// The coarse signature the key refines.
    pub coarse: String,
    /// The primary symptom's name.
    pub symptom: String,
    /// Raw findings with this key: written ones and counted ones.
    pub count: u64,
    /// Of them, those written as finding directories.
    pub written: u64,
    /// The first and the last test id with this key.
    pub first: u64,
    pub last: u64,
    /// Campaign seconds at which the key was first seen (the discovery curve).
    pub first_sec: f64,
    /// The key passes its exemplars fired, together.
    #[serde(default)]
    pub passes: BTreeSet<String>,
    /// The culprit sets triage found for its findings so far.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub culprits: BTreeSet<Vec<String>>,
}

impl KeyCount {
    /// Whether a finding that fired `passes` may be a bug triage already knows for this key: one of its culprit
    /// sets ran in it (each culprit a fired pass, under any instance name). A rewrite rule counts only when the
    /// test attributed it: its container fires in nearly every test, so its firing explains nothing. True while
    /// triage knows nothing of the key yet.
    pub fn explains(&self, passes: &[String]) -> bool {
        use crate::compiler::rules::canonical;
        let fired = |c: &String| passes.iter().any(|p| canonical(p) == canonical(c));
        self.culprits.is_empty() || self.culprits.iter().any(|set| !set.is_empty() && set.iter().all(fired))
    }
}

/// The source dedup of one campaign: the keys' counts (kept in the campaign's statistics, so a resumed campaign
/// goes on counting) and the log of counted findings.
pub struct Exemplars {
    /// Exemplars per key; `None`: every finding is written (`--keep-all`).
    limit: Option<usize>,
    log: PathBuf,
}

impl Exemplars {
    /// The dedup of the run directory `run`, writing at most `limit` findings per key (`None`: all).
    pub fn new(run: &Path, limit: Option<usize>) -> Exemplars {
        Exemplars { limit, log: run.join("findings").join(COUNTED_LOG) }
    }

    /// Counts a finding of `key` that fired the key passes `passes` (test `id`, found at `elapsed` campaign
    /// seconds) in `keys`; true when it is to be written as a directory, false when it was counted (and logged).
    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &self,
        keys: &mut BTreeMap<String, KeyCount>,
        key: &str,
        passes: &[String],
        coarse: &str,
        symptom: Symptom,
        id: u64,
        elapsed: f64,
    ) -> anyhow::Result<bool> {
        let k = keys.entry(key.to_string()).or_insert_with(|| KeyCount {
            coarse: coarse.to_string(),
            symptom: symptom.name().to_string(),
            first: id,
            first_sec: elapsed,
            ..Default::default()
        });
        k.count += 1;
        k.last = id;
        let new_pass = passes.iter().any(|p| !k.passes.contains(p));
        let unexplained = !k.explains(passes);
        let written = k.written as usize;
        let more = |l: usize| (new_pass && written < COVER * l) || (unexplained && written < EXPLAIN * l);
        if self.limit.is_none_or(|l| written < l || more(l)) {
            k.written += 1;
            k.passes.extend(passes.iter().cloned());
            return Ok(true);
        }
        self.append(id, key, symptom)?;
        Ok(false)
    }

    fn append(&self, id: u64, key: &str, symptom: Symptom) -> anyhow::Result<()> {
        if let Some(dir) = self.log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        // one write per line: a killed campaign leaves at most a torn last line, which reading skips
        f.write_all(format!("{id}\t{key}\t{symptom}\n").as_bytes())
            .with_context(|| format!("cannot append to {}", self.log.display()))
    }
}

/// The counted findings of a run: key -> test ids (each once; a resumed campaign may log a test twice).
pub fn counted(run: &Path) -> anyhow::Result<BTreeMap<String, BTreeSet<u64>>> {
    let path = run.join("findings").join(COUNTED_LOG);
    let mut out: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    for line in text.lines() {
        let mut parts = line.split('\t');
        let (Some(id), Some(key), Some(_)) = (parts.next(), parts.next(), parts.next()) else { continue };
        let Ok(id) = id.parse::<u64>() else { continue };
        out.entry(key.to_string()).or_default().insert(id);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_findings_of_a_key_are_written_and_the_rest_counted_and_logged() {
        let run = std::env::temp_dir().join(format!("oatest-exemplars-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        let ex = Exemplars::new(&run, Some(2));
        let mut keys = BTreeMap::new();
        let p = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut admit = |id: u64, key: &str, passes: &[&str]| {
            ex.admit(&mut keys, key, &p(passes), "c", Symptom::Error, id, 1.0).unwrap()
        };
        let written = [
            admit(0, "a", &["A"]),
            admit(1, "a", &["A", "B"]),
            admit(2, "a", &["B"]),
            admit(3, "b", &["A"]),
            admit(4, "a", &["A"]),
            // a pass none of the key's exemplars fired: written, to cover it
            admit(5, "a", &["A", "C"]),
        ];
        assert_eq!(written, [true, true, false, true, false, true]);
        assert_eq!((keys["a"].count, keys["a"].written, keys["a"].first, keys["a"].last), (5, 3, 0, 5));
        assert_eq!(keys.values().map(|k| k.count).sum::<u64>(), 6, "the counts sum to the raw findings");
        // up to COVER times the limit
        for id in 6..20 {
            ex.admit(&mut keys, "a", &p(&[&format!("P{id}")]), "c", Symptom::Error, id, 1.0).unwrap();
        }
        assert_eq!(keys["a"].written as usize, COVER * 2);
        // a torn last line (a killed campaign) and a test logged twice (a resumed one) are read as they were meant
        let log = run.join("findings").join(COUNTED_LOG);
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str("4\ta\terror\n77\ta");
        std::fs::write(&log, text).unwrap();
        let c = counted(&run).unwrap();
        assert_eq!(c["a"].iter().copied().take(3).collect::<Vec<_>>(), [2, 4, 11], "{c:?}");
        assert!(!c["a"].contains(&77) && !c.contains_key("b"));
        assert_eq!(c["a"].len() as u64, keys["a"].count - keys["a"].written, "each counted finding once");
        let all = Exemplars::new(&run, None);
        assert!(all.admit(&mut keys, "a", &[], "c", Symptom::Error, 99, 2.0).unwrap(), "--keep-all writes every one");
        let _ = std::fs::remove_dir_all(&run);
    }

    /// Once triage named a key's culprits, a finding past the limit in which none of them ran is written: the
    /// same message may be another pass's bug (issue 32's no-bug-lost pair lost two entries so).
    #[test]
    fn findings_no_culprit_set_of_their_key_explains_are_written() {
        let run = std::env::temp_dir().join(format!("oatest-explain-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        let ex = Exemplars::new(&run, Some(1));
        let mut keys = BTreeMap::new();
        let p = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let admit = |keys: &mut BTreeMap<String, KeyCount>, id: u64, passes: &[&str]| {
            ex.admit(keys, "b", &p(passes), "c", Symptom::Error, id, 1.0).unwrap()
        };
        assert!(admit(&mut keys, 1, &["A"]), "the key's exemplar");
        assert!(!admit(&mut keys, 2, &["A"]), "triage knows nothing yet: counted");
        keys.get_mut("b").unwrap().culprits.insert(p(&["A", "Z"]));
        assert!(admit(&mut keys, 3, &["A"]), "A alone does not explain it: A+Z is the known bug");
        keys.get_mut("b").unwrap().culprits.insert(p(&["A"]));
        assert!(!admit(&mut keys, 4, &["A"]), "an explained finding is counted");
        assert_eq!(keys["b"].count, 4);
        // (a pass runs under any of its instances; a rule's container firing does not say the rule did: the
        // no-bug-lost pair lost a ConstantFolding error behind DivMulFusion + EliminateIdentity so)
        let mut t = KeyCount::default();
        t.culprits.insert(p(&["EliminateIdentity", "DivMulFusion"]));
        assert!(!t.explains(&p(&["ConstantFolding", "Level1_RuleBasedTransformer"])));
        assert!(t.explains(&p(&["DivMulFusion", "EliminateIdentity", "Level1_RuleBasedTransformer"])));
        t.culprits.insert(p(&["TransposeOptimizer"]));
        assert!(t.explains(&p(&["TransposeOptimizer_CPUExecutionProvider"])));
        let _ = std::fs::remove_dir_all(&run);
    }
}
