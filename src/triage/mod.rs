//! Triage: for one finding, the culprit passes (delta debugging of the pass set), its class (which side is
//! wrong), the smallest model that still shows the same symptom with the same culprits (graph reduction) and
//! the bug signature. What it learned is handed to a [`Filer`]: the report floor (`crate::report`) writes the
//! entry's directory; triage itself writes only the finding's triage.json.

mod all;
pub mod alongside;
mod approximated;
pub mod behind;
mod boundary;
pub mod classify;
pub mod conditioning;
mod dangling;
pub mod dd;
mod domains;
pub mod enablers;
pub mod fresh;
pub mod holds;
mod load;
mod memo;
mod parts;
pub mod perturb;
mod platform;
pub mod reduce;
mod reduce_cf;
pub mod relax;
mod reproduce;
mod requantized;
mod rule_search;
pub mod semantic;
pub mod session;

pub use all::triage_all;
pub use load::{Finding, RelaxTest};
pub use reproduce::{crash_kind, Reproducer};

use crate::compiler::worker::Worker;
use crate::compiler::{Outcome, Status};
use crate::graph::onnx;
use crate::oracle::{Oracle, Symptom};
use classify::{Class, Classified, Semantic};
use dd::{Culprits, Probe};
use reduce::{Case, Limits};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Everything triage learned about one finding.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Triaged {
    pub signature: String,
    /// What the finding is (which side is wrong; only `optimizer` is filed under bugs/).
    #[serde(default)]
    pub class: Class,
    /// Why it has that class (the semantic reference's verdict on each side).
    #[serde(default)]
    pub class_note: String,
    pub culprits: Vec<String>,
    /// Culprits that only make the faulty pass's pattern appear (the graph each produces alone is correct and
    /// shows the bug under the other culprits); the faulty passes are the other culprits.
    #[serde(default)]
    pub enablers: Vec<String>,
    /// Passes that show the same symptom on the same model on their own (another bug, with an entry of its own):
    /// disabled in this entry's configuration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_faulty: Vec<String>,
    /// `bisect`, `ddmin` or `unresolved`; `attached` for a finding attached to an existing entry
    /// ([`session`]).
    pub method: String,
    pub dd_runs: usize,
    pub dd_note: Option<String>,
    /// The configuration the minimized model shows the symptom under.
    pub config: String,
    pub original_nodes: usize,
    pub nodes: usize,
    pub reduction_checks: usize,
    pub reduction_fixpoint: bool,
    /// Relax-level reduction (TVM): the top-level bindings of the module test before and after it (none: the
    /// minimized test is not a module test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relax_bindings: Option<(usize, usize)>,
    /// Whether the minimized model was re-checked (false: reduction could not even confirm the original).
    pub confirmed: bool,
    /// For inconsistencies: the largest difference on the minimized model.
    pub max_diff: Option<f64>,
    pub detail: String,
    pub runs: usize,
    /// The per-run time limit triage used (a hang is a run longer than this).
    #[serde(default)]
    pub timeout_ms: u64,
}

impl Triaged {
    /// The faulty passes: the culprits that are not enablers.
    pub fn faulty(&self) -> Vec<String> {
        self.culprits.iter().filter(|p| !self.enablers.contains(p)).cloned().collect()
    }
}

/// What `triage` hands to the report writer besides the record.
pub struct Minimized {
    pub case: Case,
    /// What the target runs for `case` (its ONNX encoding, or a recipe when the Relax pattern is needed).
    pub model_bytes: Vec<u8>,
    /// The minimized test is still a Relax-level recipe (false for ONNX findings, and for recipe findings whose
    /// seed graph shows the bug without the pattern).
    pub pattern_needed: bool,
    /// The recipe reduced at Relax level into a module test (`model_bytes` are then that test, `case.feeds` its
    /// inputs, and `case.model` the seed graph it came from).
    pub relax: Option<relax::RelaxReduced>,
    pub reference: Option<Outcome>,
    pub shown: Option<Outcome>,
    /// The run with the culprits disabled (what disabling them changes).
    pub without: Option<Outcome>,
}

