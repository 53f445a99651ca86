//! Bug directories: `bugs/<signature>/` with the minimized test (model.onnx, or recipe.json for TVM), the
//! original, inputs and reference outputs as TensorProto files, report.md ready to paste upstream, repro.py
//! (ORT, TVM) and bug.json.
//! One directory per signature: a later finding with the same signature is counted, and replaces the
//! representative only when its minimized model is smaller.

use super::{Finding, Minimized, Triaged};
use crate::compiler::{inputs, Outcome, Status};
use crate::graph::{Attr, Model};
use crate::oracle::{Hints, Symptom, Tolerance};
use crate::util::write_atomic;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// bug.json: what triage found, and every finding that is this bug.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BugRecord {
    pub target: String,
    pub target_version: String,
    pub symptom: Symptom,
    pub triage: Triaged,
    /// The representative's source (finding directory or model file).
    pub representative: String,
    /// Every finding with this signature (sources).
    pub findings: Vec<String>,
    /// Every faulty pass set this bug was seen with (sorted sets; [`super::related`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub culprit_sets: Vec<Vec<String>>,
}

/// Files a triaged finding under `bugs/<signature>/`; returns the directory and whether the bug is new.
pub fn file(
    bugs: &Path,
    f: &Finding,
    t: &Triaged,
    m: &Minimized,
    tolerance: Tolerance,
) -> anyhow::Result<(PathBuf, bool)> {
    let dir = bugs.join(&t.signature);
    let path = dir.join("bug.json");
    if path.exists() {
        let rec = add_finding(&dir, &f.source)?;
        if t.confirmed && (!rec.triage.confirmed || t.nodes < rec.triage.nodes) {
            write(&dir, f, t, m, tolerance, rec.findings)?;
        }
        super::related::note_culprits(&dir, t)?;
        return Ok((dir, false));
    }
    write(&dir, f, t, m, tolerance, vec![f.source.clone()])?;
    super::related::note_culprits(&dir, t)?;
    Ok((dir, true))
}

/// Adds a finding (its source) to the entry in `dir` (its bug.json), unless it is already listed; returns the
/// record as it now is.
pub fn add_finding(dir: &Path, source: &str) -> anyhow::Result<BugRecord> {
    let path = dir.join("bug.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut rec: BugRecord =
        serde_json::from_str(&text).with_context(|| format!("{}: not a bug record", path.display()))?;
    if !rec.findings.iter().any(|f| f == source) {
        rec.findings.push(source.to_string());
        write_atomic(&path, serde_json::to_string_pretty(&rec)?.as_bytes())?;
    }
    Ok(rec)
}

/// Writes a bug directory (every file atomically, bug.json last).
pub fn write(
    dir: &Path,
    f: &Finding,
    t: &Triaged,
    m: &Minimized,
    tolerance: Tolerance,
    findings: Vec<String>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // a Relax synthesis recipe (TVM) is a recipe.json, which the runner and repro.py read in place of ONNX
    let (test_file, original_file) = files(f, m);
    // a smaller representative of another kind replaces the files of the previous one
    for stale in ["model.onnx", "recipe.json", "original.onnx", "original.json"] {
        if stale != test_file && stale != original_file && dir.join(stale).exists() {
            std::fs::remove_file(dir.join(stale))?;
        }
    }
    write_atomic(&dir.join(test_file), &m.model_bytes)?;
    write_atomic(&dir.join(original_file), &f.bytes(&f.case))?;
    for stale in std::fs::read_dir(dir)?.filter_map(|e| e.ok()).map(|e| e.path()) {
        let name = stale.file_name().unwrap_or_default().to_string_lossy().to_string();
        if (name.starts_with("input_") || name.starts_with("output_")) && name.ends_with(".pb") {
            std::fs::remove_file(&stale)?;
        }
    }
    inputs::write(dir, "input", &m.case.feeds)?;
    if let Some(r) = m.reference.as_ref().filter(|r| r.status == Status::Ok) {
        inputs::write(dir, "output", &r.outputs)?;
    }
    write_atomic(&dir.join("report.md"), markdown(f, t, m, tolerance).as_bytes())?;
    if f.target == "ort" || f.target == "tvm" {
        write_atomic(&dir.join("repro.py"), repro_py(f, t, m, tolerance)?.as_bytes())?;
    }
    let rec = BugRecord {
        target: f.target.clone(),
        target_version: f.target_version.clone(),
        symptom: f.symptom,
        triage: t.clone(),
        representative: f.source.clone(),
        findings,
        // a new representative keeps the culprit sets seen so far
        culprit_sets: std::fs::read_to_string(dir.join("bug.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<BugRecord>(&text).ok())
            .map(|rec| rec.culprit_sets)
            .unwrap_or_default(),
    };
    write_atomic(&dir.join("bug.json"), serde_json::to_string_pretty(&rec)?.as_bytes())
}

/// The names of a bug directory's minimized test (`model.onnx`, or `recipe.json` when the Relax pattern is
/// needed) and of the finding's original test (`original.onnx`, or `original.json` for a recipe).
pub fn files(f: &Finding, m: &Minimized) -> (&'static str, &'static str) {
    let test = crate::finding::test_file_name(m.pattern_needed);
    (test, if f.raw.is_some() { "original.json" } else { "original.onnx" })
}

/// The model as a node list: inputs, constants, one line per node, outputs.
pub fn node_list(m: &Model) -> String {
    let g = &m.graph;
    let ty = |v: &str| g.types.get(v).map(|t| t.to_string()).unwrap_or_else(|| "?".into());
    let mut s = String::new();
    for i in g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)) {
        let _ = writeln!(s, "input  {i}: {}", ty(i));
    }
    for (name, t) in &g.initializers {
        let vals = match (t.to_f64s(), t.to_i64s()) {
            (Some(v), _) if v.len() <= 8 && t.dtype.is_float() => format!(" = {v:?}"),
            (_, Some(v)) if v.len() <= 8 => format!(" = {v:?}"),
            _ => String::new(),
        };
        let _ = writeln!(s, "const  {name}: {}{vals}", t.ty());
    }
    for n in g.nodes_in_order().unwrap_or_default() {
        let attrs: Vec<String> = n.attrs.iter().map(|(k, a)| format!("{k}={}", attr(a))).collect();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{}}}", attrs.join(", ")) };
        let _ = writeln!(s, "{} = {}({}){attrs}", n.outputs.join(", "), n.op, n.inputs.join(", "));
    }
    for o in &g.outputs {
        let _ = writeln!(s, "output {o}: {}", ty(o));
    }
    s
}

