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

/// The runner as one self-contained Python text (the start of a bug's repro.py).
pub fn runner_bundle() -> String {
    super::tvm::bundle(RUNNER_SOURCES, "oatest's ort-transformers runner")
}

#[cfg(feature = "python")]
pub use embedded::OrtxTarget;

#[cfg(feature = "python")]
mod embedded {
    use crate::compiler::{Config, Level, NamedTensor, Outcome, Status, Target};
    use crate::graph::{DType, Tensor, TensorData};
    use pyo3::prelude::*;
    use pyo3::types::PyBytes;
    use std::time::Instant;

    pub struct OrtxTarget {
        module: Py<PyModule>,
        version: String,
        optional_passes: Vec<String>,
    }

    impl OrtxTarget {
        pub fn new() -> anyhow::Result<OrtxTarget> {
            let site = crate::compiler::python::venv_site_packages("onnxruntime");
            Python::attach(|py| -> anyhow::Result<OrtxTarget> {
                let module = crate::compiler::python::load_modules(py, site.as_deref(), super::RUNNER_SOURCES)
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "cannot load onnxruntime.transformers ({e:#}); run scripts/setup.sh to install \
                             onnxruntime, onnx and sympy into .venv{}",
                            if site.is_none() { " (no .venv with onnxruntime found)" } else { "" }
                        )
                    })?;
                let version: String = module.getattr("version")?.call0()?.extract()?;
                let optional_passes: Vec<String> = module.getattr("optional_passes")?.call0()?.extract()?;
                Ok(OrtxTarget { module: module.unbind(), version, optional_passes })
            })
        }
    }

    type WireTensor = (String, i32, Vec<i64>, Vec<u8>);

    fn to_wire(t: &NamedTensor) -> Option<WireTensor> {
        let TensorData::Raw(b) = &t.tensor.data else { return None };
        Some((t.name.clone(), t.tensor.dtype.onnx(), t.tensor.dims.clone(), b.clone()))
    }

    type Reply = (String, String, Vec<WireTensor>, Vec<String>, Vec<String>);

    impl Target for OrtxTarget {
        fn name(&self) -> &'static str {
            super::NAME
        }
        fn version(&self) -> String {
            self.version.clone()
        }
        fn default_configs(&self) -> Vec<Config> {
            vec![Config::level(Level::Disable), Config::level(Level::Basic), Config::level(Level::All)]
        }
        fn optional_passes(&self) -> Vec<String> {
            self.optional_passes.clone()
        }
        fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
            let start = Instant::now();
            let Some(wire) = inputs.iter().map(to_wire).collect::<Option<Vec<_>>>() else {
                let st =
                    Status::Error { message: "string inputs are not supported by the ort-transformers target".into() };
                return Outcome::failed(config, st, 0.0);
            };
            let result = Python::attach(|py| -> PyResult<Reply> {
                let r = self.module.bind(py).getattr("run")?.call1((
                    PyBytes::new(py, model),
                    wire,
                    config.level.name(),
                    config.disabled.clone(),
                    config.threads,
                    config.options.clone(),
                ))?;
                Ok((
                    r.get_item("status")?.extract()?,
                    r.get_item("message")?.extract()?,
                    r.get_item("outputs")?.extract()?,
                    r.get_item("fired")?.extract()?,
                    r.get_item("ran")?.extract()?,
                ))
            });
            let time_ms = start.elapsed().as_secs_f64() * 1e3;
            match result {
                Ok((status, message, outputs, passes_fired, passes_ran)) => Outcome {
                    target: super::NAME.into(),
                    config: config.clone(),
                    status: match status.as_str() {
                        "ok" => Status::Ok,
                        // an exception inside optimize_model: the optimizer's crash (the process lives on)
                        "crash" => Status::Crash { signal: None, message },
                        _ => Status::Error { message },
                    },
                    outputs: outputs
                        .into_iter()
                        .map(|(name, code, dims, bytes)| NamedTensor {
                            name,
                            tensor: Tensor { dtype: DType::from_onnx(code), dims, data: TensorData::Raw(bytes) },
                        })
                        .collect(),
                    passes_fired,
                    passes_ran,
                    time_ms,
                },
                Err(e) => Outcome::failed(
                    config,
                    Status::Error { message: format!("the ort-transformers runner failed: {e}") },
                    time_ms,
                ),
            }
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