/// Where triage hands a triaged finding: files it in `folder` (its class's folder of the run), possibly under
/// another signature (an entry of the same bug; `t.signature` is then updated), and says where and whether
/// the entry is new. Implemented one floor up, by the report writer.
pub trait Filer: Send {
    fn file(
        &mut self,
        folder: &Path,
        r: &mut Reproducer,
        t: &mut Triaged,
        m: &Minimized,
    ) -> anyhow::Result<(std::path::PathBuf, bool)>;
}

/// Culprits, then reduction, then the signature of one finding.
pub fn triage(r: &mut Reproducer, limits: Limits) -> (Triaged, Minimized) {
    let c = r.culprits();
    let (dd_runs, culprits) = (c.runs, c.passes.clone());
    let original = r.finding.case.clone();
    let mut last: Option<(Outcome, Outcome)> = None;
    let (mut case, mut checks, mut fixpoint) = (original.clone(), 0, false);
    // the original must pass the check itself, or reduction has nothing to keep
    let mut confirmed = match r.check(&original, &culprits) {
        Some(runs) => {
            last = Some(runs);
            true
        }
        None => false,
    };
    // an inconsistency's class, on the original: reduction keeps it; rounding and NaN/Inf-only differences are
    // not worth minimizing
    let inconsistency = r.finding.symptom == Symptom::Inconsistency;
    let mut low_priority = false;
    if let (true, Some((a, b))) = (inconsistency, &last) {
        let class = r.classify_case(&original, a, b).class;
        r.keep_class = Some(class);
        low_priority = !class.worth_reducing();
    }
    if confirmed && !low_priority {
        let cell = std::cell::RefCell::new(&mut *r);
        let out = reduce::reduce(
            original.clone(),
            &mut |cand: &Case| cell.borrow_mut().check(cand, &culprits).is_some(),
            &mut |cand: &Case| cell.borrow_mut().values(cand),
            limits,
        );
        (case, checks, fixpoint) = (out.case, out.checks, out.fixpoint);
        // re-check the final model: its runs are what the report shows
        last = r.check(&case, &culprits);
        confirmed = last.is_some();
    }
    // a Relax-level test whose minimized seed graph shows the bug on its own does not need its pattern: the bug
    // is then filed as that plain model (the finding's recipe stays the original)
    let mut pattern_needed = r.finding.relax.is_some();
    if confirmed && pattern_needed {
        let raw = r.finding.relax.take();
        checks += 1;
        if let Some(runs) = r.check(&case, &culprits) {
            (last, pattern_needed) = (Some(runs), false);
        }
        r.finding.relax = raw;
    }
    let mut seed_note = "";
    if let Some(runs) = (confirmed && pattern_needed).then(|| relax::seed_error(r, &case, &culprits)).flatten() {
        (last, pattern_needed, seed_note) = (Some(runs), false, relax::SEED_ERROR);
    }
    // a Relax-level test that needs its pattern is reduced inside the module too: a module test of its own
    let mut relaxed = None;
    if confirmed && pattern_needed && r.finding.target == "tvm" {
        if let Some(red) = relax::minimize(r, &case, &culprits, limits) {
            checks += red.checks + 1;
            if let Some(runs) = relax::check(r, &red.case, &culprits) {
                last = Some(runs);
                case.feeds = red.case.feeds.clone();
                relaxed = Some(red);
            }
        }
    }
    let (reference, mut shown) = match last {
        Some((a, b)) => (Some(a), Some(b)),
        None => (None, None),
    };
    // the report and repro.py use the finding's own configuration when the minimized model shows the symptom
    // there too (what users run), else with as few of the other fired passes disabled as keep it shown
    let mut config = if culprits.is_empty() { r.finding.config.clone() } else { r.config_enabling(&culprits) };
    let model_bytes = match (&relaxed, pattern_needed) {
        (Some(red), _) => red.case.test.to_bytes(),
        (None, true) => r.finding.bytes(&case),
        (None, false) => onnx::encode_model(&case.model),
    };
    if confirmed && config != r.finding.config {
        let plain = r.finding.config.clone();
        let o = r.run(&model_bytes, &case.feeds, &plain);
        if r.classify(&o, reference.as_ref()) == Probe::Symptom {
            (config, shown) = (plain, Some(o));
        } else {
            let fewer = r.fewest_disabled((&model_bytes, &case.feeds), config.clone(), &culprits, reference.as_ref());
            if fewer != config {
                (shown, config) = (Some(r.run(&model_bytes, &case.feeds, &fewer)), fewer);
            }
        }
    }
    let mut without = (!culprits.is_empty()).then(|| {
        let mut w = config.clone();
        w.disabled.extend(culprits.iter().cloned());
        r.run(&model_bytes, &case.feeds, &w)
    });
    let mut also_faulty = Vec::new();
    if let (Some(w), true) = (&without, confirmed) {
        if let Some(a) = alongside::settle(r, (&model_bytes, &case.feeds), &config, &culprits, w, reference.as_ref()) {
            (config, shown, without, also_faulty) = (a.config, Some(a.shown), Some(a.without), vec![a.pass]);
        }
    }
    let verdict = match (&reference, &shown) {
        (Some(a), Some(b)) if r.finding.symptom == Symptom::Inconsistency => {
            r.oracle.inconsistency_with(a, b, &r.hints())
        }
        _ => None,
    };
    let max_diff = verdict.as_ref().and_then(|v| v.max_diff);
    let (class, mut class_note) = class_of(r, &case, &c, confirmed, reference.as_ref(), shown.as_ref());
    class_note.push_str(seed_note);
    let enablers =
        if confirmed || r.raised_in().is_some() { r.split_enablers(&case, &culprits).enablers } else { vec![] };
    let detail = match (verdict, &shown) {
        (Some(v), _) => v.detail,
        (None, Some(b)) if b.status != Status::Ok => b.status.message(),
        _ => r.finding.message.clone(),
    };
    // the faulty passes identify the bug, not the enablers that let its pattern appear
    let faulty = Culprits { passes: culprits.iter().filter(|p| !enablers.contains(p)).cloned().collect(), ..c.clone() };
    let mut signature = signature(&r.finding, &faulty, &detail, class);
    // a kernel refusing what the culprits computed wrong is that wrong result's entry
    if class == Class::Optimizer {
        if let Some(wrong) = behind::wrong_value(r, &case, &faulty.passes, &detail) {
            class_note = format!("{class_note}; the error's node reads a value the culprits compute wrong: {wrong}");
            let (target, config) = (&r.finding.target, r.finding.config.to_string());
            signature = crate::finding::signature::bug(target, Symptom::Inconsistency, &faulty.passes, &config, "");
        }
    }
    let t = Triaged {
        signature,
        class,
        class_note,
        culprits,
        enablers,
        also_faulty,
        method: c.method.to_string(),
        dd_runs,
        dd_note: c.note.clone(),
        config: config.to_string(),
        original_nodes: original.model.graph.node_count(),
        nodes: case.model.graph.node_count(),
        reduction_checks: checks,
        reduction_fixpoint: fixpoint,
        relax_bindings: relaxed.as_ref().map(|red| (red.original_bindings, red.case.summary.bindings)),
        confirmed,
        max_diff,
        detail,
        runs: r.runs,
        timeout_ms: r.worker.timeout().as_millis() as u64,
    };
    let m = Minimized { case, model_bytes, pattern_needed, relax: relaxed, reference, shown, without };
    (t, m)
}

