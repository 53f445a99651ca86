//! The semantic reference as a target: onnx's `onnx.reference.ReferenceEvaluator` (python/oatest_onnxref.py,
//! compiled into the binary) in the worker's embedded interpreter. It has no optimizer: every configuration is
//! the same plain evaluation of the model as the ONNX specification defines it, in the graph's own dtypes.
//! Triage asks it which side of an inconsistency is wrong; it is never a campaign's default target. A
//! configuration that disables [`super::HALF_ROUNDING`] evaluates the model with every 16-bit float widened to float32
//! (outputs rounded to their declared type at the end): what a compiler computes when it skips the intermediate
//! roundings. One that disables `exact:NAME` ([`super::APPROXIMATE`]) evaluates it with the approximation NAME
//! (e.g. `gelu`: Gelu by FastGelu's formula), what a configuration that approximates by design computes. One that
//! disables [`super::INFERRED_SHAPES`] also checks the values against the shapes ONNX shape inference gives them.

use super::{Config, NamedTensor, Outcome, Status, Target};
use crate::graph::onnx::{decode_tensor, encode_tensor};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::time::Instant;

/// The evaluator's Python modules (name, source), its entry module last.
pub const SOURCES: &[(&str, &str)] = &[
    ("oatest_weight_bias", include_str!("../../python/oatest_weight_bias.py")),
    ("oatest_onnxref", include_str!("../../python/oatest_onnxref.py")),
];

pub struct OnnxRefTarget {
    module: Py<PyModule>,
    version: String,
}

impl OnnxRefTarget {
    pub fn new() -> anyhow::Result<OnnxRefTarget> {
        let site = super::python::venv_site_packages("onnx");
        Python::attach(|py| -> anyhow::Result<OnnxRefTarget> {
            let module = super::python::load_modules(py, site.as_deref(), SOURCES).map_err(|e| {
                anyhow::anyhow!(
                    "cannot load the semantic reference ({e:#}); run scripts/setup.sh to install onnx into .venv"
                )
            })?;
            let version: String = module.getattr("version")?.call0()?.extract()?;
            Ok(OnnxRefTarget { module: module.unbind(), version })
        })
    }
}

impl Target for OnnxRefTarget {
    fn name(&self) -> &'static str {
        "onnxref"
    }
    fn version(&self) -> String {
        self.version.clone()
    }
    fn default_configs(&self) -> Vec<Config> {
        vec![Config::level(super::Level::Disable)]
    }
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let start = Instant::now();
        let wire: Vec<Vec<u8>> = inputs.iter().map(|t| encode_tensor(&t.name, &t.tensor)).collect();
        let widen = config.disabled.iter().any(|p| p == super::HALF_ROUNDING);
        let in_float64 = config.disabled.iter().any(|p| p == super::FLOAT_ROUNDING);
        let check_shapes = config.disabled.iter().any(|p| p == super::INFERRED_SHAPES);
        let approximate: Vec<&str> =
            config.disabled.iter().filter_map(|p| p.strip_prefix(super::APPROXIMATE)).collect();
        let result = Python::attach(|py| -> PyResult<(String, String, Vec<Vec<u8>>)> {
            let wire: Vec<Bound<'_, PyBytes>> = wire.iter().map(|b| PyBytes::new(py, b)).collect();
            let r = self.module.bind(py).getattr("run")?.call1((
                PyBytes::new(py, model),
                wire,
                widen,
                approximate.clone(),
                in_float64,
                check_shapes,
            ))?;
            Ok((r.get_item("status")?.extract()?, r.get_item("message")?.extract()?, r.get_item("outputs")?.extract()?))
        });
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        let failed = |message: String| Outcome::failed(config, Status::Error { message }, time_ms);
        match result {
            Ok((status, _, outputs)) if status == "ok" => {
                let decoded: Result<Vec<NamedTensor>, _> = outputs
                    .iter()
                    .map(|b| decode_tensor(b).map(|(name, tensor)| NamedTensor { name, tensor }))
                    .collect();
                match decoded {
                    Ok(outputs) => Outcome {
                        target: "onnxref".into(),
                        config: config.clone(),
                        status: Status::Ok,
                        outputs,
                        passes_fired: Vec::new(),
                        passes_ran: Vec::new(),
                        time_ms,
                    },
                    Err(e) => failed(format!("onnx.reference: an output is not a valid TensorProto: {e}")),
                }
            }
            Ok((_, message, _)) => failed(message),
            Err(e) => failed(format!("the semantic reference failed: {e}")),
        }
    }
}
