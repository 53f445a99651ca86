//! Regression seeds: a campaign's bugs and its pass-covering passing tests (`examples/`) as cases in the ONNX
//! backend-test layout (`<case>/model.onnx`, `<case>/test_data_set_0/{input,output}_K.pb`, outputs from the
//! unoptimized reference), with cases.json (which also holds the oracle's tolerance) and a pytest file that runs
//! them all, judging outputs by the oracle's rule (python/oatest_compare.py, embedded).

use crate::oracle::Tolerance;
use crate::util::write_atomic;
use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One exported case, as cases.json lists it.
#[derive(Clone, Debug, Serialize)]
pub struct CaseInfo {
    /// `bug` or `passing`.
    pub kind: String,
    /// Passes the case exercises: a bug's culprits, or the passes a passing test fired.
    pub passes: Vec<String>,
    pub symptom: Option<String>,
    pub source: String,
    /// Which outputs the oracle judges in quantization steps or as float16.
    #[serde(flatten)]
    pub hints: OutputHints,
}

/// A Python script with the oracle's comparison (python/oatest_compare.py) in place of its
/// `# __OATEST_COMPARE__` line.
pub fn with_compare(script: &str) -> String {
    script.replacen("# __OATEST_COMPARE__\n", include_str!("../../python/oatest_compare.py"), 1)
}

/// A graph's outputs as the oracle's hints see them (`oracle::Hints`), by name.
#[derive(Clone, Debug, Default, Serialize)]
pub struct OutputHints {
    /// Outputs of quantized ops (judged in quantization steps).
    pub quantized: Vec<String>,
    /// Dequantized outputs and the size of their quantization step.
    pub dequantized: BTreeMap<String, f64>,
}

impl OutputHints {
    pub fn of(g: &crate::graph::Graph) -> OutputHints {
        let h = crate::oracle::Hints::of(g);
        let outputs = || g.outputs.iter().cloned();
        OutputHints {
            quantized: outputs().filter(|o| h.quantized.contains(o)).collect(),
            dequantized: outputs().filter_map(|o| h.dequantized.get(&o).map(|s| (o, *s))).collect(),
        }
    }

    /// The hints of a case's model file (none when it cannot be read).
    fn of_file(model: &Path) -> OutputHints {
        let m = std::fs::read(model).ok().and_then(|b| crate::graph::onnx::decode_model(&b).ok());
        m.map(|m| OutputHints::of(&m.graph)).unwrap_or_default()
    }
}

/// What an export wrote.
pub struct Exported {
    pub cases: BTreeMap<String, CaseInfo>,
    /// Bugs or examples left out, with why.
    pub skipped: Vec<String>,
}

fn copy_case(src: &Path, model: &str, dst: &Path) -> anyhow::Result<bool> {
    let tensors = |prefix: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> =
            std::fs::read_dir(src).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        v.retain(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with(&format!("{prefix}_")) && n.ends_with(".pb")
        });
        v
    };
    let (ins, outs) = (tensors("input"), tensors("output"));
    if outs.is_empty() {
        return Ok(false);
    }
    let data = dst.join("test_data_set_0");
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    let bytes = std::fs::read(src.join(model)).with_context(|| format!("cannot read {}", src.join(model).display()))?;
    write_atomic(&dst.join("model.onnx"), &bytes)?;
    for f in ins.iter().chain(&outs) {
        write_atomic(&data.join(f.file_name().expect("a file")), &std::fs::read(f)?)?;
    }
    Ok(true)
}

fn dirs(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    v.retain(|p| !p.file_name().unwrap_or_default().to_string_lossy().starts_with('.'));
    v.sort();
    v
}

/// Exports `run`'s bugs and examples into `out`.
pub fn export(run: &Path, out: &Path, tolerance: Tolerance) -> anyhow::Result<Exported> {
    anyhow::ensure!(run.is_dir(), "{}: not a run directory", run.display());
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let mut cases = BTreeMap::new();
    let mut skipped = Vec::new();
    for bug in dirs(&run.join("bugs")) {
        if !crate::finding::record::exists(&bug) {
            continue;
        }
        let rec = super::record::read(&bug)?;
        let name = format!("bug_{}", bug.file_name().unwrap_or_default().to_string_lossy());
        if !bug.join("model.onnx").exists() {
            skipped.push(format!("{}: a Relax-level test (recipe.json) has no ONNX model to export", bug.display()));
            continue;
        }
        if !copy_case(&bug, "model.onnx", &out.join(&name))? {
            skipped.push(format!("{}: no reference outputs (the reference did not run)", bug.display()));
            continue;
        }
        cases.insert(
            name,
            CaseInfo {
                kind: "bug".into(),
                passes: rec.triage.culprits.clone(),
                symptom: Some(rec.symptom.to_string()),
                source: rec.representative.clone(),
                hints: OutputHints::of_file(&bug.join("model.onnx")),
            },
        );
    }
    for ex in dirs(&run.join("examples")) {
        let info: serde_json::Value = std::fs::read_to_string(ex.join("example.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let name = format!("pass_{}", ex.file_name().unwrap_or_default().to_string_lossy());
        if !ex.join("model.onnx").exists() {
            skipped.push(format!("{}: a Relax-level test (recipe.json) has no ONNX model to export", ex.display()));
            continue;
        }
        if !copy_case(&ex, "model.onnx", &out.join(&name))? {
            skipped.push(format!("{}: no reference outputs", ex.display()));
            continue;
        }
        let passes = info["passes_fired"]
            .as_array()
            .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        cases.insert(
            name,
            CaseInfo {
                kind: "passing".into(),
                passes,
                symptom: None,
                source: info["source"].as_str().unwrap_or_default().to_string(),
                hints: OutputHints::of_file(&ex.join("model.onnx")),
            },
        );
    }
    let manifest =
        serde_json::json!({ "tolerance": tolerance.table(), "source": run.display().to_string(), "cases": cases });
    write_atomic(&out.join("cases.json"), serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    let suite = with_compare(include_str!("../../python/regression_suite.py"));
    write_atomic(&out.join("test_oatest_regression.py"), suite.as_bytes())?;
    Ok(Exported { cases, skipped })
}
