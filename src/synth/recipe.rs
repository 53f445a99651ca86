//! The recipe of a Relax-level test (TVM): a generated seed graph, a Relax pattern and a random seed, which the
//! TVM worker's runner turns into an IRModule. One typed value; written as `recipe.json`, read back with `parse`.

use crate::graph::{onnx, Model};
use crate::pattern::relax::{RelaxPattern, RelaxProvenance};
use serde::{Deserialize, Serialize};

/// The `kind` every recipe carries (what the runner recognizes).
pub const KIND: &str = "oatest-relax-synth";

/// What a recipe asks of the TVM worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecipeUse {
    /// A test: splice, compile under the configuration, run.
    Test,
    /// The pattern check: splice only; answer with the pattern's module JSON (and its shrunk script).
    Check,
    /// A test compiled with TIR's argument assertions on (the pattern check's reference run: catches
    /// PrimFunc calls whose shapes disagree, which the campaign's assertion-free builds would not).
    Strict,
}

/// A Relax-synthesized test, as `python/oatest_tvm*.py` reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    pub kind: String,
    /// The seed graph's ONNX encoding, in hex.
    pub seed_onnx: String,
    /// The Relax pattern's TVMScript.
    pub pattern: String,
    pub pass: String,
    /// The pass's recorded arguments (used when the runner inserts the pass: it is outside its pipeline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_args: Option<serde_json::Value>,
    pub provenance: RelaxProvenance,
    pub rng: u32,
    #[serde(default)]
    pub check_only: bool,
    /// The pattern's module as TVM JSON (faster to load than the script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_ir: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pattern_shrunk: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict: bool,
    /// A module with TVM's own structure (another pattern's script) the pattern is spliced into, called from
    /// the seed's main (`python/oatest_tvm_synth.py`'s `_synthesize_hosted`); none: spliced into main itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Recipe {
    pub fn new(seed_onnx: &[u8], pattern: &RelaxPattern, rng: u32, usage: RecipeUse) -> Recipe {
        Recipe {
            kind: KIND.into(),
            seed_onnx: crate::util::to_hex(seed_onnx),
            pattern: pattern.script.clone(),
            pass: pattern.pass.clone(),
            pass_args: pattern.pass_args.clone(),
            provenance: pattern.provenance.clone(),
            rng,
            check_only: usage == RecipeUse::Check,
            pattern_ir: pattern.ir_json.clone().filter(|_| usage != RecipeUse::Check),
            pattern_shrunk: pattern.shrunk,
            strict: usage == RecipeUse::Strict,
            host: None,
        }
    }

    /// The same recipe with its pattern spliced into `host` (a module's TVMScript).
    pub fn hosted(self, host: &str) -> Recipe {
        Recipe { host: Some(host.to_string()), ..self }
    }

    /// The recipe in `bytes`; `None` when they are not one (an ONNX model, say).
    pub fn parse(bytes: &[u8]) -> Option<Recipe> {
        if bytes.first() != Some(&b'{') {
            return None;
        }
        serde_json::from_slice::<Recipe>(bytes).ok().filter(|r| r.kind == KIND)
    }

    /// What the worker is given.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a recipe serializes")
    }

    /// The seed graph (`None` when its hex or ONNX is broken).
    pub fn seed(&self) -> Option<Model> {
        onnx::decode_model(&crate::util::from_hex(&self.seed_onnx)?).ok()
    }

    /// The same recipe with another seed graph.
    pub fn with_seed(&self, seed_onnx: &[u8]) -> Recipe {
        Recipe { seed_onnx: crate::util::to_hex(seed_onnx), ..self.clone() }
    }
}

/// What a test file holds: an ONNX model, or a Relax recipe whose seed graph is the model (its inputs are the
/// seed's). Returned with the recipe, if any; the bytes themselves are what the target runs.
pub fn decode_test(bytes: &[u8], path: &std::path::Path) -> anyhow::Result<(Model, Option<Recipe>)> {
    use anyhow::Context;
    if let Some(r) = Recipe::parse(bytes) {
        let seed = r.seed().with_context(|| format!("{}: the recipe's seed graph is not ONNX", path.display()))?;
        return Ok((seed, Some(r)));
    }
    let m = onnx::decode_model(bytes).with_context(|| format!("{}: cannot import ONNX model", path.display()))?;
    Ok((m, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern() -> RelaxPattern {
        serde_json::from_value(serde_json::json!({
            "format": 1, "kind": "tvm-relax", "pass": "FuseOps", "granularity": "block",
            "fires_with_default_args": true, "functions": ["main"],
            "provenance": {"test": "t.py::f", "file": "t.py", "function": "f"},
            "tvm_version": "0.27", "script": "# script"
        }))
        .unwrap()
    }

    #[test]
    fn a_recipe_round_trips_and_swaps_its_seed() {
        let r = Recipe::new(b"\x08\x09", &pattern(), 7, RecipeUse::Test);
        let back = Recipe::parse(&r.to_bytes()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.with_seed(b"\x01").seed_onnx, "01");
        let v: serde_json::Value = serde_json::from_slice(&r.to_bytes()).unwrap();
        assert_eq!(v["kind"], KIND);
        assert_eq!(v["check_only"], false);
        assert!(v.get("strict").is_none(), "flags that are off are left out, as the runner expects");
        assert!(Recipe::parse(b"\x08\x07onnx").is_none());
        assert!(Recipe::parse(br#"{"kind": "tvm-relax"}"#).is_none());
    }

    #[test]
    fn usages_set_their_flags() {
        let v = |u| serde_json::to_value(Recipe::new(b"", &pattern(), 0, u)).unwrap();
        assert_eq!(v(RecipeUse::Check)["check_only"], true);
        assert_eq!(v(RecipeUse::Strict)["strict"], true);
    }
}
