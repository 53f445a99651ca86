//! report.md in the issue template of the target's tracker, so that its top can be pasted as is: ONNX Runtime's
//! bug report (describe, reproduce, urgency, platform, OS, installation, version, API, architecture, execution
//! provider) and TVM's (expected, actual, environment, steps, triage labels; tract gets the same sections
//! without labels). Both show the results per level and onnx.reference's verdict, and the culprit's ablation
//! as the option a user types; oatest's own detail sits below in a collapsed `<details>` section.

use super::classify::Class;
use super::levels::Levels;
use super::report::files;
use super::{Finding, Minimized, Triaged};
use crate::compiler::{Outcome, Status};
use crate::oracle::{Hints, Symptom, Tolerance};
use std::fmt::Write as _;

/// The machine a report is written on, as the trackers' templates ask for it.
pub struct Platform {
    /// `Linux`, `Mac`, `Windows`.
    pub platform: String,
    /// The distribution's PRETTY_NAME (/etc/os-release) and the kernel release (`uname -r`).
    pub os: String,
    /// ORT's names: `X64`, `ARM64`, ...
    pub arch: &'static str,
}

impl Platform {
    pub fn here() -> Platform {
        let pretty = std::fs::read_to_string("/etc/os-release").ok().and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
        });
        let uname = |flag: &str| {
            let out = std::process::Command::new("uname").arg(flag).output().ok()?;
            Some(String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
        };
        let os = match (pretty, uname("-r")) {
            (Some(p), Some(k)) => format!("{p} (kernel {k})"),
            (Some(p), None) => p,
            (None, _) => uname("-sr").unwrap_or_else(|| std::env::consts::OS.to_string()),
        };
        let platform = match std::env::consts::OS {
            "linux" => "Linux",
            "macos" => "Mac",
            "windows" => "Windows",
            other => other,
        };
        let arch = match std::env::consts::ARCH {
            "x86_64" => "X64",
            "aarch64" => "ARM64",
            "x86" => "X86",
            "arm" => "ARM",
            other => other,
        };
        Platform { platform: platform.to_string(), os, arch }
    }
}

pub(super) fn target_title(f: &Finding) -> String {
    match f.target.as_str() {
        "ort" => format!("ONNX Runtime {}", f.target_version),
        "tvm" => format!("TVM {}", f.target_version),
        "ort-transformers" => format!("onnxruntime.transformers {}", f.target_version),
        other => format!("{other} {}", f.target_version),
    }
}

pub(super) fn outputs_preview(o: &Outcome) -> String {
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

/// The faulty culprits (not the enablers), joined, or `unknown`.
pub(super) fn faulty(t: &Triaged) -> String {
    let f: Vec<&str> = t.culprits.iter().filter(|p| !t.enablers.contains(p)).map(|p| p.as_str()).collect();
    if f.is_empty() {
        "unknown".into()
    } else {
        f.join(" + ")
    }
}

pub(super) fn what(f: &Finding, t: &Triaged) -> &'static str {
    match (f.symptom, t.class) {
        (Symptom::Inconsistency, Class::Reference) => "computes wrong results without optimization, right ones",
        (Symptom::Inconsistency, Class::Precision) => "rounds differently",
        (Symptom::Inconsistency, Class::Widened) => "skips float16 roundings",
        (Symptom::Inconsistency, Class::Approximated) => "approximates as asked",
        (Symptom::Inconsistency, Class::Platform) => "overflows in its fast x64 quantized kernels",
        (Symptom::Inconsistency, Class::Nonfinite) => "differs in NaN/Inf results",
        (Symptom::Inconsistency, Class::Undecided) => "computes different results",
        (Symptom::Crash, _) => "crashes",
        (Symptom::Hang, _) => "hangs",
        (Symptom::Error, _) => "fails",
        (Symptom::Inconsistency, _) => "computes wrong results",
    }
}

