//! Triage of a run's findings, one after another: the first finding of each coarse signature is triaged in
//! full (culprits, class, reduction); a later one is attached to an entry of its coarse signature when a cheap
//! check says it is the same bug (its own model shows the symptom with only the entry's culprits on, not with
//! any of them off, in the entry's class), and triaged in full, making a new entry, when no entry's check
//! agrees. Every finding ends in an entry.

use super::classify::Semantic;
use super::reduce::Limits;
use super::upstream::Labeler;
use super::{report, triage_dir, Filed, Finding, Reproducer};
use crate::compiler::worker::Worker;
use crate::oracle::{Oracle, Symptom};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub struct Session {
    run: PathBuf,
    oracle: Oracle,
    limits: Limits,
    semantic: Semantic,
    /// Coarse signature -> the entries its findings triaged in full made (most attached findings first).
    entries: HashMap<String, Vec<(usize, Filed)>>,
    /// Labels new entries with what upstream knows (known issue, affected versions).
    labeler: Labeler,
}

impl Session {
    /// A session over the run directory `run`; with `known`, it knows the entries its already triaged findings
    /// made (else every signature's first finding is triaged again). `background`: the semantic reference only
    /// takes CPU time others leave.
    pub fn new(run: &Path, oracle: Oracle, limits: Limits, known: bool, background: bool) -> Session {
        let mut entries: HashMap<String, Vec<(usize, Filed)>> = HashMap::new();
        let triaged = if known { crate::finding::finding_dirs(run, false).unwrap_or_default() } else { Vec::new() };
        for dir in triaged {
            let (Ok(meta), Some(filed)) = (crate::finding::load_meta(&dir), load_filed(&dir)) else { continue };
            let e = count(entries.entry(meta.signature).or_default(), &filed);
            // a finding triaged in full describes its entry better than one attached to it
            if e.triage.method == ATTACHED && filed.triage.method != ATTACHED {
                *e = filed;
            }
        }
        let labeler = Labeler::default();
        Session { run: run.to_path_buf(), oracle, limits, semantic: Semantic::new(background), entries, labeler }
    }

    /// Labels the entries it files with `labeler` (known upstream issues, other ORT builds).
    pub fn with_labeler(mut self, labeler: Labeler) -> Session {
        self.labeler = labeler;
        self
    }

    /// Triages one finding directory (attached, or in full) and writes its `triage.json`. `Ok(None)` for
    /// findings without a pass set (cross-target).
    pub fn triage(&mut self, dir: &Path, worker: &mut Worker) -> anyhow::Result<Option<Filed>> {
        let coarse = crate::finding::load_meta(dir)?.signature;
        let mut known = self.entries.get(&coarse).cloned().unwrap_or_default();
        known.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
        // loaded once for every entry it is checked against (None: cross-target, nothing to attach)
        let finding = if known.is_empty() { None } else { Finding::load(dir)? };
        for (_, entry) in known.iter().take(MAX_TRIES) {
            let Some(f) = &finding else { break };
            if let Some(filed) = self.attach(dir, f.clone(), worker, entry)? {
                count(self.entries.entry(coarse).or_default(), entry);
                return Ok(Some(filed));
            }
        }
        let (oracle, limits) = (self.oracle.clone(), self.limits);
        let filed = triage_dir(dir, &self.run, worker, &mut self.semantic, oracle, limits, &mut self.labeler)?;
        if let Some(f) = &filed {
            count(self.entries.entry(coarse).or_default(), f);
        }
        Ok(filed)
    }

    /// Attaches `finding` (of directory `dir`) to `entry` when the cheap check confirms it; `Ok(None)` when it
    /// does not.
    fn attach(
        &mut self,
        dir: &Path,
        finding: Finding,
        worker: &mut Worker,
        entry: &Filed,
    ) -> anyhow::Result<Option<Filed>> {
        let nodes = finding.case.model.graph.node_count();
        let case = finding.case.clone();
        let mut r = Reproducer::new(worker, self.oracle.clone(), finding, Some(&mut self.semantic));
        if r.finding.symptom == Symptom::Inconsistency {
            r.keep_class = Some(entry.triage.class);
        }
        if r.check(&case, &entry.triage.culprits).is_none() {
            return Ok(None);
        }
        report::add_finding(Path::new(&entry.bug_dir), &r.finding.source)?;
        let mut t = entry.triage.clone();
        t.method = ATTACHED.into();
        t.dd_note = Some(format!("attached to {} by a check of its culprits on this finding's model", entry.signature));
        (t.dd_runs, t.runs, t.original_nodes, t.reduction_checks) = (0, r.runs, nodes, 0);
        let filed =
            Filed { signature: entry.signature.clone(), bug_dir: entry.bug_dir.clone(), new_bug: false, triage: t };
        crate::util::write_atomic(&dir.join("triage.json"), serde_json::to_string_pretty(&filed)?.as_bytes())?;
        Ok(Some(filed))
    }
}

/// Counts one more finding of the entry `filed` names in `list` (adding it when new); returns that entry.
fn count<'a>(list: &'a mut Vec<(usize, Filed)>, filed: &Filed) -> &'a mut Filed {
    match list.iter().position(|(_, e)| e.bug_dir == filed.bug_dir) {
        Some(i) => list[i].0 += 1,
        None => list.push((1, filed.clone())),
    }
    let i = list.iter().position(|(_, e)| e.bug_dir == filed.bug_dir).expect("just counted");
    &mut list[i].1
}

/// How many entries of its coarse signature a finding is checked against before it is triaged in full.
const MAX_TRIES: usize = 16;

/// The `method` of a finding attached to an existing entry.
pub const ATTACHED: &str = "attached";

/// A finding directory's `triage.json`, when it has a readable one.
pub fn load_filed(dir: &Path) -> Option<Filed> {
    let text = std::fs::read_to_string(dir.join("triage.json")).ok()?;
    serde_json::from_str(&text).ok()
}