fn attr(a: &Attr) -> String {
    match a {
        Attr::Int(i) => i.to_string(),
        Attr::Float(x) => x.to_string(),
        Attr::String(b) => format!("\"{}\"", String::from_utf8_lossy(b)),
        Attr::Ints(v) => format!("{v:?}"),
        Attr::Floats(v) => format!("{v:?}"),
        Attr::Tensor(t) => format!("tensor {}", t.ty()),
        Attr::Strings(v) => format!("{} strings", v.len()),
        Attr::Opaque(_) => "<graph or other>".into(),
    }
}

fn outputs_preview(o: &Outcome) -> String {
    let mut s = String::new();
    for t in &o.outputs {
        let vals = t.tensor.to_f64s().map(|v| {
            let shown: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
            format!("[{}{}]", shown.join(", "), if v.len() > 8 { ", ..." } else { "" })
        });
        let _ = writeln!(s, "{} {}: {}", t.name, t.tensor.ty(), vals.unwrap_or_else(|| "(not numeric)".into()));
    }
    s
}

fn target_title(f: &Finding) -> String {
    match f.target.as_str() {
        "ort" => format!("ONNX Runtime {}", f.target_version),
        "tract" => format!("tract {}", f.target_version),
        other => format!("{other} {}", f.target_version),
    }
}

fn ort_level(level: &str) -> &'static str {
    match level {
        "disable" => "ORT_DISABLE_ALL",
        "basic" => "ORT_ENABLE_BASIC",
        "extended" => "ORT_ENABLE_EXTENDED",
        "layout" => "ORT_ENABLE_LAYOUT",
        _ => "ORT_ENABLE_ALL",
    }
}

