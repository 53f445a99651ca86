//! TVM Relax, embedded: the worker process hosts a Python interpreter (pyo3) that imports apache-tvm once and
//! loads oatest's Relax runner (the modules of [`RUNNER_SOURCES`], compiled into the binary), whose `run` serves
//! every request: ONNX model in, through `relax.frontend.onnx.from_onnx`, an explicit Relax pass pipeline per
//! configuration, the Relax VM, outputs and the passes a PassInstrument saw change the module.
//!
//! The runner's sources are data here whatever the features: the pattern check's cache key
//! ([`runner_fingerprint`]) and a TVM bug's repro.py ([`runner_bundle`]) need them too.

/// The Relax runner's Python modules, (module name, source), in dependency order: each imports only modules
/// before it. The last is the entry module (`run`, `version`, `optional_passes`).
pub const RUNNER_SOURCES: &[(&str, &str)] = &[
    // the pipeline and the placement of inserted passes, as data (python/oatest_tvm_pipeline.json)
    (
        "oatest_tvm_pipeline",
        concat!("DATA = r\"\"\"", include_str!("../../python/oatest_tvm_pipeline.json"), "\"\"\"\n"),
    ),
    // Relax-level synthesis: a recipe's seed and pattern spliced into one module
    ("oatest_tvm_synth", include_str!("../../python/oatest_tvm_synth.py")),
    // the campaign's pattern check (shrink, splice, the pattern's module as JSON)
    ("oatest_tvm_check", include_str!("../../python/oatest_tvm_check.py")),
    // passes as data: recorded arguments rebuilt, placement of a pass outside the pipeline
    ("oatest_tvm_passes", include_str!("../../python/oatest_tvm_passes.py")),
    // the pipeline, builds and `run`
    ("oatest_tvm", include_str!("../../python/oatest_tvm.py")),
];

/// A stable hash of every runner module's name and source: any change to the runner changes it.
pub fn runner_fingerprint() -> String {
    let all: String =
        RUNNER_SOURCES.iter().map(|(name, source)| format!("{name}\n{}\n{source}", source.len())).collect();
    crate::util::stable_hash(&all)
}

/// The runner as one self-contained Python text (the start of a TVM bug's repro.py, which then imports `run`
/// from the `oatest_tvm` module): each module's source executed as that module and registered in `sys.modules`
/// before the next, as the worker loads them. Needs only onnx, numpy and apache-tvm, no oatest files.
pub fn runner_bundle() -> String {
    bundle(RUNNER_SOURCES, "oatest's Relax runner")
}

/// `sources` ((module name, source), in dependency order) as one self-contained Python text that defines each
/// as its module (what [`runner_bundle`] does for the Relax runner; the ort-transformers runner too).
pub fn bundle(sources: &[(&str, &str)], what: &str) -> String {
    let names: Vec<String> = sources.iter().map(|(name, _)| format!("python/{name}.py")).collect();
    let mut s = format!(
        "# --- {what} ({}) ---\n\
         # each source runs as its module, registered in sys.modules before the next (they import each other)\n\
         import sys as _oatest_sys\n\
         import types as _oatest_types\n\n\n\
         def _oatest_module(name, source):\n    \
             module = _oatest_types.ModuleType(name)\n    \
             module.__file__ = name + \".py\"\n    \
             _oatest_sys.modules[name] = module\n    \
             exec(compile(source, module.__file__, \"exec\", dont_inherit=True), module.__dict__)\n\n\n",
        names.join(", ")
    );
    for (name, source) in sources {
        s += &format!("# --- python/{name}.py ---\n_oatest_module(\"{name}\", {})\n\n", python_str(source));
    }
    s
}

/// A Python string literal of `s`: a raw triple-quoted string (readable) when `s` allows one, else an escaped
/// string (JSON's escapes are Python's).
fn python_str(s: &str) -> String {
    if !s.contains("'''") && !s.ends_with(['\\', '\'']) {
        format!("r'''{s}'''")
    } else {
        serde_json::to_string(s).expect("a string serializes")
    }
}

/// The runner's pipeline as data (`python/oatest_tvm_pipeline.json`, which the runner itself reads): its passes
/// with the lowest level that runs each, and where a pass outside it is inserted for a test carrying one of its
/// patterns.
pub const PIPELINE_JSON: &str = include_str!("../../python/oatest_tvm_pipeline.json");

/// What a Relax pass is to oatest's TVM pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PassRole {
    /// In the pipeline, run by every configuration (the reference's too).
    Required,
    /// In the pipeline, from some level on; a configuration may leave it out.
    Optional,
    /// Outside the pipeline: inserted at its placement for tests carrying one of its patterns.
    Inserted,
    /// Neither in the pipeline nor placed: nothing runs it.
    Outside,
}

#[derive(Debug, serde::Deserialize)]
struct PlacementGroup {
    passes: std::collections::BTreeMap<String, (String, String)>,
}

#[derive(Debug, serde::Deserialize)]
struct PipelineData {
    pipeline: Vec<(String, String)>,
    placement: Vec<PlacementGroup>,
}

/// The pipeline data, parsed.
pub struct Pipeline {
    /// (pass, lowest level or `required`), in pipeline order.
    pub passes: Vec<(String, String)>,
    /// pass -> (`before` | `after`, anchor pass).
    pub placement: std::collections::BTreeMap<String, (String, String)>,
}

impl Pipeline {
    pub fn embedded() -> Pipeline {
        let d: PipelineData = serde_json::from_str(PIPELINE_JSON).expect("python/oatest_tvm_pipeline.json parses");
        let placement = d.placement.into_iter().flat_map(|g| g.passes).collect();
        Pipeline { passes: d.pipeline, placement }
    }