/// What the minimized test is, for the title: `a 3-node graph (Transpose, Gemm, Transpose)`.
pub(super) fn test_words(f: &Finding, t: &Triaged, m: &Minimized) -> String {
    let g = &m.case.model.graph;
    let ops: Vec<String> = g.nodes_in_order().unwrap_or_default().iter().map(|n| n.op.name.clone()).collect();
    match recipe(f, m) {
        Some(recipe) if m.relax.is_some() => {
            let from = recipe["provenance"]["function"].as_str().unwrap_or("?").to_string();
            let n = m.relax.as_ref().map_or(0, |red| red.case.summary.bindings);
            format!("a {n}-binding Relax module (from a pattern of TVM's {from})")
        }
        Some(recipe) => {
            let from = recipe["provenance"]["function"].as_str().unwrap_or("?").to_string();
            match t.nodes {
                0 => format!("a Relax pattern (from TVM's {from})"),
                n => format!("a Relax pattern (from TVM's {from}) in a {n}-node graph ({})", ops.join(", ")),
            }
        }
        None => format!("a {}-node graph ({})", t.nodes, ops.join(", ")),
    }
}

/// The minimized test's recipe, when it still is one.
pub(super) fn recipe(f: &Finding, m: &Minimized) -> Option<serde_json::Value> {
    f.raw.as_ref().filter(|_| m.pattern_needed).map(|raw| serde_json::from_slice(raw).unwrap_or_default())
}

/// What the run with the culprits disabled shows, in words.
pub(super) fn without_words(m: &Minimized, tolerance: Tolerance) -> Option<(bool, String)> {
    let w = m.without.as_ref()?;
    Some(match (&w.status, &m.reference) {
        (Status::Ok, Some(r)) => {
            match (crate::oracle::Oracle { tolerance }).inconsistency_with(r, w, &Hints::of(&m.case.model.graph)) {
                None => (true, "runs and matches the unoptimized result".to_string()),
                Some(v) => (false, format!("still differs: {}", v.detail)),
            }
        }
        (Status::Ok, None) => (true, "runs".to_string()),
        (st, _) => (false, format!("still ends in {}: {}", st.kind(), st.message())),
    })
}

/// The semantic reference's verdict: classification's note for an inconsistency, else how onnx.reference's run
/// of the minimized model compares with the unoptimized run.
pub(super) fn semantic_words(
    f: &Finding,
    t: &Triaged,
    levels: &Levels,
    m: &Minimized,
    tolerance: Tolerance,
) -> Option<String> {
    if f.symptom == Symptom::Inconsistency && !t.class_note.is_empty() {
        return Some(t.class_note.clone());
    }
    let base = levels.runs.first().filter(|b| b.status == Status::Ok);
    match (&levels.semantic, base) {
        (Some(Ok(o)), Some(b)) if o.status == Status::Ok => {
            let hints = Hints::of(&m.case.model.graph);
            match crate::oracle::distance_with(&b.outputs, &o.outputs, tolerance, &hints) {
                Ok(d) if !d.exceeds => Some(format!(
                    "onnx.reference runs the model and agrees with the unoptimized run (max |diff| {:e}): the model \
                     is valid and the unoptimized result is right",
                    d.max
                )),
                Ok(d) => Some(format!("onnx.reference disagrees with the unoptimized run too ({})", d.summary())),
                Err(e) => Some(format!("onnx.reference's outputs cannot be compared: {}", e.0)),
            }
        }
        (Some(Ok(o)), _) => Some(format!("onnx.reference: {}: {}", o.status.kind(), o.status.message())),
        (Some(Err(e)), _) => Some(format!("onnx.reference could not run: {e}")),
        (None, _) => None,
    }
}

/// Whether the unoptimized run is known to agree with ONNX semantics: classified so (an inconsistency of
/// class `optimizer`), or onnx.reference's run of the minimized model within tolerance of it.
pub(super) fn reference_is_right(f: &Finding, t: &Triaged, levels: &Levels, m: &Minimized, tol: Tolerance) -> bool {
    if f.symptom == Symptom::Inconsistency {
        return t.class == Class::Optimizer;
    }
    match (&levels.semantic, levels.runs.first()) {
        (Some(Ok(o)), Some(b)) if o.status == Status::Ok && b.status == Status::Ok => {
            let hints = Hints::of(&m.case.model.graph);
            crate::oracle::distance_with(&b.outputs, &o.outputs, tol, &hints).is_ok_and(|d| !d.exceeds)
        }
        _ => false,
    }
}

