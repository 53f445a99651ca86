//! Triage: for one finding, the culprit passes (delta debugging of the pass set), the smallest model that
//! still shows the same symptom with the same culprits (graph reduction), the bug signature, and the bug
//! directory with its report and standalone reproducer (`report`); regression suites from bugs (`export`).

pub mod dd;
pub mod export;
pub mod reduce;
pub mod report;

use crate::campaign::finding::normalize;
use crate::graph::{onnx, Model, Tensor};
use crate::oracle::{Oracle, Symptom};
use crate::compiler::worker::Worker;
use crate::compiler::{Config, NamedTensor, Outcome, Status};
use anyhow::Context;
use dd::{Culprits, Probe};
use reduce::{Case, Limits};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// A finding to triage: the model, its inputs, and what it showed where.
#[derive(Clone, Debug)]
pub struct Finding {
    pub target: String,
    pub target_version: String,
    pub symptom: Symptom,
    /// The configuration that showed the symptom.
    pub config: Config,
    /// The unoptimized reference configuration.
    pub reference: Config,
    /// Passes that fired under `config` and not under `reference`: the candidates.
    pub fired: Vec<String>,
    /// The message of the failing run (errors, crashes) or the inconsistency verdict's detail.
    pub message: String,
    pub case: Case,
    /// Where it came from (a campaign's finding directory, or a model file).
    pub source: String,
    /// The bytes the target runs when they are not the ONNX encoding of `case.model`: a Relax synthesis
    /// recipe (TVM), whose `case.model` is the seed graph. Reduction then reduces the seed graph inside the
    /// recipe (the Relax pattern is kept whole).
    pub raw: Option<Vec<u8>>,
}

impl Finding {
    /// What the target is given for `case`: its ONNX encoding, or the finding's recipe with `case.model` as
    /// the seed graph.
    pub fn bytes(&self, case: &Case) -> Vec<u8> {
        match &self.raw {
            Some(b) => crate::campaign::source::recipe_with_seed(b, &onnx::encode_model(&case.model))
                .unwrap_or_else(|| b.clone()),
            None => onnx::encode_model(&case.model),
        }
    }
}

impl Finding {
    /// Loads a campaign finding directory (meta.json, outcome.json, model.onnx, input_K.pb). `Ok(None)` for
    /// findings without a pass set to debug (cross-target differences).
    pub fn load(dir: &Path) -> anyhow::Result<Option<Finding>> {
        let read = |f: &str| -> anyhow::Result<serde_json::Value> {
            let p = dir.join(f);
            let text = std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", p.display()))
        };
        let meta = read("meta.json")?;
        let records = read("outcome.json")?;
        let records = records.as_array().context("outcome.json: not a list")?;
        let target = meta["target"].as_str().context("meta.json has no target")?.to_string();
        let symptom: Symptom = serde_json::from_value(meta["symptom"].clone()).context("meta.json: bad symptom")?;
        let verdict = meta["verdicts"]
            .as_array()
            .and_then(|vs| vs.iter().find(|x| x["symptom"] == meta["symptom"]))
            .context("meta.json: no verdict for its symptom")?;
        let config_name = verdict["config"].as_str().unwrap_or_default().to_string();
        if target.contains(',') || config_name.contains(['~', ':']) {
            return Ok(None);
        }
        let record = |name: &str| records.iter().find(|r| r["config"] == name);
        let fired_in = |name: &str| -> Vec<String> {
            record(name)
                .and_then(|r| r["passes_fired"].as_array())
                .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let reference_name = records.first().and_then(|r| r["config"].as_str()).unwrap_or("disable").to_string();
        let always = fired_in(&reference_name);
        let fired = fired_in(&config_name).into_iter().filter(|p| !always.contains(p)).collect();
        let message = match symptom {
            Symptom::Inconsistency => verdict["detail"].as_str().unwrap_or_default().to_string(),
            _ => record(&config_name).and_then(|r| r["message"].as_str()).unwrap_or_default().to_string(),
        };
        let path = dir.join("model.onnx");
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let (model, recipe) = crate::campaign::source::decode_test(&bytes, &path)?;
        let raw = recipe.then_some(bytes);
        let feeds = crate::compiler::inputs::read(dir, &model.graph)?;
        Ok(Some(Finding {
            target,
            target_version: meta["target_version"].as_str().unwrap_or_default().to_string(),
            symptom,
            config: Config::parse(&config_name)?,
            reference: Config::parse(&reference_name)?,
            fired,
            message,
            case: Case { model, feeds },
            source: dir.display().to_string(),
            raw,
        }))
    }
}

/// How a finding's symptom is recognized in a run, and the runs spent recognizing it.
pub struct Reproducer<'w> {
    pub worker: &'w mut Worker,
    pub oracle: Oracle,
    pub finding: Finding,
    pub runs: usize,
}

