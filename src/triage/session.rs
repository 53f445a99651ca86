//! Triage of a run's findings, one after another: the first finding of each coarse signature is triaged in
//! full (culprits, class, reduction); a later one is attached to an entry of its coarse signature when a cheap
//! check says it is the same bug (its own model shows the symptom with only the entry's culprits on, not with
//! any of them off, in the entry's class; the entry of its source key's first finding is checked first), and
//! triaged in full, making a new entry, when no entry's check agrees. An error whose source key and key passes
//! are those of a finding already triaged is attached to that finding's entry without a run.
//! Every finding ends in an entry.

use super::classify::Semantic;
use super::reduce::Limits;
use super::{triage_dir, Filed, Filer, Finding, Reproducer};
use crate::compiler::worker::Worker;
use crate::finding::record;
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
    /// Source key -> the entry its first triaged finding went to (tried first for the key's later findings);
    /// (source key, key passes) -> the entry of the first finding with both.
    by_key: HashMap<String, Filed>,
    by_key_passes: HashMap<(String, Vec<String>), Filed>,
    /// Files what a full triage learned (the report floor's entry writer).
    filer: Box<dyn Filer>,
}

impl Session {
    /// A session over the run directory `run`; with `known`, it knows the entries its already triaged findings
    /// made (else every signature's first finding is triaged again). `background`: the semantic reference only
    /// takes CPU time others leave. `filer` files what a full triage learns.
    pub fn new(
        run: &Path,
        oracle: Oracle,
        limits: Limits,
        known: bool,
        background: bool,
        filer: Box<dyn Filer>,
    ) -> Session {
        let mut entries: HashMap<String, Vec<(usize, Filed)>> = HashMap::new();
        let triaged = if known { crate::finding::finding_dirs(run, false).unwrap_or_default() } else { Vec::new() };
        let mut by_key: HashMap<String, Filed> = HashMap::new();
        let mut by_key_passes: HashMap<(String, Vec<String>), Filed> = HashMap::new();
        for dir in triaged {
            let (Ok(meta), Some(filed)) = (crate::finding::load_meta(&dir), load_filed(&dir)) else { continue };
            if !meta.key.is_empty() {
                by_key.entry(meta.key.clone()).or_insert_with(|| filed.clone());
                by_key_passes.entry((meta.key, meta.key_passes)).or_insert_with(|| filed.clone());
            }
            let e = count(entries.entry(meta.signature).or_default(), &filed);
            // a finding triaged in full describes its entry better than one attached to it
            if e.triage.method == ATTACHED && filed.triage.method != ATTACHED {
                *e = filed;
            }
        }
        let semantic = Semantic::new(background);
        Session { run: run.to_path_buf(), oracle, limits, semantic, entries, by_key, by_key_passes, filer }
    }

    /// Triages one finding directory (attached, or in full) and writes its `triage.json`. `Ok(None)` for
    /// findings without a pass set (cross-target).
    pub fn triage(&mut self, dir: &Path, worker: &mut Worker) -> anyhow::Result<Option<Filed>> {
        let meta = crate::finding::load_meta(dir)?;
        let (coarse, key) = (meta.signature.clone(), meta.key.clone());
        let mut known = self.entries.get(&coarse).cloned().unwrap_or_default();
        known.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
        let both = (key.clone(), meta.key_passes.clone());
        // an error of the same source key under the same key passes has the same message under the same passes:
        // the same bug, attached without a run (a crash or hang says only how the process ended, and reports no
        // passes; an inconsistency's values differ)
        let certain = meta.symptom == Symptom::Error && !meta.key_passes.is_empty();
        if let Some(entry) = self.by_key_passes.get(&both).filter(|_| certain) {
            let entry = entry.clone();
            let filed = self.attach_certain(dir, &meta, &entry)?;
            count(self.entries.entry(coarse).or_default(), &entry);
            return Ok(Some(filed));
        }
        // otherwise the entry of the key's first finding is checked first
        if let Some(entry) = self.by_key.get(&key).cloned() {
            known.retain(|(_, e)| e.bug_dir != entry.bug_dir);
            known.insert(0, (usize::MAX, entry));
        }
        // loaded once for every entry it is checked against (None: cross-target, nothing to attach)
        let finding = if known.is_empty() { None } else { Finding::load(dir)? };
        for (_, entry) in known.iter().take(MAX_TRIES) {
            let Some(f) = &finding else { break };
            if let Some(filed) = self.attach(dir, f.clone(), worker, entry)? {
                count(self.entries.entry(coarse).or_default(), entry);
                self.remember(both, entry);
                return Ok(Some(filed));
            }
        }
        let (oracle, limits) = (self.oracle.clone(), self.limits);
        let filed = triage_dir(dir, &self.run, worker, &mut self.semantic, oracle, limits, self.filer.as_mut())?;
        if let Some(f) = &filed {
            count(self.entries.entry(coarse).or_default(), f);
            self.remember(both, f);
        }
        Ok(filed)
    }

    /// Remembers the entry a finding of (source key, key passes) `both` went to.
    fn remember(&mut self, both: (String, Vec<String>), entry: &Filed) {
        if both.0.is_empty() {
            return; // a finding of an older campaign, without a key
        }
        self.by_key.entry(both.0.clone()).or_insert_with(|| entry.clone());
        self.by_key_passes.entry(both).or_insert_with(|| entry.clone());
    }

    /// Attaches a finding to `entry` without running anything: it is an error whose source key and key passes are
    /// those of a finding the entry already holds (so its message is that finding's, under the same passes).
    fn attach_certain(&mut self, dir: &Path, meta: &crate::finding::Meta, entry: &Filed) -> anyhow::Result<Filed> {
        record::add_finding(Path::new(&entry.bug_dir), &dir.display().to_string())?;
        let mut t = entry.triage.clone();
        t.method = ATTACHED.into();
        t.dd_note = Some(format!(
            "attached to {} without a run: the same source key {} (the message) and key passes as a finding it holds",
            entry.signature, meta.key
        ));
        (t.dd_runs, t.runs, t.reduction_checks) = (0, 0, 0);
        let filed =
            Filed { signature: entry.signature.clone(), bug_dir: entry.bug_dir.clone(), new_bug: false, triage: t };
        crate::finding::write_triaged(dir, &filed)?;
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
        record::add_finding(Path::new(&entry.bug_dir), &r.finding.source)?;
        let mut t = entry.triage.clone();
        t.method = ATTACHED.into();
        t.dd_note = Some(format!("attached to {} by a check of its culprits on this finding's model", entry.signature));
        (t.dd_runs, t.runs, t.original_nodes, t.reduction_checks) = (0, r.runs, nodes, 0);
        let filed =
            Filed { signature: entry.signature.clone(), bug_dir: entry.bug_dir.clone(), new_bug: false, triage: t };
        crate::finding::write_triaged(dir, &filed)?;
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
    crate::finding::read_triaged(dir)
}
