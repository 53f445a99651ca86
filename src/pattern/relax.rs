//! TVM Relax patterns: JSON files written by `python/oatest_tvm_capture.py` (format 1): the pass, the
//! granularity (`subgraph`: a changed function with everything it calls; `block`: a prefix of its first
//! dataflow block), whether the pass built with default arguments fires on it, the provenance (TVM test file and
//! function), and the closed IRModule as self-contained TVMScript.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub use crate::case::RelaxProvenance;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelaxPattern {
    pub format: u32,
    pub kind: String,
    pub pass: String,
    pub granularity: String,
    pub fires_with_default_args: bool,
    #[serde(default)]
    pub pass_repr: Option<String>,
    /// The test's own pass call's arguments (`python/oatest_tvm_passes.py`'s encoding), verified to fire when
    /// the pass is rebuilt from them; absent when they could not be recorded (`pass_args_note` says why).
    #[serde(default)]
    pub pass_args: Option<serde_json::Value>,
    #[serde(default)]
    pub pass_args_note: Option<String>,
    pub functions: Vec<String>,
    pub provenance: RelaxProvenance,
    pub tvm_version: String,
    pub script: String,
    /// The parsed module as TVM JSON, filled by the pattern check (`synth::usable`) (loading it is ~20x faster than parsing the
    /// script); recipes carry it as `pattern_ir`.
    #[serde(skip)]
    pub ir_json: Option<String>,
    /// The script was shrunk by the check (large dimensions divided, see `python/oatest_tvm_check.py`'s `shrink`).
    #[serde(skip)]
    pub shrunk: bool,
    /// Its entry has an inner value `--vary extra-reader` can expose (the campaign's check says).
    #[serde(skip)]
    pub exposable: bool,
    /// The dtypes `--vary dtype` may write its float32 values in (the campaign's check says: those whose
    /// script parses, splices, and keeps the contract of its pass).
    #[serde(skip)]
    pub dtypes: Vec<String>,
    /// The attribute sites `--vary attr` may change (the runner's `oatest_tvm_vary`; the check says: those whose
    /// variant parses, splices, and keeps the contract of its pass).
    #[serde(skip)]
    pub attr_sites: Vec<u32>,
}

impl RelaxPattern {
    /// `Ok(None)` for JSON files that are not Relax patterns (reports, manifests).
    pub fn load(path: &Path) -> anyhow::Result<Option<RelaxPattern>> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        if v["kind"] != "tvm-relax" {
            return Ok(None);
        }
        let p: RelaxPattern =
            serde_json::from_value(v).with_context(|| format!("{}: not a Relax pattern", path.display()))?;
        anyhow::ensure!(p.format == 1, "{}: pattern format {} (this oatest reads 1)", path.display(), p.format);
        anyhow::ensure!(!p.script.is_empty(), "{}: empty script", path.display());
        Ok(Some(p))
    }
}

impl RelaxPattern {
    /// Whether a campaign can make tests from this pattern with oatest's pipeline, and why not: a pattern of
    /// an optional pipeline pass must fire with the pass's default arguments (the pipeline's); a pattern of a
    /// pass outside the pipeline runs through that pass at its placement, built with the test's own arguments
    /// when they were recorded, else with its defaults.
    pub fn target(&self, pipeline: &crate::compiler::tvm::Pipeline) -> Result<(), Untargetable> {
        use crate::compiler::tvm::PassRole;
        if let Some(why) = pipeline.excluded.get(&self.pass) {
            return Err(Untargetable(format!("excluded: {why}")));
        }
        match pipeline.role(&self.pass) {
            PassRole::Optional if self.fires_with_default_args => Ok(()),
            PassRole::Optional => Err(Untargetable(
                "fires only with the test's own arguments; the pipeline runs the pass with its \
                                       defaults"
                    .into(),
            )),
            PassRole::Required => Err(Untargetable(
                "a required pass: every configuration runs it (the reference's too), so a test \
                                       cannot target it"
                    .into(),
            )),
            PassRole::Inserted if self.pass_args.is_some() || self.fires_with_default_args => Ok(()),
            PassRole::Inserted => Err(Untargetable(format!(
                "fires only with the test's own arguments, which were not recorded: {}",
                self.pass_args_note.as_deref().unwrap_or("no reason recorded")
            ))),
            PassRole::Outside => Err(Untargetable("not in the pipeline and without a placement".into())),
        }
    }
}

/// Why a campaign cannot make tests from a pattern ([`RelaxPattern::target`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Untargetable(pub String);

/// Every Relax pattern below `dir`.
pub fn load_relax_library(dir: &Path) -> anyhow::Result<(Vec<RelaxPattern>, Vec<String>)> {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for f in crate::util::files_with_ext(dir, "json")? {
        match RelaxPattern::load(&f) {
            Ok(Some(p)) => ok.push(p),
            Ok(None) => {}
            Err(e) => bad.push(format!("{e:#}")),
        }
    }
    Ok((ok, bad))
}

/// What campaigns do with one pass of a Relax library (`oatest patterns stats`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PassCoverage {
    pub pass: String,
    pub role: crate::compiler::tvm::PassRole,
    pub patterns: usize,
    /// Patterns a campaign can target (before its pattern check, which runs them spliced into a probe seed).
    pub targets: usize,
    /// With arguments recorded from the test's own pass call.
    pub with_args: usize,
    /// Some campaign configuration runs the pass on tests: a target pattern, or a required pass.
    pub exercised: bool,
    /// Why patterns are not targets, with how many each reason leaves out.
    pub not_targets: std::collections::BTreeMap<String, usize>,
}

/// Every pass of `patterns`, in name order.
pub fn coverage(patterns: &[RelaxPattern], pipeline: &crate::compiler::tvm::Pipeline) -> Vec<PassCoverage> {
    let mut by: std::collections::BTreeMap<&str, PassCoverage> = Default::default();
    for p in patterns {
        let c = by.entry(&p.pass).or_insert_with(|| PassCoverage {
            pass: p.pass.clone(),
            role: pipeline.role(&p.pass),
            patterns: 0,
            targets: 0,
            with_args: 0,
            exercised: false,
            not_targets: Default::default(),
        });
        c.patterns += 1;
        c.with_args += p.pass_args.is_some() as usize;
        match p.target(pipeline) {
            Ok(()) => c.targets += 1,
            Err(why) => *c.not_targets.entry(why.0).or_default() += 1,
        }
    }
    by.into_values()
        .map(|mut c| {
            c.exercised = c.targets > 0 || c.role == crate::compiler::tvm::PassRole::Required;
            c
        })
        .collect()
}