impl Reproducer<'_> {
    fn run(&mut self, model: &[u8], feeds: &[NamedTensor], config: &Config) -> Outcome {
        self.runs += 1;
        self.worker.run(model, feeds, config)
    }

    /// The configuration with only `enabled` of the fired passes on.
    pub fn config_enabling(&self, enabled: &[String]) -> Config {
        let mut c = self.finding.config.clone();
        c.disabled.extend(self.finding.fired.iter().filter(|p| !enabled.contains(p)).cloned());
        c
    }

    /// Whether `o` shows the finding's symptom: the same kind of failure (for errors, the same normalized
    /// message), or outputs that differ from `reference`'s.
    pub fn classify(&self, o: &Outcome, reference: Option<&Outcome>) -> Probe {
        match (self.finding.symptom, &o.status) {
            (Symptom::Crash, Status::Crash { .. } | Status::Oom { .. }) => Probe::Symptom,
            (Symptom::Hang, Status::Timeout { .. }) => Probe::Symptom,
            (Symptom::Error, Status::Error { message }) => {
                if normalize(message) == normalize(&self.finding.message) {
                    Probe::Symptom
                } else {
                    Probe::Unresolved
                }
            }
            (Symptom::Inconsistency, Status::Ok) => match reference {
                Some(r) if r.status == Status::Ok => {
                    if self.oracle.inconsistency(r, o).is_some() {
                        Probe::Symptom
                    } else {
                        Probe::Clean
                    }
                }
                _ => Probe::Unresolved,
            },
            (_, Status::Ok) => Probe::Clean,
            _ => Probe::Unresolved,
        }
    }

    /// Delta-debugs the fired passes of the finding's own model.
    pub fn culprits(&mut self) -> Culprits {
        let model = self.finding.bytes(&self.finding.case);
        let feeds = self.finding.case.feeds.clone();
        let reference = (self.finding.symptom == Symptom::Inconsistency)
            .then(|| self.run(&model, &feeds, &self.finding.reference.clone()));
        let fired = self.finding.fired.clone();
        let probe = |r: &mut Self, enabled: &[String]| -> Probe {
            let c = r.config_enabling(enabled);
            let o = r.run(&model, &feeds, &c);
            r.classify(&o, reference.as_ref())
        };
        let first = dd::culprits(&fired, &mut |e: &[String]| probe(self, e));
        if !first.passes.is_empty() || !first.note.as_deref().is_some_and(|n| n.contains("no fired pass")) {
            return first;
        }
        // a pass that crashes or fails never reports that it modified the graph: search every pass that runs
        let universe: Vec<String> =
            self.passes_at_level().into_iter().filter(|p| !self.finding.config.disabled.contains(p)).collect();
        if universe.is_empty() {
            return first;
        }
        let saved = std::mem::replace(&mut self.finding.fired, universe.clone());
        let mut wide = dd::culprits(&universe, &mut |e: &[String]| probe(self, e));
        wide.runs += first.runs;
        if wide.passes.is_empty() {
            self.finding.fired = saved;
            wide.note = Some(format!(
                "{} (also with every pass that runs at this level disabled: not caused by a graph transformer)",
                first.note.unwrap_or_default()
            ));
        } else {
            wide.note =
                Some("found among all passes that run at this level (the culprit never reported a change)".into());
        }
        wide
    }

    /// Every pass the target runs at the finding's level, from a run of a one-node model.
    fn passes_at_level(&mut self) -> Vec<String> {
        use crate::graph::{DType, Graph, Node, OpId, TensorType};
        let mut g = Graph::new("probe");
        let ty = TensorType::new(DType::F32, &[1]);
        g.add_input("x", ty.clone());
        let _ = g.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()]));
        g.add_output("y", ty);
        let m = Model::new(g);
        let feeds = crate::compiler::inputs::generate(&m.graph, 0).unwrap_or_default();
        let mut c = self.finding.config.clone();
        c.disabled.clear();
        self.run(&onnx::encode_model(&m), &feeds, &c).passes_ran
    }

    /// Whether a candidate still shows the finding: the reference runs cleanly, the culprits alone show the
    /// symptom, and disabling any one culprit makes it go away. Returns the reference and symptom runs.
    pub fn check(&mut self, case: &Case, culprits: &[String]) -> Option<(Outcome, Outcome)> {
        let model = self.finding.bytes(case);
        let reference = self.run(&model, &case.feeds, &self.finding.reference.clone());
        if reference.status != Status::Ok {
            return None;
        }
        let config = if culprits.is_empty() { self.finding.config.clone() } else { self.config_enabling(culprits) };
        let shown = self.run(&model, &case.feeds, &config);
        if self.classify(&shown, Some(&reference)) != Probe::Symptom {
            return None;
        }
        for c in culprits {
            let mut without = config.clone();
            without.disabled.push(c.clone());
            let o = self.run(&model, &case.feeds, &without);
            if self.classify(&o, Some(&reference)) != Probe::Clean {
                return None;
            }
        }
        Some((reference, shown))
    }

    /// The reference value of every typed intermediate value of a case (one run with all of them exposed).
    pub fn values(&mut self, case: &Case) -> HashMap<String, Tensor> {
        let Ok(types) = crate::ops::infer_types(&case.model.graph, false) else { return HashMap::new() };
        let mut m: Model = case.model.clone();
        let g = &mut m.graph;
        let ids: Vec<_> = g.node_ids().collect();
        for id in ids {
            for o in g.node(id).outputs.clone() {
                if let (false, Some(t)) = (o.is_empty() || g.outputs.contains(&o), types.get(&o)) {
                    g.add_output(&o, t.clone());
                }
            }
        }
        let o = self.run(&onnx::encode_model(&m), &case.feeds, &self.finding.reference.clone());
        o.outputs.into_iter().map(|t| (t.name, t.tensor)).collect()
    }
}