/// The class of a triaged finding: an inconsistency's is what the semantic reference says of its minimized
/// runs; a symptom that did not come back is undecided; one no pass set explains is unattributed.
fn class_of(
    r: &mut Reproducer,
    case: &Case,
    c: &Culprits,
    confirmed: bool,
    reference: Option<&Outcome>,
    shown: Option<&Outcome>,
) -> (Class, String) {
    if !confirmed {
        // the original's own unoptimized run may fail too (a compiler bug, not the optimizer's), or break the
        // model's contract (then it is no finding at all)
        let model = r.finding.bytes(case);
        let plain = r.run(&model, &case.feeds, &r.finding.reference.clone());
        if plain.status != Status::Ok {
            let why = format!(
                "the unoptimized run fails too ({}: {}): a bug of the compiler, not of an optimization pass",
                plain.status.kind(),
                plain.status.message().chars().take(200).collect::<String>()
            );
            return (Class::Reference, why);
        }
        if r.finding.relax.is_none() {
            if let Some(why) = classify::contract_violation(&case.model, &plain) {
                return (Class::Undecided, why);
            }
        }
        return (Class::Undecided, "the symptom did not come back when re-checked".into());
    }
    let semantic = match (r.finding.symptom, reference, shown) {
        (Symptom::Inconsistency, Some(a), Some(b)) => Some(r.classify_case(case, a, b)),
        _ => None,
    };
    match semantic {
        Some(s) if s.class != Class::Optimizer => (s.class, s.note),
        // a compiler that plans by shapes the values contradict is misled, whatever its passes do
        _ if !c.passes.is_empty() && r.finding.relax.is_none() => match r.shape_contradiction(case) {
            Some(why) => (
                Class::Contract,
                format!("{why}: the model's values contradict the shapes ONNX shape inference gives them"),
            ),
            None => match domains::violation(case, &c.passes, r.finding.symptom == Symptom::Inconsistency) {
                Some(why) => (Class::Contract, why),
                None => match reference.zip(shown).and_then(|(a, b)| r.without_digits(case, a, b)) {
                    Some(why) => (Class::Undecided, why),
                    None => filed(r, case, c, reference, semantic),
                },
            },
        },
        _ => filed(r, case, c, reference, semantic),
    }
}

