//! The finding triage works on: loaded from a campaign's finding directory, or made from runs of a model
//! (`oatest reduce`); what the target is given for a candidate case.

use super::reduce::Case;
use crate::case::Recipe;
use crate::compiler::{Config, Outcome};
use crate::graph::onnx;
use crate::oracle::Symptom;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
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
    /// A Relax-level test (TVM), whose `case.model` is the seed graph: what the target runs is the recipe with
    /// it. Reduction then reduces the seed graph inside the recipe (the Relax pattern is kept whole).
    pub relax: Option<RelaxTest>,
}

/// What a Relax-level finding runs: the campaign's recipe, or (while a Relax-level reduction checks a
/// candidate) a module test.
#[derive(Clone, Debug)]
pub enum RelaxTest {
    Recipe(Recipe),
    Module(ModuleTest),
}

/// A Relax module test (`kind` "oatest-relax-module", what the runner recognizes): the module's TVMScript, the pass the test inserts (with its arguments) and, for oatest's
/// own tests, the seed's fault metadata. main's parameters are its inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModuleTest {
    pub kind: String,
    pub script: String,
    #[serde(default)]
    pub pass: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_args: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fault: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<serde_json::Value>,
}

impl ModuleTest {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a module test serializes")
    }
}

impl Finding {
    /// What the target is given for `case`: its ONNX encoding, or the finding's recipe with `case.model` as
    /// the seed graph.
    pub fn bytes(&self, case: &Case) -> Vec<u8> {
        match &self.relax {
            Some(RelaxTest::Recipe(r)) => r.with_seed(&onnx::encode_model(&case.model)).to_bytes(),
            Some(RelaxTest::Module(m)) => m.to_bytes(),
            None => onnx::encode_model(&case.model),
        }
    }
}

/// The candidate passes: those that fired in the finding's run and not in the reference's, each once under its
/// canonical name (a pass that runs under several names is one candidate; disabling it disables them all).
fn candidates(fired: &[String], reference: &[String]) -> Vec<String> {
    use crate::compiler::rules::canonical;
    let mut out: Vec<String> = Vec::new();
    for p in fired.iter().map(|p| canonical(p)) {
        if !reference.iter().any(|r| canonical(r) == p) && !out.iter().any(|o| o == p) {
            out.push(p.to_string());
        }
    }
    out
}

impl Finding {
    /// Loads a campaign finding directory (`crate::finding::load`). `Ok(None)` for findings without a pass set
    /// to debug (cross-target differences).
    pub fn load(dir: &Path) -> anyhow::Result<Option<Finding>> {
        let f = crate::finding::load(dir)?;
        let verdict = f.meta.primary().context("meta.json: no verdict for its symptom")?.clone();
        if f.meta.target.contains(',') || verdict.config.contains(['~', ':']) {
            return Ok(None);
        }
        let fired_in = |name: &str| f.outcome(name).map(|r| r.passes_fired.clone()).unwrap_or_default();
        let reference_name = f.outcomes.first().map_or("disable", |r| r.config.as_str()).to_string();
        let always = fired_in(&reference_name);
        let fired = candidates(&fired_in(&verdict.config), &always);
        let message = match f.meta.symptom {
            Symptom::Inconsistency => verdict.detail.clone(),
            _ => f.outcome(&verdict.config).map(|r| r.message.clone()).unwrap_or_default(),
        };
        let relax = f.payload.recipe().cloned().map(RelaxTest::Recipe);
        Ok(Some(Finding {
            target: f.meta.target.clone(),
            target_version: f.meta.target_version.clone(),
            symptom: f.meta.symptom,
            config: Config::parse(&verdict.config)?,
            reference: Config::parse(&reference_name)?,
            fired,
            message,
            case: Case { model: f.model, feeds: f.inputs },
            source: dir.display().to_string(),
            relax,
        }))
    }
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
        let Some(v) = crate::finding::signature::primary(judgement) else { return Ok(None) };
        let reference = outcomes.first().context("no runs")?;
        let shown = outcomes.iter().find(|o| o.config.to_string() == v.config).context("verdict without its run")?;
        let fired = candidates(&shown.passes_fired, &reference.passes_fired);
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
            relax: None,
        }))
    }
}