/// Everything triage learned about one finding.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Triaged {
    pub signature: String,
    pub culprits: Vec<String>,
    /// `bisect`, `ddmin` or `unresolved`.
    pub method: String,
    pub dd_runs: usize,
    pub dd_note: Option<String>,
    /// The configuration the minimized model shows the symptom under.
    pub config: String,
    pub original_nodes: usize,
    pub nodes: usize,
    pub reduction_checks: usize,
    pub reduction_fixpoint: bool,
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

/// What `triage` hands to the report writer besides the record.
pub struct Minimized {
    pub case: Case,
    /// What the target runs for `case` (its ONNX encoding, or a recipe when the Relax pattern is needed).
    pub model_bytes: Vec<u8>,
    /// The minimized test is still a Relax-level recipe (false for ONNX findings, and for recipe findings whose
    /// seed graph shows the bug without the pattern).
    pub pattern_needed: bool,
    pub reference: Option<Outcome>,
    pub shown: Option<Outcome>,
    /// The run with the culprits disabled (what disabling them changes).
    pub without: Option<Outcome>,
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
    if confirmed {
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
    let mut pattern_needed = r.finding.raw.is_some();
    if confirmed && pattern_needed {
        let raw = r.finding.raw.take();
        checks += 1;
        if let Some(runs) = r.check(&case, &culprits) {
            (last, pattern_needed) = (Some(runs), false);
        }
        r.finding.raw = raw;
    }
    let (reference, mut shown) = match last {
        Some((a, b)) => (Some(a), Some(b)),
        None => (None, None),
    };
    // the report and repro.py use the finding's own configuration when the minimized model shows the symptom
    // there too (what users run), else the configuration with only the culprits on
    let mut config = if culprits.is_empty() { r.finding.config.clone() } else { r.config_enabling(&culprits) };
    let model_bytes = if pattern_needed { r.finding.bytes(&case) } else { onnx::encode_model(&case.model) };
    if confirmed && config != r.finding.config {
        let plain = r.finding.config.clone();
        let o = r.run(&model_bytes, &case.feeds, &plain);
        if r.classify(&o, reference.as_ref()) == Probe::Symptom {
            (config, shown) = (plain, Some(o));
        }
    }
    let without = (!culprits.is_empty()).then(|| {
        let mut w = config.clone();
        w.disabled.extend(culprits.iter().cloned());
        r.run(&model_bytes, &case.feeds, &w)
    });
    let verdict = match (&reference, &shown) {
        (Some(a), Some(b)) if r.finding.symptom == Symptom::Inconsistency => r.oracle.inconsistency(a, b),
        _ => None,
    };
    let max_diff = verdict.as_ref().and_then(|v| v.max_diff);
    let detail = match (verdict, &shown) {
        (Some(v), _) => v.detail,
        (None, Some(b)) if b.status != Status::Ok => b.status.message(),
        _ => r.finding.message.clone(),
    };
    let signature = signature(&r.finding, &c, &detail);
    let t = Triaged {
        signature,
        culprits,
        method: c.method.to_string(),
        dd_runs,
        dd_note: c.note.clone(),
        config: config.to_string(),
        original_nodes: original.model.graph.node_count(),
        nodes: case.model.graph.node_count(),
        reduction_checks: checks,
        reduction_fixpoint: fixpoint,
        confirmed,
        max_diff,
        detail,
        runs: r.runs,
        timeout_ms: r.worker.timeout().as_millis() as u64,
    };
    (t, Minimized { case, model_bytes, pattern_needed, reference, shown, without })
}

/// A bug's signature: target, symptom, culprit passes (or the configuration when there are none) and the
/// normalized message. Inconsistency details name outputs and values, so they do not enter it.
pub fn signature(f: &Finding, c: &Culprits, detail: &str) -> String {
    let mut passes = c.passes.clone();
    passes.sort();
    let passes = if passes.is_empty() { format!("unresolved@{}", f.config) } else { passes.join("+") };
    let message = match f.symptom {
        Symptom::Error => normalize(detail),
        _ => String::new(),
    };
    crate::util::stable_hash(&format!("{}|{}|{}|{}", f.target, f.symptom, passes, message))
}

impl Finding {
    /// A finding from runs of a model: the primary verdict of `judgement` over `outcomes` (first = reference).
    /// `None` when there is no verdict.
    pub fn from_runs(
        target: &str,
        version: &str,
        case: Case,
        outcomes: &[Outcome],
        judgement: &crate::oracle::Judgement,
        source: &str,
    ) -> anyhow::Result<Option<Finding>> {
        let Some(v) = crate::campaign::finding::primary(judgement) else { return Ok(None) };
        let reference = outcomes.first().context("no runs")?;
        let shown = outcomes.iter().find(|o| o.config.to_string() == v.config).context("verdict without its run")?;
        let fired = shown.passes_fired.iter().filter(|p| !reference.passes_fired.contains(p)).cloned().collect();
        let message = if v.symptom == Symptom::Inconsistency { v.detail.clone() } else { shown.status.message() };
        Ok(Some(Finding {
            target: target.to_string(),
            target_version: version.to_string(),
            symptom: v.symptom,
            config: shown.config.clone(),
            reference: reference.config.clone(),
            fired,
            message,
            case,
            source: source.to_string(),
            raw: None,
        }))
    }
}

/// What triaging one finding directory filed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Filed {
    pub signature: String,
    pub bug_dir: String,
    pub new_bug: bool,
    pub triage: Triaged,
}

