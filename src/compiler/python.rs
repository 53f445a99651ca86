//! The embedded Python interpreter's shared plumbing (the `python` feature): finding the project's `.venv`
//! packages and loading oatest's Python modules, compiled into the binary, into the worker's interpreter.

use crate::compiler::{Config, NamedTensor, Outcome, Status};
use crate::graph::{DType, Tensor, TensorData};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::ffi::CString;

/// The site-packages of the project's `.venv` that holds `package` (where scripts/setup.sh installs
/// apache-tvm, onnx and the rest of python/requirements.txt).
pub fn venv_site_packages(package: &str) -> Option<std::path::PathBuf> {
    for root in crate::util::search_roots() {
        let lib = root.join(".venv").join("lib");
        let Ok(entries) = std::fs::read_dir(&lib) else { continue };
        for e in entries.flatten() {
            let site = e.path().join("site-packages");
            if e.file_name().to_string_lossy().starts_with("python") && site.join(package).is_dir() {
                return Some(site);
            }
        }
    }
    None
}

/// Forks this process through CPython's fork hooks (its locks and thread states made consistent in the
/// child, as `os.fork` does); the pid as fork(2) returns it.
pub fn fork() -> i32 {
    Python::attach(|_py| {
        // SAFETY: the hooks are called around fork with the GIL held, as CPython requires.
        unsafe {
            pyo3::ffi::PyOS_BeforeFork();
            let pid = libc::fork();
            if pid == 0 {
                pyo3::ffi::PyOS_AfterFork_Child();
            } else {
                pyo3::ffi::PyOS_AfterFork_Parent();
            }
            pid
        }
    })
}

/// Adds `site` to the interpreter's path, then loads `sources` ((module name, source), each importing only
/// modules before it) as modules registered in `sys.modules`; returns the last one.
pub fn load_modules<'py>(
    py: Python<'py>,
    site: Option<&std::path::Path>,
    sources: &[(&str, &str)],
) -> anyhow::Result<Bound<'py, PyModule>> {
    if let Some(site) = site {
        py.import("site")?.call_method1("addsitedir", (site.display().to_string(),))?;
    }
    let mut entry = None;
    for (name, source) in sources {
        let (code, file) = (CString::new(*source)?, CString::new(format!("{name}.py"))?);
        // PyModule::from_code registers each module in sys.modules: the next one can import it
        let module = PyModule::from_code(py, &code, &file, &CString::new(*name)?)
            .map_err(|e| anyhow::anyhow!("cannot load {name}.py: {e}"))?;
        entry = Some(module);
    }
    entry.ok_or_else(|| anyhow::anyhow!("no Python module to load"))
}

/// An oatest runner loaded into the embedded interpreter, for a target whose passes run in Python (TVM Relax,
/// ONNX Runtime's transformer optimizer): its entry module has `version()`, `optional_passes()` and
/// `run(model, inputs, level, disabled, threads[, options])` returning a dict with `status` (`ok`; `crash`: an
/// exception inside the compiler, the process lives on; else an error), `message`, `outputs`, `fired`, `ran`.
pub struct Runner {
    module: Py<PyModule>,
    pub version: String,
    pub optional_passes: Vec<String>,
    spec: RunnerSpec,
}

/// Which runner [`Runner::load`] loads.
pub struct RunnerSpec {
    /// The target's name, in outcomes and messages.
    pub target: &'static str,
    /// How load errors name what is missing ("TVM").
    pub what: &'static str,
    /// The package it needs from `.venv`, and what scripts/setup.sh installs for it.
    pub package: &'static str,
    pub install: &'static str,
    /// Its modules (name, source), in dependency order; the last is the entry module.
    pub sources: &'static [(&'static str, &'static str)],
    /// Whether `run` takes the configuration's session options.
    pub options: bool,
}

type WireTensor = (String, i32, Vec<i64>, Vec<u8>);
type Reply = (String, String, Vec<WireTensor>, Vec<String>, Vec<String>);

/// Gives the interpreter the standard library of the Python it was built for (`OATEST_PYTHON_HOME`, from
/// build.rs) before it starts, unless `PYTHONHOME` says otherwise: an embedded interpreter would take its home from
/// the first `python3` on PATH, which may be another installation of the same version (pyenv beside the system
/// Python), whose C extensions do not load.
fn standard_library_home() {
    let home = env!("OATEST_PYTHON_HOME");
    if std::env::var_os("PYTHONHOME").is_none() && !home.is_empty() && std::path::Path::new(home).is_dir() {
        std::env::set_var("PYTHONHOME", home);
    }
}

impl Runner {
    pub fn load(spec: RunnerSpec) -> anyhow::Result<Runner> {
        let site = venv_site_packages(spec.package);
        standard_library_home();
        Python::attach(|py| -> anyhow::Result<Runner> {
            let module = load_modules(py, site.as_deref(), spec.sources).map_err(|e| {
                let no_venv =
                    if site.is_none() { format!(" (no .venv with {} found)", spec.package) } else { "".into() };
                anyhow::anyhow!(
                    "cannot import {} ({e:#}); run scripts/setup.sh to install {} into .venv{no_venv}",
                    spec.what,
                    spec.install
                )
            })?;
            let version: String = module.getattr("version")?.call0()?.extract()?;
            let optional_passes: Vec<String> = module.getattr("optional_passes")?.call0()?.extract()?;
            Ok(Runner { module: module.unbind(), version, optional_passes, spec })
        })
    }

    /// The option naming the file a runner that takes options saves its optimized model to.
    pub const SAVE_OPTIMIZED: &'static str = "oatest.save_optimized";

    /// Runs `model` under `config`.
    pub fn run(&self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let start = std::time::Instant::now();
        let to_wire = |t: &NamedTensor| match &t.tensor.data {
            TensorData::Raw(b) => Some((t.name.clone(), t.tensor.dtype.onnx(), t.tensor.dims.clone(), b.clone())),
            _ => None,
        };
        let Some(wire) = inputs.iter().map(to_wire).collect::<Option<Vec<WireTensor>>>() else {
            let message = format!("string inputs are not supported by the {} target", self.spec.target);
            return Outcome::failed(config, Status::Error { message }, 0.0);
        };
        let result = Python::attach(|py| -> PyResult<Reply> {
            let run = self.module.bind(py).getattr("run")?;
            let (model, level, disabled) = (PyBytes::new(py, model), config.level.name(), config.disabled.clone());
            let r = if self.spec.options {
                // where to save the optimizer's output model (extraction diffs it), as one more option
                let mut options = config.options.clone();
                if let Some(p) = &config.save_optimized {
                    options.push((Self::SAVE_OPTIMIZED.into(), p.display().to_string()));
                }
                run.call1((model, wire, level, disabled, config.threads, options))?
            } else {
                run.call1((model, wire, level, disabled, config.threads))?
            };
            let item = |k: &str| r.get_item(k);
            Ok((
                item("status")?.extract()?,
                item("message")?.extract()?,
                item("outputs")?.extract()?,
                item("fired")?.extract()?,
                item("ran")?.extract()?,
            ))
        });
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        let (status, message, outputs, passes_fired, passes_ran) = match result {
            Ok(reply) => reply,
            Err(e) => {
                let message = format!("the {} runner failed: {e}", self.spec.what);
                return Outcome::failed(config, Status::Error { message }, time_ms);
            }
        };
        Outcome {
            target: self.spec.target.into(),
            config: config.clone(),
            status: match status.as_str() {
                "ok" => Status::Ok,
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
        }
    }
}