    pub fn role(&self, pass: &str) -> PassRole {
        match self.passes.iter().find(|(p, _)| p == pass) {
            Some((_, level)) if level == "required" => PassRole::Required,
            Some(_) => PassRole::Optional,
            None if self.placement.contains_key(pass) => PassRole::Inserted,
            None => PassRole::Outside,
        }
    }
}

#[cfg(feature = "tvm")]
pub use embedded::TvmTarget;

/// The target: the runner loaded into the worker's interpreter.
#[cfg(feature = "tvm")]
mod embedded {
    use crate::compiler::{Config, NamedTensor, Outcome, Status, Target};
    use crate::graph::{DType, Tensor, TensorData};
    use pyo3::prelude::*;
    use pyo3::types::PyBytes;
    use std::time::Instant;

    use super::RUNNER_SOURCES;

    pub struct TvmTarget {
        /// The runner's entry module (the last of [`RUNNER_SOURCES`]).
        module: Py<PyModule>,
        version: String,
        /// The pipeline's optional passes, as the runner lists them.
        optional_passes: Vec<String>,
    }

    impl TvmTarget {
        pub fn new() -> anyhow::Result<TvmTarget> {
            // one runtime thread: the campaign parallelizes across workers
            if std::env::var_os("TVM_NUM_THREADS").is_none() {
                std::env::set_var("TVM_NUM_THREADS", "1");
            }
            let site = crate::compiler::python::venv_site_packages("tvm");
            Python::attach(|py| -> anyhow::Result<TvmTarget> {
                let module =
                    crate::compiler::python::load_modules(py, site.as_deref(), RUNNER_SOURCES).map_err(|e| {
                        anyhow::anyhow!(
                            "cannot import TVM ({e:#}); run scripts/setup.sh to install apache-tvm into .venv{}",
                            if site.is_none() { " (no .venv with tvm found)" } else { "" }
                        )
                    })?;
                let version: String = module.getattr("version")?.call0()?.extract()?;
                let optional_passes: Vec<String> = module.getattr("optional_passes")?.call0()?.extract()?;
                Ok(TvmTarget { module: module.unbind(), version, optional_passes })
            })
        }
    }

    type WireTensor = (String, i32, Vec<i64>, Vec<u8>);

    fn to_wire(t: &NamedTensor) -> Option<WireTensor> {
        let TensorData::Raw(b) = &t.tensor.data else { return None };
        Some((t.name.clone(), t.tensor.dtype.onnx(), t.tensor.dims.clone(), b.clone()))
    }

    impl Target for TvmTarget {
        fn name(&self) -> &'static str {
            "tvm"
        }
        fn version(&self) -> String {
            self.version.clone()
        }
        fn default_configs(&self) -> Vec<Config> {
            use crate::compiler::Level;
            vec![Config::level(Level::Disable), Config::level(Level::All)]
        }
        fn optional_passes(&self) -> Vec<String> {
            self.optional_passes.clone()
        }
        fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
            let start = Instant::now();
            let Some(wire) = inputs.iter().map(to_wire).collect::<Option<Vec<_>>>() else {
                let st = Status::Error { message: "string inputs are not supported by the tvm target".into() };
                return Outcome::failed(config, st, 0.0);
            };
            let result =
                Python::attach(|py| -> PyResult<(String, String, Vec<WireTensor>, Vec<String>, Vec<String>)> {
                    let r = self.module.bind(py).getattr("run")?.call1((
                        PyBytes::new(py, model),
                        wire,
                        config.level.name(),
                        config.disabled.clone(),
                        config.threads,
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
                    target: "tvm".into(),
                    config: config.clone(),
                    status: if status == "ok" { Status::Ok } else { Status::Error { message } },
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
                Err(e) => {
                    Outcome::failed(config, Status::Error { message: format!("the TVM runner failed: {e}") }, time_ms)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bundle_defines_every_runner_module_in_order() {
        let bundle = super::runner_bundle();
        let at: Vec<usize> = super::RUNNER_SOURCES
            .iter()
            .map(|(name, _)| bundle.find(&format!("_oatest_module(\"{name}\", r'''")).expect(name))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "dependency order: {at:?}");
        assert!(super::RUNNER_SOURCES.iter().all(|(_, source)| bundle.contains(source)), "sources kept verbatim");
    }

    #[test]
    fn every_placement_is_anchored_in_the_pipeline() {
        let p = super::Pipeline::embedded();
        assert!(p.passes.len() > 20 && p.placement.len() > 20);
        for (pass, (pos, anchor)) in &p.placement {
            assert!(pos == "before" || pos == "after", "{pass}: {pos}");
            assert!(p.passes.iter().any(|(a, _)| a == anchor), "{pass}: anchor {anchor} is not a pipeline pass");
            assert_eq!(p.role(pass), super::PassRole::Inserted, "{pass} is both placed and in the pipeline");
        }
        assert_eq!(p.role("LegalizeOps"), super::PassRole::Required);
        assert_eq!(p.role("FuseOps"), super::PassRole::Optional);
        assert_eq!(p.role("NoSuchPass"), super::PassRole::Outside);
    }

    #[test]
    fn a_source_a_raw_string_cannot_hold_is_escaped() {
        assert_eq!(super::python_str("a\\b"), "r'''a\\b'''");
        assert_eq!(super::python_str("x = '''q'''\n"), r#""x = '''q'''\n""#);
        assert_eq!(super::python_str("ends with \\"), r#""ends with \\""#);
        assert_eq!(super::python_str("x = 'q'"), r#""x = 'q'""#);
    }
}
