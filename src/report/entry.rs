//! Bug directories: `bugs/<signature>/` with the minimized test (model.onnx, or recipe.json for TVM), the
//! original, inputs and reference outputs as TensorProto files, report.md in the tracker's template
//! (`tracker`, `templates`; its results per level measured as it is written, `levels`), repro.py (ORT, TVM) and
//! bug.json. [`Entries`] is triage's [`Filer`]: it labels an entry with what upstream knows and joins a bug
//! seen with another culprit set to its entry (`related`) before writing.
//! One directory per signature: a later finding with the same signature is counted, and replaces the
//! representative only when its minimized model is smaller.

use super::record::{add_finding, files, BugRecord};
use super::upstream::{Labeler, Upstream};
use crate::compiler::{inputs, Status};
use crate::oracle::{Symptom, Tolerance};
use crate::triage::{Filer, Finding, Minimized, Reproducer, Triaged};
use crate::util::write_atomic;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Triage's filer: entries written under the class folders of a run, labeled by `labeler`.
pub struct Entries {
    pub labeler: Labeler,
}

impl Filer for Entries {
    fn file(
        &mut self,
        folder: &Path,
        r: &mut Reproducer,
        t: &mut Triaged,
        m: &Minimized,
    ) -> anyhow::Result<(PathBuf, bool)> {
        let upstream = self.labeler.label(r, t, m);
        // one bug seen with another culprit set joins its entry
        let known = upstream.known.as_ref().map(|k| k.link.clone());
        let ours = match (&m.relax, r.finding.target == "tvm") {
            (Some(red), _) => super::related::Evidence::of_module(&red.case.test.script, known),
            (None, true) => super::related::Evidence::of(None, &t.detail, &t.class_note, known),
            (None, false) => super::related::Evidence::of(Some(&m.case.model), &t.detail, &t.class_note, known),
        };
        let mut joined = false;
        if let Some(sig) = super::related::find(folder, &r.finding.target, r.finding.symptom, t, &ours) {
            let note =
                format!("filed with {sig}: one root cause, passes {}", super::related::key_passes(t).join(" + "));
            t.dd_note = Some(t.dd_note.take().map_or(note.clone(), |n| format!("{n}; {note}")));
            joined = sig != t.signature;
            t.signature = sig;
        }
        let tolerance = r.oracle.tolerance;
        file(folder, r, t, m, &upstream, tolerance, joined)
    }
}

/// Files a triaged finding under `bugs/<signature>/`; returns the directory and whether the bug is new. A finding
/// `joined` to an entry of another signature (`related`) represents it only when it shows the same kind of symptom
/// (a review found a LayerNormFusionL1 type-error entry shown by a smaller finding of its broadcast-scale error,
/// which both matched one upstream report).
pub fn file(
    bugs: &Path,
    r: &mut Reproducer,
    t: &Triaged,
    m: &Minimized,
    upstream: &Upstream,
    tolerance: Tolerance,
    joined: bool,
) -> anyhow::Result<(PathBuf, bool)> {
    let dir = bugs.join(&t.signature);
    if crate::finding::record::exists(&dir) {
        let rec = add_finding(&dir, &r.finding.source)?;
        let may = !joined || same_kind((rec.symptom, &rec.triage.detail), (r.finding.symptom, &t.detail));
        if t.confirmed && may && (!rec.triage.confirmed || t.nodes < rec.triage.nodes) {
            write(&dir, r, t, m, upstream, tolerance, rec.findings)?;
        }
        super::related::note_culprits(&dir, t)?;
        return Ok((dir, false));
    }
    let source = r.finding.source.clone();
    write(&dir, r, t, m, upstream, tolerance, vec![source])?;
    super::related::note_culprits(&dir, t)?;
    Ok((dir, true))
}

/// Whether two findings show the same kind of symptom: both wrong values, or errors (crashes) of one kind.
fn same_kind((a, detail_a): (Symptom, &str), (b, detail_b): (Symptom, &str)) -> bool {
    let kind = crate::finding::signature::error_kind;
    a == b && (a == Symptom::Inconsistency || kind(detail_a) == kind(detail_b))
}

