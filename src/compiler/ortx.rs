//! ONNX Runtime's Python graph optimizer (`onnxruntime.transformers.optimize_model`), embedded: the worker
//! process hosts a Python interpreter (pyo3) that loads oatest's runner (python/oatest_ortx.py, with the pass
//! table data/ort-transformers-passes.json, both compiled into the binary). Per configuration: `disable` runs
//! the original model in ORT unoptimized (the reference), `basic` the optimizer's output in ORT unoptimized (only
//! the Python fusions differ), `extended`/`all` that output at ORT's level. Passes are the Fusion classes and
//! OnnxModel clean-ups; an exception inside the optimizer is a crash outcome (its type and innermost frame).
//!
//! The runner's sources are data here whatever the features: a bug's repro.py embeds them ([`runner_bundle`]).

/// The runner's Python modules (name, source), in dependency order; the last is the entry module.
pub const RUNNER_SOURCES: &[(&str, &str)] = &[
    (
        "oatest_ortx_passes",
        concat!(
            "# data/ort-transformers-passes.json, as a module\nimport json\n\nPASSES = json.loads(r'''",
            include_str!("../../data/ort-transformers-passes.json"),
            "''')\n"
        ),
    ),
    ("oatest_ortx", include_str!("../../python/oatest_ortx.py")),
];

/// The target's name (`--target ort-transformers`).
pub const NAME: &str = "ort-transformers";

/// The model types a campaign rotates through, one per test (the data file's `model_types`).
pub fn model_types() -> Vec<String> {
    let v: serde_json::Value =
        serde_json::from_str(include_str!("../../data/ort-transformers-passes.json")).expect("the pass table parses");
    v["model_types"]
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The FusionOptions switch that turns a fusion off (with its siblings), from the pass table; None for a
/// clean-up or a fusion without one.
pub fn switch_of(pass: &str) -> Option<String> {
    let v: serde_json::Value =
        serde_json::from_str(include_str!("../../data/ort-transformers-passes.json")).expect("the pass table parses");
    v["fusions"][pass].as_str().map(String::from)
}

/// The model type the runner optimizes a model as when it names none (`model_type_of` in oatest_ortx.py).
pub const DEFAULT_MODEL_TYPE: &str = "bert";

/// `model` (ONNX bytes) with its metadata `oatest.model_type` set to `model_type`, unless it names one already
/// (a pattern model keeps the type its test optimized it as).
pub fn stamp_model_type(model: &[u8], model_type: &str) -> anyhow::Result<Vec<u8>> {
    use crate::graph::onnx::pb;
    use prost::Message;
    let mut m = pb::ModelProto::decode(model)?;
    if m.metadata_props.iter().any(|p| p.key() == "oatest.model_type") {
        return Ok(model.to_vec());
    }
    m.metadata_props
        .push(pb::StringStringEntryProto { key: Some("oatest.model_type".into()), value: Some(model_type.into()) });
    Ok(m.encode_to_vec())
}

/// The runner as one self-contained Python text (the start of a bug's repro.py).
pub fn runner_bundle() -> String {
    super::tvm::bundle(RUNNER_SOURCES, "oatest's ort-transformers runner")
}

#[cfg(feature = "python")]
pub use embedded::OrtxTarget;

#[cfg(feature = "python")]
mod embedded {
    use crate::compiler::python::{Runner, RunnerSpec};
    use crate::compiler::{Config, Level, NamedTensor, Outcome, Target};

    pub struct OrtxTarget(Runner);

    impl OrtxTarget {
        pub fn new() -> anyhow::Result<OrtxTarget> {
            let spec = RunnerSpec {
                target: super::NAME,
                what: "onnxruntime.transformers",
                package: "onnxruntime",
                install: "onnxruntime, onnx and sympy",
                sources: super::RUNNER_SOURCES,
                // the runner applies a configuration's session options to its ORT session
                options: true,
            };
            Ok(OrtxTarget(Runner::load(spec)?))
        }
    }

    impl Target for OrtxTarget {
        fn name(&self) -> &'static str {
            super::NAME
        }
        fn version(&self) -> String {
            self.0.version.clone()
        }
        fn default_configs(&self) -> Vec<Config> {
            vec![Config::level(Level::Disable), Config::level(Level::Basic), Config::level(Level::All)]
        }
        fn optional_passes(&self) -> Vec<String> {
            self.0.optional_passes.clone()
        }
        /// An exception inside optimize_model comes back as the optimizer's crash (the process lives on).
        fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
            self.0.run(model, inputs, config)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pass_table_names_model_types_and_switches() {
        let types = super::model_types();
        for t in ["bert", "gpt2", "bart", "t5", "unet", "vit", "clip"] {
            assert!(types.iter().any(|x| x == t), "{t} missing from {types:?}");
        }
        assert_eq!(super::switch_of("FusionGelu").as_deref(), Some("enable_gelu"));
        assert_eq!(super::switch_of("FusionReshape"), None);
        assert_eq!(super::switch_of("prune_graph"), None);
    }

    #[test]
    fn the_bundle_defines_the_pass_table_before_the_runner() {
        let b = super::runner_bundle();
        let (p, r) = (
            b.find("_oatest_module(\"oatest_ortx_passes\"").unwrap(),
            b.find("_oatest_module(\"oatest_ortx\",").unwrap(),
        );
        assert!(p < r);
    }
}