/// [`class_of`] of a confirmed finding whose model keeps its contracts: unattributed without culprits, or when
/// disabling them does not cure it (the filing gate), else the semantic class or `optimizer`.
fn filed(
    r: &mut Reproducer,
    case: &Case,
    c: &Culprits,
    reference: Option<&Outcome>,
    semantic: Option<Classified>,
) -> (Class, String) {
    match semantic {
        _ if c.passes.is_empty() => {
            (Class::Unattributed, c.note.clone().unwrap_or_else(|| "no set of the fired passes explains it".into()))
        }
        // the filing gate: an entry's own repro disables its culprits with every other pass on
        _ if !r.cured_by_disabling(case, &c.passes, reference) => (
            Class::Unattributed,
            format!(
                "the culprits ({}) alone show it, but disabling them in `{}` with every other pass on does not \
                 cure it: another pass shows the same symptom",
                c.passes.join(", "),
                r.finding.config
            ),
        ),
        Some(s) => (s.class, s.note),
        None => {
            let shown = "the culprit passes alone show it, and disabling any of them cures it";
            let note = r.dangling_note(case).map_or_else(|| shown.to_string(), |lost| format!("{shown}; {lost}"));
            (Class::Optimizer, note)
        }
    }
}

/// A bug's signature ([`crate::finding::signature::bug`]): target, symptom, culprit passes (or the configuration
/// when there are none) and the normalized message; for classes other than `optimizer`, the class too; class
/// `widened` and `platform` are one entry per target and symptom each.
pub fn signature(f: &Finding, c: &Culprits, detail: &str, class: Class) -> String {
    let sig = crate::finding::signature::bug(&f.target, f.symptom, &c.passes, &f.config.to_string(), detail);
    match class {
        Class::Optimizer => sig,
        c if c.one_entry() => crate::util::stable_hash(&format!("{}|{}|{c}", f.target, f.symptom)),
        other => crate::util::stable_hash(&format!("{sig}|{other}")),
    }
}

/// What triaging one finding directory filed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Filed {
    pub signature: String,
    pub bug_dir: String,
    pub new_bug: bool,
    pub triage: Triaged,
    /// The entries of other passes that show the finding on their own ([`triage_all`]), filed with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more: Vec<Filed>,
}

impl Filed {
    /// This entry and the others filed with it.
    pub fn all(&self) -> impl Iterator<Item = &Filed> {
        std::iter::once(self).chain(&self.more)
    }
}