/// report.md.
pub fn markdown(f: &Finding, t: &Triaged, m: &Minimized, tolerance: Tolerance) -> String {
    let g = &m.case.model.graph;
    let ops: Vec<String> = g.nodes_in_order().unwrap_or_default().iter().map(|n| n.op.name.clone()).collect();
    let faulty: Vec<&String> = t.culprits.iter().filter(|p| !t.enablers.contains(p)).collect();
    let culprits = if faulty.is_empty() {
        "unknown".to_string()
    } else {
        faulty.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(" + ")
    };
    use super::classify::Class;
    let what = match (f.symptom, t.class) {
        (Symptom::Inconsistency, Class::Reference) => "computes wrong results without optimization, right ones",
        (Symptom::Inconsistency, Class::Precision) => "rounds differently",
        (Symptom::Inconsistency, Class::Widened) => "skips float16 roundings",
        (Symptom::Inconsistency, Class::Nonfinite) => "differs in NaN/Inf results",
        (Symptom::Inconsistency, Class::Undecided) => "computes different results",
        (Symptom::Crash, _) => "crashes",
        (Symptom::Hang, _) => "hangs",
        (Symptom::Error, _) => "fails",
        (Symptom::Inconsistency, _) => "computes wrong results",
    };
    let mut s = String::new();
    // the minimized test's recipe, when it still is one
    let recipe: Option<serde_json::Value> =
        f.raw.as_ref().filter(|_| m.pattern_needed).map(|raw| serde_json::from_slice(raw).unwrap_or_default());
    let on = match &recipe {
        Some(recipe) => {
            let from = recipe["provenance"]["function"].as_str().unwrap_or("?").to_string();
            match t.nodes {
                0 => format!("a Relax pattern (from TVM's {from})"),
                n => format!("a Relax pattern (from TVM's {from}) in a {n}-node graph ({})", ops.join(", ")),
            }
        }
        _ => format!("a {}-node graph ({})", t.nodes, ops.join(", ")),
    };
    let _ = writeln!(s, "# {}: {what} after {culprits} on {on}\n", target_title(f));
    let _ = writeln!(s, "- **Class:** `{}`: {}", t.class, t.class.meaning());
    if !t.class_note.is_empty() {
        let _ = writeln!(s, "  - {}", t.class_note);
    }
    let _ = writeln!(s, "- **Symptom:** {}", f.symptom);
    let _ = writeln!(s, "- **Culprit passes:** {culprits} (found by {} in {} runs)", t.method, t.dd_runs);
    if !t.enablers.is_empty() {
        let _ = writeln!(
            s,
            "- **Enabled by:** {} (each alone yields a correct graph on which the culprits above show the bug: \
             they only make its pattern appear)",
            t.enablers.join(" + ")
        );
    }
    if let Some(note) = &t.dd_note {
        let _ = writeln!(s, "  - note: {note}");
    }
    let _ = writeln!(s, "- **Compiler:** {} (CPU), configuration `{}`", target_title(f), t.config);
    if f.target == "ort" {
        let cfg = crate::compiler::Config::parse(&t.config).ok();
        if let Some(c) = cfg {
            let _ = writeln!(
                s,
                "  - i.e. `graph_optimization_level = {}`{}",
                ort_level(c.level.name()),
                if c.disabled.is_empty() {
                    String::new()
                } else {
                    format!(", `optimization.disable_specified_optimizers = {}`", c.disabled.join(";"))
                }
            );
        }
    }
    if let Some(d) = t.max_diff {
        let measured = match (&m.reference, &m.shown) {
            (Some(r), Some(o)) if o.status == Status::Ok => {
                let hints = Hints::of(&m.case.model.graph);
                crate::oracle::distance_with(&r.outputs, &o.outputs, tolerance, &hints).ok().map(|x| x.summary())
            }
            _ => None,
        };
        let how = measured.unwrap_or_else(|| format!("max |diff| {d:e}"));
        let _ = writeln!(s, "- **Max difference:** {how} (tolerance: {})", tolerance.describe());
    }
    let _ = writeln!(
        s,
        "- **Minimized:** {} nodes from {} ({} reduction checks{})",
        t.nodes,
        t.original_nodes,
        t.reduction_checks,
        if t.reduction_fixpoint { ", fixpoint" } else { ", stopped by a limit" }
    );
    if !t.confirmed {
        let _ = writeln!(s, "- **Warning:** the symptom did not re-occur on the last check; the model is the original");
    }
    if let Some(recipe) = &recipe {
        let _ = writeln!(
            s,
            "\n## Test\n\nA Relax-level test: `recipe.json` is oatest's synthesis recipe (JSON: the seed graph below, \
             the Relax pattern and its provenance, the random seed), which oatest's Relax runner (embedded in \
             repro.py) turns into the IRModule: the seed imported with `from_onnx`, the pattern's entry called from \
             its dataflow block. Reduction minimized the seed graph; the pattern is kept whole.\n\nSeed graph \
             (minimized):\n\n```\n{}```\n",
            node_list(&m.case.model)
        );
        if let Some(p) = recipe["pattern"].as_str() {
            let from = recipe["provenance"]["test"].as_str().unwrap_or("?");
            let _ = writeln!(s, "Relax pattern (from TVM's `{from}`):\n\n```python\n{}\n```\n", p.trim());
        }
    } else {
        if f.raw.is_some() {
            let _ = writeln!(
                s,
                "\nFound by a Relax-level test (`original.json`: a synthesis recipe); its minimized seed graph shows \
                 the bug without the Relax pattern, so `model.onnx` is that plain ONNX model."
            );
        }
        let _ = writeln!(s, "\n## Minimized graph\n\n```\n{}```\n", node_list(&m.case.model));
    }
    let _ = writeln!(s, "## Expected vs actual\n");
    match (&m.reference, &m.shown) {
        (Some(r), Some(o)) => {
            let _ =
                writeln!(s, "Expected (unoptimized reference, `{}`):\n\n```\n{}```\n", r.config, outputs_preview(r));
            if o.status == Status::Ok {
                let _ = writeln!(s, "Actual (`{}`):\n\n```\n{}```\n", o.config, outputs_preview(o));
            } else {
                let _ =
                    writeln!(s, "Actual (`{}`): {}\n\n```\n{}\n```\n", o.config, o.status.kind(), o.status.message());
            }
        }
        _ => {
            let _ = writeln!(s, "Actual: {}\n", t.detail);
        }
    }
    let _ = writeln!(s, "## What disabling the culprits changes\n");
    match &m.without {
        Some(w) => {
            let state = match (&w.status, &m.reference) {
                (Status::Ok, Some(r)) => match (crate::oracle::Oracle { tolerance }).inconsistency_with(
                    r,
                    w,
                    &Hints::of(&m.case.model.graph),
                ) {
                    None => "runs and matches the reference".to_string(),
                    Some(v) => format!("still differs: {}", v.detail),
                },
                (st, _) => format!("{}: {}", st.kind(), st.message()),
            };
            let _ = writeln!(s, "With `{}` the model {state}.\n", w.config);
        }
        None => {
            let _ = writeln!(s, "No culprit pass set was found, so nothing was disabled.\n");
        }
    }
    let _ = writeln!(s, "## How to reproduce\n");
    let package = match f.target.as_str() {
        "ort" => Some("onnxruntime"),
        "tvm" => Some("apache-tvm"),
        _ => None,
    };
    if let Some(p) = package {
        let _ = writeln!(
            s,
            "```\npip install onnx numpy {p}=={}\npython repro.py   # exit 1 while the bug reproduces\n```\n",
            f.target_version
        );
    }
    let (test_file, original_file) = files(f, m);
    let _ = writeln!(s, "With oatest: `oatest run {test_file} --target {} --inputs . --judge`\n", f.target);
    let _ = writeln!(
        s,
        "Files: `{test_file}` (minimized), `{original_file}`, `input_K.pb` (inputs), `output_K.pb` (reference \
         outputs).\n"
    );
    let _ = writeln!(s, "Found by oatest (optimization-aware fuzzing) from `{}`.", f.source);
    s
}