/// Triages a campaign finding directory and files it under `bugs`; writes `triage.json` into the finding
/// directory (so a resumed triage skips it). `Ok(None)` for findings without a pass set (cross-target).
pub fn triage_dir(
    dir: &Path,
    bugs: &Path,
    worker: &mut Worker,
    oracle: Oracle,
    limits: Limits,
) -> anyhow::Result<Option<Filed>> {
    let Some(finding) = Finding::load(dir)? else { return Ok(None) };
    let mut r = Reproducer { worker, oracle: oracle.clone(), finding, runs: 0 };
    let (t, m) = triage(&mut r, limits);
    let (bug_dir, new_bug) = report::file(bugs, &r.finding, &t, &m, oracle.tolerance)?;
    let filed = Filed { signature: t.signature.clone(), bug_dir: bug_dir.display().to_string(), new_bug, triage: t };
    crate::util::write_atomic(&dir.join("triage.json"), serde_json::to_string_pretty(&filed)?.as_bytes())?;
    Ok(Some(filed))
}

/// Finding directories of a run, sorted; `pending_only`: those without triage.json.
pub fn finding_dirs(run: &Path, pending_only: bool) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let findings = run.join("findings");
    if !findings.exists() {
        return Ok(Vec::new());
    }
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(&findings)
        .with_context(|| format!("cannot list {}", findings.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .filter(|p| !pending_only || !p.join("triage.json").exists())
        .collect();
    dirs.sort();
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
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
            raw: None,
        }
    }

    fn found(passes: &[&str]) -> Culprits {
        Culprits { passes: passes.iter().map(|s| s.to_string()).collect(), method: "bisect", runs: 3, note: None }
    }

    #[test]
    fn signatures_depend_on_culprits_not_on_their_order_or_the_context() {
        let f = finding(Symptom::Inconsistency);
        let a = signature(&f, &found(&["B", "A"]), "output 'x'[3]: expected 1, got 2");
        assert_eq!(a, signature(&f, &found(&["A", "B"]), "output 'y'[0]: expected 7, got 9"));
        assert_ne!(a, signature(&f, &found(&["A"]), "output 'x'[3]: expected 1, got 2"));
        assert_ne!(a, signature(&finding(Symptom::Crash), &found(&["A", "B"]), ""));
        let e = finding(Symptom::Error);
        assert_eq!(
            signature(&e, &found(&["A"]), "Node (n_12) Op (QuantizeLinear) type 3 mismatch"),
            signature(&e, &found(&["A"]), "Node (q_7) Op (QuantizeLinear) type 9 mismatch")
        );
        assert_ne!(
            signature(&e, &found(&["A"]), "Op (QuantizeLinear) failed"),
            signature(&e, &found(&["A"]), "Op (Reshape) failed")
        );
        // without culprits the configuration stands in for them
        assert_ne!(signature(&f, &found(&[]), ""), signature(&f, &found(&["A"]), ""));
    }
}