/// Expected vs actual: the unoptimized run's outputs, then the optimized run's outputs or failure.
pub(super) fn expected_actual(t: &Triaged, m: &Minimized) -> String {
    let mut s = String::new();
    match (&m.reference, &m.shown) {
        (Some(r), Some(o)) => {
            let _ = writeln!(s, "Expected (unoptimized, `{}`):\n\n```\n{}```\n", r.config, outputs_preview(r));
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
    s
}

/// report.md: the tracker's template first, oatest's detail below.
pub fn markdown(f: &Finding, t: &Triaged, m: &Minimized, levels: &Levels, tolerance: Tolerance) -> String {
    let culprits = faulty(t);
    let mut s = format!("# {}: {} after {culprits} on {}\n\n", target_title(f), what(f, t), test_words(f, t, m));
    if !t.confirmed {
        s.push_str(
            "> **Not confirmed:** the symptom did not re-occur on the last check; the model is the original.\n\n",
        );
    }
    s.push_str(&upstream_lines(m));
    let body = match f.target.as_str() {
        "ort" => super::templates::ort(f, t, m, levels, tolerance),
        crate::compiler::ortx::NAME => super::templates_ortx::ortx(f, t, m, levels, tolerance),
        _ => super::templates::tvm(f, t, m, levels, tolerance),
    };
    s.push_str(&body);
    s.push_str(&details(f, t, m, tolerance));
    s
}

/// What upstream knows ([`super::upstream`]): the known issue it matches, the versions it was re-run with.
fn upstream_lines(m: &Minimized) -> String {
    let u = &m.upstream;
    let mut s = String::new();
    if let Some(k) = &u.known {
        let title = if k.title.is_empty() { String::new() } else { format!(": {}", k.title) };
        let _ = writeln!(s, "- **Known:** {} ({}){title}", k.link, k.status);
    }
    if !u.versions.is_empty() {
        let fixed = u.fixed_upstream.as_ref().map(|v| format!(" (fixed upstream in {v})")).unwrap_or_default();
        let _ = writeln!(s, "- **Affected versions:** {}{fixed}", u.versions_line());
    }
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// oatest's own detail (class, culprits and how they were found, reduction, files), collapsed.
fn details(f: &Finding, t: &Triaged, m: &Minimized, tolerance: Tolerance) -> String {
    let mut s = String::from("\n<details>\n<summary>oatest triage details</summary>\n\n");
    let _ = writeln!(s, "- **Class:** `{}`: {}", t.class, t.class.meaning());
    if !t.class_note.is_empty() {
        let _ = writeln!(s, "  - {}", t.class_note);
    }
    let _ = writeln!(s, "- **Symptom:** {}", f.symptom);
    let _ = writeln!(s, "- **Culprit passes:** {} (found by {} in {} runs)", faulty(t), t.method, t.dd_runs);
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
    let _ = writeln!(s, "- **Configuration:** `{}` (the reference: `{}`)", t.config, f.reference);
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
    if let Some(red) = &m.relax {
        let _ = writeln!(
            s,
            "- **Relax-level reduction:** {} top-level bindings from {} ({} checks{}); the module is `module.py`",
            red.case.summary.bindings,
            red.original_bindings,
            red.checks,
            if red.fixpoint { ", fixpoint" } else { ", stopped by a limit" }
        );
    }
    let (test_file, original_file) = files(f, m);
    let _ = writeln!(s, "- **Signature:** `{}` ({} runs in triage)", t.signature, t.runs);
    let _ = writeln!(
        s,
        "- **Files:** `{test_file}` (minimized), `{original_file}` (as found), `input_K.pb` (inputs), `output_K.pb` \
         (unoptimized outputs), `repro.py`, `bug.json`"
    );
    if m.relax.is_some() {
        let _ =
            writeln!(s, "- **Also:** `module.py` (the module's TVMScript), `input_K.npy` (the inputs for repro.py)");
    } else {
        let _ = writeln!(s, "- **With oatest:** `oatest run {test_file} --target {} --inputs . --judge`", f.target);
    }
    let _ = writeln!(s, "- **Found by** oatest (optimization-aware fuzzing) from `{}`", f.source);
    s.push_str("\n</details>\n");
    s
}