/// Writes a bug directory (every file atomically, bug.json last); the report's results per level are measured
/// now, with `r`'s worker and semantic reference.
pub fn write(
    dir: &Path,
    r: &mut Reproducer,
    t: &Triaged,
    m: &Minimized,
    upstream: &Upstream,
    tolerance: Tolerance,
    findings: Vec<String>,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config = crate::compiler::Config::parse(&t.config)?;
    let levels = super::levels::measure(r, m, &config);
    let f = &r.finding;
    // a Relax synthesis recipe (TVM) is a recipe.json, which the runner and repro.py read in place of ONNX
    let (test_file, original_file) = files(f, m);
    // a smaller representative of another kind replaces the files of the previous one
    for stale in ["model.onnx", "recipe.json", "module.json", "module.py", "original.onnx", "original.json"] {
        let keep = stale == test_file || stale == original_file || (stale == "module.py" && m.relax.is_some());
        if !keep && dir.join(stale).exists() {
            std::fs::remove_file(dir.join(stale))?;
        }
    }
    write_atomic(&dir.join(test_file), &m.model_bytes)?;
    write_atomic(&dir.join(original_file), &f.bytes(&f.case))?;
    for stale in std::fs::read_dir(dir)?.filter_map(|e| e.ok()).map(|e| e.path()) {
        let name = stale.file_name().unwrap_or_default().to_string_lossy().to_string();
        if (name.starts_with("input_") || name.starts_with("output_"))
            && (name.ends_with(".pb") || name.ends_with(".npy"))
        {
            std::fs::remove_file(&stale)?;
        }
    }
    inputs::write(dir, "input", &m.case.feeds)?;
    if let Some(red) = &m.relax {
        crate::triage::relax::write_files(dir, red)?;
    }
    if let Some(r) = m.reference.as_ref().filter(|r| r.status == Status::Ok) {
        inputs::write(dir, "output", &r.outputs)?;
    }
    write_atomic(&dir.join("report.md"), super::tracker::markdown(f, t, m, upstream, &levels, tolerance).as_bytes())?;
    if ["ort", "tvm", crate::compiler::ortx::NAME].contains(&f.target.as_str()) {
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
        culprit_sets: super::record::read(dir).map(|rec| rec.culprit_sets).unwrap_or_default(),
        upstream: upstream.clone(),
    };
    crate::finding::record::write(dir, &rec)
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
    use crate::compiler::rules::with_known_instances;
    let case = serde_json::json!({
        "target": f.target,
        "symptom": f.symptom.name(),
        "config": t.config,
        "level": config.level.name(),
        // ORT disables a pass by each name it runs under: repro.py's check disables every instance
        "disabled": if f.target == "ort" { with_known_instances(&config.disabled) } else { config.disabled.clone() },
        // session configuration entries (a named configuration's, e.g. all+gelu_approx), and free-dimension
        // overrides (all+free_dims: add_free_dimension_override_by_name)
        "entries": config.session_entries().collect::<Vec<_>>(),
        "free_dims": config.dim_overrides(),
        "culprits": if f.target == "ort" { with_known_instances(&t.culprits) } else { t.culprits.clone() },
        "threads": config.threads,
        "options": config.options,
        "tolerance": tolerance.for_config(&config).table(),
        "quantized": quantized,
        "dequantized": dequantized,
        "n_inputs": m.case.feeds.len(),
        // a module test's inputs are also input_K.npy, named after main's parameters: no onnx needed
        "npy_inputs": m.relax.is_some(),
        "input_names": m.case.feeds.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
        "test_file": files(f, m).0,
        // a hang is what the campaign called one; other symptoms get room for a slow machine
        "timeout_s": if f.symptom == Symptom::Hang { (t.timeout_ms as f64 / 1000.0).max(1.0) } else { 120.0 },
        "expected_message": t.detail,
    });
    let text = serde_json::to_string_pretty(&case)?;
    anyhow::ensure!(!text.contains("\"\"\""), "bug parameters cannot be embedded in a Python string");
    let script = super::export::with_compare(&TEMPLATE.replacen("__OATEST_CASE__", &text, 1));
    if f.target == "tvm" || f.target == crate::compiler::ortx::NAME {
        // the runner's modules first (the reproducer imports `run` from them), then the reproducer
        let body = script.strip_prefix("#!/usr/bin/env python3\n").unwrap_or(&script);
        let runner = if f.target == "tvm" {
            crate::compiler::tvm::runner_bundle()
        } else {
            crate::compiler::ortx::runner_bundle()
        };
        return Ok(format!("#!/usr/bin/env python3\n{runner}\n# --- the reproducer ---\n{body}"));
    }
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finding joined to an entry of another signature may represent it only with the same kind of symptom.
    #[test]
    fn a_joined_finding_represents_an_entry_only_with_its_kind_of_symptom() {
        let bound = "Type Error: Type parameter (T) of Optype (LayerNormalization) bound to different types \
            (tensor(float) and tensor(float16) in node (p1_mul/LayerNormFusion/).";
        let bound_too = "Type Error: Type parameter (T) of Optype (LayerNormalization) bound to different types \
            (tensor(float) and tensor(double) in node (p7_mul/LayerNormFusion/).";
        let scale =
            "Non-zero status code returned while running LayerNormalization node. Name:'p2_mul/LayerNormFusion/' \
            Status Message: Scale and (optional) bias must match X.shape[axis:] or be NumPy-broadcastable to it.";
        let e = Symptom::Error;
        assert!(same_kind((e, bound), (e, bound_too)));
        assert!(!same_kind((e, bound), (e, scale)));
        assert!(!same_kind((e, bound), (Symptom::Inconsistency, "output 'y'[0]: expected 1, got 2")));
        let wrong = Symptom::Inconsistency;
        assert!(same_kind((wrong, "output 'a'[0]: expected 1, got 2"), (wrong, "output 'b'[3]: expected 0, got 5")));
    }
}
