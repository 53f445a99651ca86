//! Triage of a run's findings, one after another: the first finding of each coarse signature is triaged in
//! full (culprits, class, reduction); a later one is attached to an entry of its coarse signature when a cheap
//! check says it is the same bug (its own model shows the symptom with only the entry's culprits on, not with
//! any of them off, in the entry's class; the entry of its source key's first finding is checked first; never an
//! `undecided` entry, which says nothing about which bug it holds), and
//! triaged in full, making a new entry, when no entry's check agrees. An error whose source key and key passes
//! are those of a finding already triaged is attached to that finding's entry without a run.
//! Every finding ends in an entry. A session is shared by lanes, each with its own worker and semantic
//! reference (`oatest triage --jobs`, a campaign's finishing triage): what it knows is behind one lock, and
//! entries are written under another, so one entry's bug.json is never written by two lanes at once.

use super::classify::Semantic;
use super::reduce::Limits;
use super::{triage_dir, Filed, Filer, Finding, Reproducer};
use crate::compiler::worker::Worker;
use crate::finding::record;
use crate::oracle::{Oracle, Symptom};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub struct Session {
    run: PathBuf,
    oracle: Oracle,
    limits: Limits,
    background: bool,
    known: Mutex<Known>,
    /// Files what a full triage learned (the report floor's entry writer); held while an entry is written.
    filer: Mutex<Box<dyn Filer>>,
}

/// What the session knows of the entries so far.
#[derive(Default)]
struct Known {
    /// Coarse signature -> the entries its findings triaged in full made (most attached findings first).
    entries: HashMap<String, Vec<(usize, Filed)>>,
    /// Source key -> the entry its first triaged finding went to (tried first for the key's later findings);
    /// (source key, key passes) -> the entry of the first finding with both.
    by_key: HashMap<String, Filed>,
    by_key_passes: HashMap<(String, Vec<String>), Filed>,
}

impl Known {
    /// Remembers the entry a finding of (source key, key passes) `both` and coarse signature `coarse` went to.
    fn remember(&mut self, coarse: String, both: (String, Vec<String>), entry: &Filed) {
        count(self.entries.entry(coarse).or_default(), entry);
        if both.0.is_empty() {
            return; // a finding of an older campaign, without a key
        }
        keep_first(&mut self.by_key, both.0.clone(), entry);
        keep_first(&mut self.by_key_passes, both, entry);
    }
}

/// Keeps the entry of a key's first finding, unless that one is not [`attachable`] and `entry` is: the later
/// findings of a key whose first went `undecided` (its symptom did not come back) then attach to the entry a
/// later one made (a campaign's FuseTIR error went through a full triage twice more, 288 runs, for this).
fn keep_first<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Filed>, key: K, entry: &Filed) {
    match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(mut o) => {
            if !attachable(o.get()) && attachable(entry) {
                o.insert(entry.clone());
            }
        }
        std::collections::hash_map::Entry::Vacant(v) => {
            v.insert(entry.clone());
        }
    }
}

/// Triage's filer shared by lanes: each filing holds the lock.
struct Locked<'a>(&'a Mutex<Box<dyn Filer>>);

