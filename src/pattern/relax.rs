//! TVM Relax patterns: JSON files written by `python/oatest_tvm_capture.py` (format 1): the pass, the
//! granularity (`subgraph`: a changed function with everything it calls; `block`: a prefix of its first
//! dataflow block), whether the pass built with default arguments fires on it, the provenance (TVM test file and
//! function), and the closed IRModule as self-contained TVMScript.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RelaxProvenance {
    pub test: Option<String>,
    pub file: Option<String>,
    pub function: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RelaxPattern {
    pub format: u32,
    pub kind: String,
    pub pass: String,
    pub granularity: String,
    pub fires_with_default_args: bool,
    #[serde(default)]
    pub pass_repr: Option<String>,
    pub functions: Vec<String>,
    pub provenance: RelaxProvenance,
    pub tvm_version: String,
    pub script: String,
    /// The parsed module as TVM JSON, filled by the pattern check (`synth::usable`) (loading it is ~20x faster than parsing the
    /// script); recipes carry it as `pattern_ir`.
    #[serde(skip)]
    pub ir_json: Option<String>,
    /// The script was shrunk by the check (large dimensions divided, see `python/oatest_tvm_check.py`'s `shrink`).
    #[serde(skip)]
    pub shrunk: bool,
}

impl RelaxPattern {
    /// `Ok(None)` for JSON files that are not Relax patterns (reports, manifests).
    pub fn load(path: &Path) -> anyhow::Result<Option<RelaxPattern>> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        if v["kind"] != "tvm-relax" {
            return Ok(None);
        }
        let p: RelaxPattern =
            serde_json::from_value(v).with_context(|| format!("{}: not a Relax pattern", path.display()))?;
        anyhow::ensure!(p.format == 1, "{}: pattern format {} (this oatest reads 1)", path.display(), p.format);
        anyhow::ensure!(!p.script.is_empty(), "{}: empty script", path.display());
        Ok(Some(p))
    }
}

/// Every Relax pattern below `dir`.
pub fn load_relax_library(dir: &Path) -> anyhow::Result<(Vec<RelaxPattern>, Vec<String>)> {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for f in crate::util::files_with_ext(dir, "json")? {
        match RelaxPattern::load(&f) {
            Ok(Some(p)) => ok.push(p),
            Ok(None) => {}
            Err(e) => bad.push(format!("{e:#}")),
        }
    }
    Ok((ok, bad))
}
