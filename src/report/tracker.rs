//! report.md in the issue template of the target's tracker, so that its top can be pasted as is: ONNX Runtime's
//! bug report (describe, reproduce, urgency, platform, OS, installation, version, API, architecture, execution
//! provider) and TVM's (expected, actual, environment, steps, triage labels; tract gets the same sections
//! without labels). Both show the results per level and onnx.reference's verdict, and the culprit's ablation
//! as the option a user types; oatest's own detail sits below in a collapsed `<details>` section.

use super::levels::Levels;
use super::record::files;
use super::words::*;
use crate::compiler::Status;
use crate::oracle::{Hints, Tolerance};
use crate::triage::{Finding, Minimized, Triaged};
use std::fmt::Write as _;

/// report.md: the tracker's template first, oatest's detail below.
pub fn markdown(
    f: &Finding,
    t: &Triaged,
    m: &Minimized,
    upstream: &super::upstream::Upstream,
    levels: &Levels,
    tolerance: Tolerance,
) -> String {
    let culprits = faulty(t);
    let mut s = format!("# {}: {} after {culprits} on {}\n\n", target_title(f), what(f, t), test_words(f, t, m));
    if !t.confirmed {
        s.push_str(
            "> **Not confirmed:** the symptom did not re-occur on the last check; the model is the original.\n\n",
        );
    }
    s.push_str(&upstream_lines(upstream));
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
fn upstream_lines(u: &super::upstream::Upstream) -> String {
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
            "- **Enabled by:** {} (needed to show the bug but not at fault: they make its pattern appear, or \
             rewire values and so trip over what the culprits above left)",
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