/// repro.py: the template in python/ with this bug's parameters (for TVM after oatest's Relax runner).
pub fn repro_py(f: &Finding, t: &Triaged, m: &Minimized, tolerance: Tolerance) -> anyhow::Result<String> {
    const TEMPLATE: &str = include_str!("../../python/repro.py");
    // the oracle's hints by output index (repro.py's outputs are unnamed)
    let outputs = &m.case.model.graph.outputs;
    let index = |name: &String| outputs.iter().position(|o| o == name).unwrap_or(usize::MAX);
    let h = super::export::OutputHints::of(&m.case.model.graph);
    let quantized: Vec<usize> = h.quantized.iter().map(index).collect();
    let dequantized: serde_json::Map<String, serde_json::Value> =
        h.dequantized.iter().map(|(o, step)| (index(o).to_string(), (*step).into())).collect();
    let config = crate::compiler::Config::parse(&t.config)?;
    let case = serde_json::json!({
        "target": f.target,
        "symptom": f.symptom.name(),
        "config": t.config,
        "level": config.level.name(),
        "disabled": config.disabled,
        "culprits": t.culprits,
        "threads": config.threads,
        "tolerance": tolerance.table(),
        "quantized": quantized,
        "dequantized": dequantized,
        "n_inputs": m.case.feeds.len(),
        "test_file": files(f, m).0,
        // a hang is what the campaign called one; other symptoms get room for a slow machine
        "timeout_s": if f.symptom == Symptom::Hang { (t.timeout_ms as f64 / 1000.0).max(1.0) } else { 120.0 },
        "expected_message": t.detail,
    });
    let text = serde_json::to_string_pretty(&case)?;
    anyhow::ensure!(!text.contains("\"\"\""), "bug parameters cannot be embedded in a Python string");
    let script = super::export::with_compare(&TEMPLATE.replacen("__OATEST_CASE__", &text, 1));
    if f.target == "tvm" {
        // the runner's modules first (the reproducer imports `run` from them), then the reproducer
        let body = script.strip_prefix("#!/usr/bin/env python3\n").unwrap_or(&script);
        let runner = crate::compiler::tvm::runner_bundle();
        return Ok(format!("#!/usr/bin/env python3\n{runner}\n# --- the reproducer ---\n{body}"));
    }
    Ok(script)
}
