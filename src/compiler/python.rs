//! The embedded Python interpreter's shared plumbing (the `python` feature): finding the project's `.venv`
//! packages and loading oatest's Python modules, compiled into the binary, into the worker's interpreter.

use pyo3::prelude::*;
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
