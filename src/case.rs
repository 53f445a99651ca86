//! A test case as every stage sees it: its payload (an ONNX model, or a Relax recipe for TVM), its inputs, and
//! where it came from. Typed once here, low in the house, so no stage tells the two payloads apart by their
//! bytes: synthesis makes a `Payload`, targets are given `Payload::bytes`, findings write `Payload::file_name`
//! and read it back by that name.

use crate::graph::{onnx, Model, NamedTensor};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::Path;

/// The `kind` every recipe carries (what the runner recognizes).
pub const RECIPE_KIND: &str = "oatest-relax-synth";
/// The file a recipe is kept in (a finding's, a bug's); an ONNX model is kept in [`ONNX_FILE`].
pub const RECIPE_FILE: &str = "recipe.json";
pub const ONNX_FILE: &str = "model.onnx";

/// One test: a payload, its inputs, and where it came from. Reproducible from (campaign seed, `id`).
#[derive(Clone, Debug)]
pub struct Test {
    pub id: u64,
    pub payload: Payload,
    pub inputs: Vec<NamedTensor>,
    /// `seedgen` or the seed file's path.
    pub origin: String,
    /// The pass this test was built to trigger (synthesized tests only).
    pub target_pass: Option<String>,
    /// Which configuration of the campaign's rotation this test runs if its id gets an extra one (an index; the
    /// source's choice, None: the rotation's turn). When it is fed back: the one it ran, if any.
    pub extra: Option<usize>,
    /// The named configuration its model asks for (`compiler::named::SETTING`: a pattern of an opt-in pass), which
    /// it runs as well, as `all+NAME`, whatever the rotation gives it.
    pub asks: Option<String>,
    /// How its spliced pattern differs from the pattern's own test (`synth::vary` names; none: as written).
    pub variations: Vec<&'static str>,
}

/// What a target runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    /// An ONNX model's encoding.
    Onnx(Vec<u8>),
    /// A Relax-level test (TVM): the worker's runner splices the recipe's pattern into its seed graph.
    Recipe(Box<Recipe>),
}

impl Payload {
    /// What a worker is given (the recipe as JSON).
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self {
            Payload::Onnx(b) => Cow::Borrowed(b),
            Payload::Recipe(r) => Cow::Owned(r.to_bytes()),
        }
    }

    /// The file it is kept in, in a finding's or a bug's directory.
    pub fn file_name(&self) -> &'static str {
        match self {
            Payload::Onnx(_) => ONNX_FILE,
            Payload::Recipe(_) => RECIPE_FILE,
        }
    }

    pub fn onnx(&self) -> Option<&[u8]> {
        match self {
            Payload::Onnx(b) => Some(b),
            Payload::Recipe(_) => None,
        }
    }

    pub fn recipe(&self) -> Option<&Recipe> {
        match self {
            Payload::Onnx(_) => None,
            Payload::Recipe(r) => Some(r),
        }
    }

    /// The graph the test's inputs feed: the ONNX model, or the recipe's seed graph.
    pub fn model(&self) -> anyhow::Result<Model> {
        match self {
            Payload::Onnx(b) => onnx::decode_model(b).context("cannot import ONNX model"),
            Payload::Recipe(r) => r.seed().context("the recipe's seed graph is not ONNX"),
        }
    }

    /// Reads a test file: a recipe when its name ends in `.json`, else an ONNX model. Errors name the file.
    pub fn read(path: &Path) -> anyhow::Result<(Payload, Model)> {
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let payload = if path.extension().is_some_and(|e| e == "json") {
            let r: Recipe = serde_json::from_slice(&bytes)
                .with_context(|| format!("{}: not a Relax recipe (a .json test file must be one)", path.display()))?;
            anyhow::ensure!(r.kind == RECIPE_KIND, "{}: kind {:?} is not {RECIPE_KIND:?}", path.display(), r.kind);
            Payload::Recipe(Box::new(r))
        } else {
            Payload::Onnx(bytes)
        };
        let model = payload.model().with_context(|| path.display().to_string())?;
        Ok((payload, model))
    }
}

/// Where a Relax pattern comes from (TVM's test file and function).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RelaxProvenance {
    pub test: Option<String>,
    pub file: Option<String>,
    pub function: Option<String>,
}

/// A Relax-synthesized test, as `python/oatest_tvm*.py` reads it: a generated seed graph, a Relax pattern and a
/// random seed, which the TVM worker's runner turns into an IRModule. Made by `synth::recipe`.
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
    /// How the runner varies the pattern (`extra-reader`: one inner value of its entry also returned and output).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vary: Vec<String>,
}

impl Recipe {
    /// The same recipe with its pattern spliced into `host` (a module's TVMScript).
    pub fn hosted(self, host: &str) -> Recipe {
        Recipe { host: Some(host.to_string()), ..self }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_file_is_read_by_its_name_and_a_broken_recipe_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let m = crate::graph::Model::new(crate::graph::Graph::default());
        let seed = onnx::encode_model(&m);
        let r = Recipe {
            kind: RECIPE_KIND.into(),
            seed_onnx: crate::util::to_hex(&seed),
            pattern: "# script".into(),
            pass: "FuseOps".into(),
            pass_args: None,
            provenance: RelaxProvenance { test: None, file: None, function: None },
            rng: 0,
            check_only: false,
            pattern_ir: None,
            pattern_shrunk: false,
            strict: false,
            host: None,
            vary: Vec::new(),
        };
        let p = Payload::Recipe(Box::new(r.clone()));
        let path = dir.path().join(p.file_name());
        std::fs::write(&path, p.bytes()).unwrap();
        let (back, _) = Payload::read(&path).unwrap();
        assert_eq!(back, p);
        let onnx_path = dir.path().join(ONNX_FILE);
        std::fs::write(&onnx_path, &seed).unwrap();
        assert_eq!(Payload::read(&onnx_path).unwrap().0, Payload::Onnx(seed));
        // a JSON file that is no recipe, and a recipe file that is broken, are errors that name the file
        let bad = dir.path().join("x.json");
        std::fs::write(&bad, br#"{"kind": "tvm-relax"}"#).unwrap();
        assert!(format!("{:#}", Payload::read(&bad).unwrap_err()).contains("x.json"));
        std::fs::write(&bad, serde_json::to_vec(&Recipe { kind: "other".into(), ..r }).unwrap()).unwrap();
        assert!(format!("{:#}", Payload::read(&bad).unwrap_err()).contains("is not"));
    }
}