impl Filer for Locked<'_> {
    fn file(
        &mut self,
        folder: &Path,
        r: &mut Reproducer,
        t: &mut super::Triaged,
        m: &super::Minimized,
    ) -> anyhow::Result<(PathBuf, bool)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).file(folder, r, t, m)
    }
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
                keep_first(&mut by_key, meta.key.clone(), &filed);
                keep_first(&mut by_key_passes, (meta.key, meta.key_passes), &filed);
            }
            let e = count(entries.entry(meta.signature).or_default(), &filed);
            // a finding triaged in full describes its entry better than one attached to it
            if e.triage.method == ATTACHED && filed.triage.method != ATTACHED {
                *e = filed;
            }
        }
        let known = Mutex::new(Known { entries, by_key, by_key_passes });
        Session { run: run.to_path_buf(), oracle, limits, background, known, filer: Mutex::new(filer) }
    }

    /// A semantic reference for one lane of this session (started on first use).
    pub fn semantic(&self) -> Semantic {
        Semantic::new(self.background)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Triages one finding directory (attached, or in full) with a lane's `worker` and `semantic` reference, and
    /// writes its `triage.json`. `Ok(None)` for findings without a pass set (cross-target).
    pub fn triage(&self, dir: &Path, worker: &mut Worker, semantic: &mut Semantic) -> anyhow::Result<Option<Filed>> {
        let meta = crate::finding::load_meta(dir)?;
        let (coarse, key) = (meta.signature.clone(), meta.key.clone());
        let both = (key.clone(), meta.key_passes.clone());
        // an error of the same source key under the same key passes has the same message under the same passes:
        // the same bug, attached without a run (a crash or hang says only how the process ended, and reports no
        // passes; an inconsistency's values differ)
        let certain = meta.symptom == Symptom::Error && !meta.key_passes.is_empty();
        let (sure, mut candidates) = {
            let k = self.known();
            let sure = k.by_key_passes.get(&both).filter(|e| certain && attachable(e)).cloned();
            let mut candidates = k.entries.get(&coarse).cloned().unwrap_or_default();
            candidates.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
            // otherwise the entry of the key's first finding is checked first
            if let Some(entry) = k.by_key.get(&key).cloned() {
                candidates.retain(|(_, e)| e.bug_dir != entry.bug_dir);
                candidates.insert(0, (usize::MAX, entry));
            }
            let unreferenced = dir.join(crate::case::RECIPE_FILE).is_file();
            candidates.retain(|(_, e)| attachable_to(e, unreferenced));
            (sure, candidates)
        };
        if let Some(entry) = sure {
            let filed = self.attach_certain(dir, &meta, &entry)?;
            self.known().remember(coarse, both, &entry);
            return Ok(Some(filed));
        }
        // loaded once for every entry it is checked against (None: cross-target, nothing to attach)
        let finding = if candidates.is_empty() { None } else { Finding::load(dir)? };
        candidates.truncate(MAX_TRIES);
        for (_, entry) in &candidates {
            let Some(f) = &finding else { break };
            if let Some(filed) = self.attach(dir, f.clone(), worker, semantic, entry)? {
                self.known().remember(coarse, both, entry);
                return Ok(Some(filed));
            }
        }
        let (oracle, limits) = (self.oracle.clone(), self.limits);
        let filed = triage_dir(dir, &self.run, worker, semantic, oracle, limits, &mut Locked(&self.filer))?;
        if let Some(f) = &filed {
            self.known().remember(coarse, both, f);
        }
        Ok(filed)
    }

    /// Adds a finding to the entry in `bug_dir`, holding the filer's lock (no other lane writes it meanwhile).
    fn add_finding(&self, bug_dir: &str, source: &str) -> anyhow::Result<()> {
        let _writing = self.filer.lock().unwrap_or_else(|e| e.into_inner());
        record::add_finding(Path::new(bug_dir), source)
    }

    /// Attaches a finding to `entry` without running anything: it is an error whose source key and key passes are
    /// those of a finding the entry already holds (so its message is that finding's, under the same passes).
    fn attach_certain(&self, dir: &Path, meta: &crate::finding::Meta, entry: &Filed) -> anyhow::Result<Filed> {
        self.add_finding(&entry.bug_dir, &dir.display().to_string())?;
        let mut t = entry.triage.clone();
        t.method = ATTACHED.into();
        t.dd_note = Some(format!(
            "attached to {} without a run: the same source key {} (the message) and key passes as a finding it holds",
            entry.signature, meta.key
        ));
        (t.dd_runs, t.runs, t.reduction_checks) = (0, 0, 0);
        let (signature, bug_dir) = (entry.signature.clone(), entry.bug_dir.clone());
        let filed = Filed { signature, bug_dir, new_bug: false, triage: t, more: Vec::new() };
        crate::finding::write_triaged(dir, &filed)?;
        Ok(filed)
    }

    /// Attaches `finding` (of directory `dir`) to `entry` when the cheap check confirms it; `Ok(None)` when it
    /// does not.
    fn attach(
        &self,
        dir: &Path,
        finding: Finding,
        worker: &mut Worker,
        semantic: &mut Semantic,
        entry: &Filed,
    ) -> anyhow::Result<Option<Filed>> {
        let nodes = finding.case.model.graph.node_count();
        let case = finding.case.clone();
        let mut r = Reproducer::new(worker, self.oracle.clone(), finding, Some(semantic));
        if r.finding.symptom == Symptom::Inconsistency {
            r.keep_class = Some(entry.triage.class);
        }
        if r.check(&case, &entry.triage.culprits).is_none() {
            return Ok(None);
        }
        self.add_finding(&entry.bug_dir, &r.finding.source)?;
        let mut t = entry.triage.clone();
        t.method = ATTACHED.into();
        t.dd_note = Some(format!("attached to {} by a check of its culprits on this finding's model", entry.signature));
        (t.dd_runs, t.runs, t.original_nodes, t.reduction_checks) = (0, r.runs, nodes, 0);
        let (signature, bug_dir) = (entry.signature.clone(), entry.bug_dir.clone());
        let filed = Filed { signature, bug_dir, new_bug: false, triage: t, more: Vec::new() };
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

/// Findings waiting for a session's lanes. A lane takes the first whose source key no lane is triaging, and waits
/// while every waiting finding's key is being triaged: a later finding of a key is then attached to the entry its
/// first made, never triaged in full beside it.
pub struct Backlog {
    state: Mutex<(std::collections::VecDeque<(String, PathBuf)>, std::collections::HashSet<String>)>,
    changed: std::sync::Condvar,
}

impl Backlog {
    /// Finding directories in the order to triage them, each with its source key (its coarse signature for an
    /// older campaign's finding without a key).
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Backlog {
        let keyed = dirs
            .into_iter()
            .map(|d| {
                let key = crate::finding::load_meta(&d).map(|m| if m.key.is_empty() { m.signature } else { m.key });
                (key.unwrap_or_default(), d)
            })
            .collect();
        Backlog { state: Mutex::new((keyed, Default::default())), changed: std::sync::Condvar::new() }
    }

    /// The next finding for a lane (None: the backlog is empty); the lane calls [`Backlog::done`] with its key.
    pub fn take(&self) -> Option<(String, PathBuf)> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let (queue, busy) = &mut *st;
            if queue.is_empty() {
                return None;
            }
            if let Some(i) = queue.iter().position(|(k, _)| k.is_empty() || !busy.contains(k)) {
                let (key, dir) = queue.remove(i).expect("found");
                busy.insert(key.clone());
                return Some((key, dir));
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The lane finished the finding of `key`.
    pub fn done(&self, key: &str) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1.remove(key);
        self.changed.notify_all();
    }

    /// Findings still waiting.
    pub fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a finding may be attached to `entry` by the cheap check: not to an `undecided` one, which says nothing
/// about which bug it holds (a review found LayerNormFusion's unchecked Pow exponent attached to an undecided,
/// ill-conditioned layer normalization of the same coarse signature, and never triaged on its own).
fn attachable(entry: &Filed) -> bool {
    entry.triage.class != super::classify::Class::Undecided
}

/// [`attachable`] for a finding that no semantic reference can judge (`unreferenced`: a Relax-level test): such
/// a finding is `undecided` whatever bug it holds, so it may also go to an entry undecided for that same reason
/// whose culprits the cheap check then shows alone cause and cure its symptom. A full triage would only make one
/// more undecided entry (a campaign triaged 5 ConvertLayout inconsistencies in full, 1,114 runs, for one).
fn attachable_to(entry: &Filed, unreferenced: bool) -> bool {
    attachable(entry)
        || (unreferenced
            && !entry.triage.culprits.is_empty()
            && entry.triage.class_note.starts_with(super::classify::NO_REFERENCE))
}

/// How many entries of its coarse signature a finding is checked against before it is triaged in full.
const MAX_TRIES: usize = 16;

/// The `method` of a finding attached to an existing entry.
pub const ATTACHED: &str = "attached";

/// A finding directory's `triage.json`, when it has a readable one.
pub fn load_filed(dir: &Path) -> Option<Filed> {
    crate::finding::read_triaged(dir)
}

#[cfg(test)]
mod tests {
    use super::Backlog;
    use std::path::PathBuf;

    #[test]
    fn no_finding_is_attached_to_an_undecided_entry() {
        use crate::triage::classify::Class;
        let entry = |class: Class| super::Filed {
            signature: "s".into(),
            bug_dir: "b".into(),
            new_bug: false,
            triage: crate::triage::Triaged { class, ..Default::default() },
            more: Vec::new(),
        };
        assert!(!super::attachable(&entry(Class::Undecided)));
        for class in [Class::Optimizer, Class::Precision, Class::Reference, Class::Unattributed] {
            assert!(super::attachable(&entry(class)), "{class}");
        }
    }

    #[test]
    fn a_finding_no_reference_can_judge_attaches_to_an_entry_undecided_for_that_reason_alone() {
        use crate::triage::classify::{Class, NO_REFERENCE};
        let entry = |note: &str, culprits: &[&str]| super::Filed {
            signature: "s".into(),
            bug_dir: "b".into(),
            new_bug: false,
            triage: crate::triage::Triaged {
                class: Class::Undecided,
                class_note: note.into(),
                culprits: culprits.iter().map(|c| c.to_string()).collect(),
                ..Default::default()
            },
            more: Vec::new(),
        };
        let unjudged = entry(&format!("{NO_REFERENCE}: a Relax-level test (a recipe) has no ONNX model"), &["FuseOps"]);
        assert!(super::attachable_to(&unjudged, true));
        assert!(!super::attachable_to(&unjudged, false), "an ONNX model's finding may be decided: triaged in full");
        let flaky = entry("the symptom did not come back when re-checked", &["FuseOps"]);
        assert!(!super::attachable_to(&flaky, true));
        let blameless = entry(&format!("{NO_REFERENCE}: a Relax-level test (a recipe) has no ONNX model"), &[]);
        assert!(!super::attachable_to(&blameless, true), "no culprits: the cheap check has nothing to show");
    }

    #[test]
    fn a_key_whose_first_finding_went_undecided_attaches_to_the_entry_a_later_one_made() {
        use crate::triage::classify::Class;
        let entry = |sig: &str, class: Class| super::Filed {
            signature: sig.into(),
            bug_dir: sig.into(),
            new_bug: false,
            triage: crate::triage::Triaged { class, ..Default::default() },
            more: Vec::new(),
        };
        let mut known = super::Known::default();
        let both = ("key".to_string(), vec!["FuseTIR".to_string()]);
        known.remember("coarse".into(), both.clone(), &entry("undecided", Class::Undecided));
        known.remember("coarse".into(), both.clone(), &entry("first", Class::Optimizer));
        known.remember("coarse".into(), both.clone(), &entry("second", Class::Optimizer));
        assert_eq!(known.by_key_passes[&both].signature, "first");
        assert_eq!(known.by_key["key"].signature, "first");
        assert_eq!(known.entries["coarse"].len(), 3, "every entry of the coarse signature is still a candidate");
    }

    fn backlog(keys: &[&str]) -> Backlog {
        let b = Backlog::new(Vec::new());
        b.state.lock().unwrap().0 =
            keys.iter().enumerate().map(|(i, k)| (k.to_string(), PathBuf::from(i.to_string()))).collect();
        b
    }

    #[test]
    fn a_lane_never_takes_a_key_another_lane_is_triaging() {
        let b = backlog(&["a", "a", "b"]);
        let first = b.take().unwrap();
        assert_eq!(first, ("a".to_string(), PathBuf::from("0")));
        // the second "a" waits: "b" comes first
        assert_eq!(b.take().unwrap(), ("b".to_string(), PathBuf::from("2")));
        // now only "a" is left, and "a" is busy: a lane waits until it is done
        std::thread::scope(|s| {
            let waiting = s.spawn(|| b.take());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiting.is_finished(), "the lane waits for the key's first finding");
            b.done("a");
            assert_eq!(waiting.join().unwrap(), Some(("a".to_string(), PathBuf::from("1"))));
        });
        b.done("a");
        b.done("b");
        assert!(b.take().is_none() && b.is_empty());
    }
}