/// Triages a campaign finding directory and hands it to `filer` with its class's folder of the run directory
/// `run` (`bugs/` for optimizer bugs, `reference/`, ...); writes `triage.json` into the finding directory (so a
/// resumed triage skips it). `Ok(None)` for findings without a pass set (cross-target).
pub fn triage_dir(
    dir: &Path,
    run: &Path,
    worker: &mut Worker,
    semantic: &mut Semantic,
    oracle: Oracle,
    limits: Limits,
    filer: &mut dyn Filer,
) -> anyhow::Result<Option<Filed>> {
    let Some(finding) = Finding::load(dir)? else { return Ok(None) };
    let mut r = Reproducer::new(worker, oracle, finding, Some(semantic));
    let mut all = triage_all(&mut r, limits);
    // a long-lived worker's history (the runner's caches) can hide what a fresh process shows: a finding whose
    // symptom did not come back is triaged once more in a fresh worker process
    if !all[0].0.confirmed && r.finding.symptom != Symptom::Hang {
        r.fresh();
        let mut again = triage_all(&mut r, limits);
        if again[0].0.confirmed {
            let note = "confirmed in a fresh worker process (the first one's did not show it)";
            for (t, _) in &mut again {
                t.dd_note = Some(t.dd_note.take().map_or(note.to_string(), |n| format!("{n}; {note}")));
            }
            all = again;
        }
    }
    // the finding is recorded under its first entry; a second faulty pass's entry holds it too
    let mut first: Option<Filed> = None;
    for (mut t, m) in all {
        // a new entry's repro must show it in fresh processes (an existing entry's was checked when it was filed)
        if !crate::finding::record::exists(&run.join(Class::Optimizer.folder()).join(&t.signature)) {
            fresh::gate(&mut r, &mut t, &m);
        }
        let folder = run.join(t.class.folder());
        let (bug_dir, new_bug) = filer.file(&folder, &mut r, &mut t, &m)?;
        let bug_dir = bug_dir.display().to_string();
        let filed = Filed { signature: t.signature.clone(), bug_dir, new_bug, triage: t, more: Vec::new() };
        match &mut first {
            None => first = Some(filed),
            Some(f) => f.more.push(filed),
        }
    }
    let filed = first.expect("triage_all gives at least one");
    crate::finding::write_triaged(dir, &filed)?;
    Ok(Some(filed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::Config;
    use crate::graph::{Graph, Model};

    fn finding(symptom: Symptom) -> Finding {
        Finding {
            target: "ort".into(),
            target_version: "1".into(),
            symptom,
            config: Config::parse("all").unwrap(),
            reference: Config::parse("disable").unwrap(),
            fired: vec![],
            message: String::new(),
            case: Case { model: Model::new(Graph::new("g")), feeds: vec![] },
            source: String::new(),
            relax: None,
        }
    }

    fn found(passes: &[&str]) -> Culprits {
        Culprits { passes: passes.iter().map(|s| s.to_string()).collect(), method: "bisect", runs: 3, note: None }
    }

    #[test]
    fn signatures_depend_on_culprits_not_on_their_order_or_the_context() {
        let f = finding(Symptom::Inconsistency);
        let o = Class::Optimizer;
        let a = signature(&f, &found(&["B", "A"]), "output 'x'[3]: expected 1, got 2", o);
        assert_eq!(a, signature(&f, &found(&["A", "B"]), "output 'y'[0]: expected 7, got 9", o));
        assert_ne!(a, signature(&f, &found(&["A"]), "output 'x'[3]: expected 1, got 2", o));
        assert_ne!(a, signature(&finding(Symptom::Crash), &found(&["A", "B"]), "", o));
        let e = finding(Symptom::Error);
        assert_eq!(
            signature(&e, &found(&["A"]), "Node (n_12) Op (QuantizeLinear) type 3 mismatch", o),
            signature(&e, &found(&["A"]), "Node (q_7) Op (QuantizeLinear) type 9 mismatch", o)
        );
        assert_ne!(
            signature(&e, &found(&["A"]), "Op (QuantizeLinear) failed", o),
            signature(&e, &found(&["A"]), "Op (Reshape) failed", o)
        );
        // without culprits the configuration stands in for them
        assert_ne!(signature(&f, &found(&[]), "", o), signature(&f, &found(&["A"]), "", o));
        // the same passes with the reference side wrong are another entry
        assert_ne!(a, signature(&f, &found(&["A", "B"]), "", Class::Reference));
    }
}
