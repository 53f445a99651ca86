//! Making the recipe of a Relax-level test (TVM; the type is [`crate::case::Recipe`]): a generated seed graph, a
//! Relax pattern and a random seed, which the TVM worker's runner turns into an IRModule.

pub use crate::case::Recipe;
use crate::case::RECIPE_KIND;
use crate::pattern::relax::RelaxPattern;

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

impl Recipe {
    pub fn new(seed_onnx: &[u8], pattern: &RelaxPattern, rng: u32, usage: RecipeUse) -> Recipe {
        Recipe {
            kind: RECIPE_KIND.into(),
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
            vary: Vec::new(),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A FuseOps Relax pattern with a placeholder script (the variation tests draw from it too).
    pub(crate) fn pattern() -> RelaxPattern {
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
        let back: Recipe = serde_json::from_slice(&r.to_bytes()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.with_seed(b"\x01").seed_onnx, "01");
        let v: serde_json::Value = serde_json::from_slice(&r.to_bytes()).unwrap();
        assert_eq!(v["kind"], RECIPE_KIND);
        assert_eq!(v["check_only"], false);
        assert!(v.get("strict").is_none(), "flags that are off are left out, as the runner expects");
    }

    #[test]
    fn usages_set_their_flags() {
        let v = |u| serde_json::to_value(Recipe::new(b"", &pattern(), 0, u)).unwrap();
        assert_eq!(v(RecipeUse::Check)["check_only"], true);
        assert_eq!(v(RecipeUse::Strict)["strict"], true);
    }
}
