//! TVM Relax, embedded: the worker process hosts a Python interpreter (pyo3) that imports apache-tvm once and
//! runs `python/oatest_tvm.py` (compiled into the binary) for every request: ONNX model in, through
//! `relax.frontend.onnx.from_onnx`, an explicit Relax pass pipeline per configuration, the Relax VM, outputs
//! and the passes a PassInstrument saw change the module.

use super::{Config, NamedTensor, Outcome, Status, Target};
use crate::graph::{DType, Tensor, TensorData};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::ffi::CString;
use std::time::Instant;

const RUNNER: &str = include_str!("../../python/oatest_tvm.py");

pub struct TvmTarget {
    module: Py<PyModule>,
    version: String,
}

/// The site-packages of the project's `.venv` (where scripts/setup.sh installs apache-tvm).
fn venv_site_packages() -> Option<std::path::PathBuf> {
    for root in crate::util::search_roots() {
        let lib = root.join(".venv").join("lib");
        let Ok(entries) = std::fs::read_dir(&lib) else { continue };
        for e in entries.flatten() {
            let site = e.path().join("site-packages");
            if e.file_name().to_string_lossy().starts_with("python") && site.join("tvm").is_dir() {
                return Some(site);
            }
        }
    }
    None
}

impl TvmTarget {
    pub fn new() -> anyhow::Result<TvmTarget> {
        // one runtime thread: the campaign parallelizes across workers
        if std::env::var_os("TVM_NUM_THREADS").is_none() {
            std::env::set_var("TVM_NUM_THREADS", "1");
        }
        let site = venv_site_packages();
        Python::attach(|py| -> anyhow::Result<TvmTarget> {
            if let Some(site) = &site {
                py.import("site")?.call_method1("addsitedir", (site.display().to_string(),))?;
            }
            let code = CString::new(RUNNER)?;
            let module = PyModule::from_code(py, &code, c"oatest_tvm.py", c"oatest_tvm").map_err(|e| {
                anyhow::anyhow!(
                    "cannot import TVM ({e}); run scripts/setup.sh to install apache-tvm into .venv{}",
                    if site.is_none() { " (no .venv with tvm found)" } else { "" }
                )
            })?;
            let version: String = module.getattr("version")?.call0()?.extract()?;
            Ok(TvmTarget { module: module.unbind(), version })
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
        use super::Level;
        vec![Config::level(Level::Disable), Config::level(Level::All)]
    }
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let start = Instant::now();
        let Some(wire) = inputs.iter().map(to_wire).collect::<Option<Vec<_>>>() else {
            let st = Status::Error { message: "string inputs are not supported by the tvm target".into() };
            return Outcome::failed(config, st, 0.0);
        };
        let result = Python::attach(|py| -> PyResult<(String, String, Vec<WireTensor>, Vec<String>, Vec<String>)> {
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
