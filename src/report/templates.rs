//! The bodies of report.md in each tracker's issue template: ONNX Runtime's bug report, and TVM's (which tract's
//! reports follow too, without TVM's labels). Shared pieces (titles, the results per level, the verdicts) are in
//! `tracker`.

use super::levels::{ort_level, table, Levels};
use super::words::{
    expected_actual, faulty, node_list, ort_schemas_words, recipe, reference_is_right, semantic_words, without_words,
    Platform,
};
use crate::compiler::Config;
use crate::oracle::{Symptom, Tolerance};
use crate::triage::classify::Class;
use crate::triage::{Finding, Minimized, Triaged};
use std::fmt::Write as _;

/// The names ORT must be told to disable `passes` under (a transformer that runs a second instance for the
/// execution provider, known or seen in the runs, under both names).
fn ort_names(passes: &[String], m: &Minimized, levels: &Levels) -> Vec<String> {
    let ran: Vec<&String> = levels.runs.iter().chain(&m.shown).flat_map(|o| &o.passes_ran).collect();
    let mut names: Vec<String> = Vec::new();
    for p in crate::compiler::rules::with_known_instances(passes).iter() {
        for n in crate::compiler::rules::instances(p) {
            if (n == *p || ran.contains(&&n)) && !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

/// ONNX Runtime's session settings for `config`, as Python lines.
fn ort_settings(config: &Config, disabled: &[String]) -> String {
    let mut s = format!("so.graph_optimization_level = ort.GraphOptimizationLevel.{}\n", ort_level(config.level));
    if config.threads != 1 {
        let _ = writeln!(s, "so.intra_op_num_threads = {}", config.threads);
    }
    for (k, v) in config.session_entries() {
        let _ = writeln!(s, "so.add_session_config_entry(\"{k}\", \"{v}\")");
    }
    for (name, size) in config.dim_overrides() {
        let _ = writeln!(s, "so.add_free_dimension_override_by_name(\"{name}\", {size})");
    }
    if !disabled.is_empty() {
        let _ = writeln!(
            s,
            "so.add_session_config_entry(\"optimization.disable_specified_optimizers\", \"{}\")",
            disabled.join(";")
        );
    }
    s
}

/// The culprits' ablation as the options a user types, and what it changes.
fn ort_ablation(t: &Triaged, m: &Minimized, levels: &Levels, tolerance: Tolerance) -> String {
    let (Some(w), Some((cured, words))) = (&m.without, without_words(m, tolerance)) else {
        return "No set of optimizers was found whose disabling cures it.\n".into();
    };
    let names = ort_names(&w.config.disabled, m, levels);
    let list: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    let lead = if cured { "Disabling the optimizer cures it" } else { "Disabling the optimizer does not cure it" };
    format!(
        "{lead} ({faulty}{enabled}):\n\n```python\nso = ort.SessionOptions()\n{settings}# or, equivalently:\n\
         ort.InferenceSession(\"model.onnx\", so, disabled_optimizers=[{list}])\n```\n\nWith it (`{config}`) the \
         model {words}.\n",
        faulty = faulty(t),
        enabled = if t.enablers.is_empty() {
            String::new()
        } else {
            format!(", shown only with {} on as well, which are not at fault", t.enablers.join(" + "))
        },
        settings = ort_settings(&w.config, &names),
        list = list.join(", "),
        config = w.config,
    )
}

/// A Python snippet that shows the bug with onnxruntime alone, in the bug directory.
fn ort_snippet(config: &Config, m: &Minimized, levels: &Levels) -> String {
    let disabled = ort_names(&config.disabled, m, levels);
    format!(
        "```python\nimport glob\nimport numpy as np\nimport onnx\nimport onnxruntime as ort\nfrom onnx import \
         numpy_helper\n\nfeeds = {{}}\nfor path in glob.glob(\"input_*.pb\"):\n    t = onnx.load_tensor(path)\n    \
         feeds[t.name] = numpy_helper.to_array(t)\n\ndef run(so):\n    sess = ort.InferenceSession(\"model.onnx\", \
         so, providers=[\"CPUExecutionProvider\"])\n    return [o.name for o in sess.get_outputs()], sess.run(None, \
         feeds)\n\nso = ort.SessionOptions()\nso.graph_optimization_level = \
         ort.GraphOptimizationLevel.ORT_DISABLE_ALL\nnames, expected = run(so)\n\nso = ort.SessionOptions()\n\
         {settings}_, actual = run(so)\nfor name, e, a in zip(names, expected, actual):\n    diff = \
         np.abs(e.astype(np.float64) - a.astype(np.float64))\n    print(name, \"max |diff|:\", diff.max() if \
         diff.size else 0.0)\n```\n",
        settings = ort_settings(config, &disabled)
    )
}

/// What the optimized run does, as the rest of a sentence that starts with the compiler's name.
pub(super) fn doing(f: &Finding, t: &Triaged) -> &'static str {
    match (f.symptom, t.class) {
        (Symptom::Inconsistency, Class::Reference) => {
            "computes results that agree with ONNX semantics, while the unoptimized run's do not"
        }
        (Symptom::Inconsistency, Class::Precision) => "rounds differently than the unoptimized run",
        (Symptom::Inconsistency, Class::Widened) => {
            "skips float16/bfloat16 roundings the model asks for (it matches the model computed in float32)"
        }
        (Symptom::Inconsistency, Class::Approximated) => {
            "deviates only by the approximation its configuration asks for (it matches the model evaluated with it)"
        }
        (Symptom::Inconsistency, Class::Platform) => {
            "deviates only in the fast x64 quantized kernels (with session.x64quantprecision=1 it is right)"
        }
        (Symptom::Inconsistency, Class::Nonfinite) => "differs from the unoptimized run only in NaN/Inf results",
        (Symptom::Inconsistency, Class::Undecided) => "computes results that differ from the unoptimized run's",
        (Symptom::Inconsistency, _) => "computes wrong results",
        (Symptom::Crash, _) => "crashes",
        (Symptom::Hang, _) => "hangs",
        (Symptom::Error, _) => "fails",
    }
}

/// Who is responsible, as a sentence.
pub(super) fn responsible(t: &Triaged, pass_kind: &str) -> String {
    if t.culprits.is_empty() {
        let why = t.dd_note.clone().unwrap_or_else(|| "no set of the passes that ran explains it".into());
        return format!("No {pass_kind} could be singled out: {why}.");
    }
    let enabled = if t.enablers.is_empty() {
        String::new()
    } else {
        format!(
            " (shown only with `{}` on as well, which are not at fault: they make its pattern appear, or follow \
             what it left behind)",
            t.enablers.join(" + ")
        )
    };
    let also = if t.also_faulty.is_empty() {
        String::new()
    } else {
        format!(
            " `{}` shows the same symptom on this model on its own (another bug, with an entry of its own); it is \
             disabled in the configuration below.",
            t.also_faulty.join(" + ")
        )
    };
    format!("The {pass_kind} responsible is `{}`{enabled}.{also}", faulty(t))
}

/// The results per level with the semantic reference's verdict and expected vs actual.
pub(super) fn results(f: &Finding, t: &Triaged, m: &Minimized, levels: &Levels, tolerance: Tolerance) -> String {
    let mut s = String::from(
        "Results of the minimized model at each optimization level (measured when this report was written, on the \
         inputs `input_*.pb`):\n\n",
    );
    s.push_str(&table(&f.target, levels, m.without.as_ref(), m, tolerance));
    if let Some(v) = semantic_words(f, t, levels, m, tolerance) {
        let _ = writeln!(s, "\n**ONNX semantics (onnx.reference):** {v}\n");
    } else {
        s.push('\n');
    }
    s.push_str(&expected_actual(t, m));
    s
}

/// ONNX Runtime's bug report template.
pub fn ort(f: &Finding, t: &Triaged, m: &Minimized, levels: &Levels, tolerance: Tolerance) -> String {
    let config = Config::parse(&t.config).unwrap_or_else(|_| f.config.clone());
    let mut s = String::from("### Describe the issue\n\n");
    let setting = match config.disabled.as_slice() {
        [] => format!("`graph_optimization_level = {}`", ort_level(config.level)),
        d => format!("`graph_optimization_level = {}` (with `{}` disabled)", ort_level(config.level), d.join(";")),
    };
    let _ = writeln!(
        s,
        "With {setting}, ONNX Runtime {} on the {}-node model below; without graph optimizations \
         (`ORT_DISABLE_ALL`) it {}. {}\n",
        doing(f, t),
        t.nodes,
        match (t.class, reference_is_right(f, t, levels, m, tolerance)) {
            (Class::Reference, _) => "does not",
            (_, true) => "runs, and its results agree with ONNX semantics (onnx.reference)",
            (_, false) => "runs",
        },
        responsible(t, "graph optimizer")
    );
    if let Some(w) = ort_schemas_words(&m.case.model, &t.culprits) {
        let _ = writeln!(s, "{w}\n");
    }
    s.push_str(&results(f, t, m, levels, tolerance));
    s.push_str(&ort_ablation(t, m, levels, tolerance));
    s.push_str("\n### To reproduce\n\n");
    let _ = writeln!(
        s,
        "The minimized model `model.onnx` ({} nodes; attach it with `input_*.pb`, e.g. as a zip of this \
         directory):\n\n```\n{}```\n",
        t.nodes,
        node_list(&m.case.model)
    );
    let _ = writeln!(
        s,
        "`pip install onnx numpy onnxruntime=={}`, then `python repro.py`: it runs the model unoptimized and with \
         `{}`, each in a child process, and exits 1 while the bug reproduces (0 once it is fixed). With \
         onnxruntime alone:\n",
        f.target_version, t.config
    );
    s.push_str(&ort_snippet(&config, m, levels));
    s.push_str(&ort_environment(f));
    s
}

/// The end of ONNX Runtime's template: urgency, platform, version, API, architecture, provider.
pub(super) fn ort_environment(f: &Finding) -> String {
    let p = Platform::here();
    format!(
        "\n### Urgency\n\n\n\n### Platform\n\n{}\n\n### OS Version\n\n{}\n\n### ONNX Runtime Installation\n\nReleased \
         Package\n\n### ONNX Runtime Version or Commit ID\n\n{}\n\n### ONNX Runtime API\n\nPython\n\n### \
         Architecture\n\n{}\n\n### Execution Provider\n\nDefault CPU\n",
        p.platform, p.os, f.target_version, p.arch
    )
}

/// TVM's bug report template (tract's reports use it too, without the labels).
pub fn tvm(f: &Finding, t: &Triaged, m: &Minimized, levels: &Levels, tolerance: Tolerance) -> String {
    let tvm = f.target == "tvm";
    let (compiler, passes, pass_kind) = if tvm {
        ("TVM", "the Relax optimization passes of its pipeline", "Relax pass")
    } else {
        ("tract", "its optimizations", "optimization")
    };
    let p = Platform::here();
    let mut s = String::from("### Expected behavior\n\n");
    let what = match &m.relax {
        Some(red) => format!("Relax module below ({} top-level bindings)", red.case.summary.bindings),
        None => format!("{}-node model below", t.nodes),
    };
    let _ = writeln!(
        s,
        "The {what} gives the same results compiled with {passes} as without them (`disable`), and runs as \
         cleanly.\n"
    );
    s.push_str("### Actual behavior\n\n");
    let _ = writeln!(s, "Compiled with `{}`, {compiler} {}. {}\n", t.config, doing(f, t), responsible(t, pass_kind));
    s.push_str(&results(f, t, m, levels, tolerance));
    if let (Some(w), Some((_, words))) = (&m.without, without_words(m, tolerance)) {
        let _ = writeln!(s, "Leaving `{}` out (`{}`), the model {words}.\n", t.culprits.join(", "), w.config);
    }
    s.push_str("### Environment\n\n");
    if tvm {
        let _ = writeln!(s, "- TVM {} (the apache-tvm wheel from PyPI), target `llvm` (CPU)", f.target_version);
    } else {
        let _ = writeln!(s, "- tract {} (the tract-onnx crate)", f.target_version);
    }
    let _ = writeln!(s, "- OS: {}\n- Architecture: {}\n", p.os, p.arch);
    s.push_str("### Steps to reproduce\n\n");
    match (&m.relax, recipe(f, m)) {
        (Some(red), recipe) => {
            let from = recipe.as_ref().and_then(|r| r["provenance"]["test"].as_str().map(String::from));
            let _ = writeln!(
                s,
                "The minimized Relax module `module.py` ({} top-level bindings, reduced from {} in a Relax-level test \
                 that spliced a pattern from TVM's `{}` into a generated seed graph); `module.json` holds it with the \
                 pass the test inserts, its inputs are `input_*.npy`:\n\n```python\n{}\n```\n",
                red.case.summary.bindings,
                red.original_bindings,
                from.unwrap_or_else(|| "?".into()),
                crate::triage::relax::shown(&red.case.test.script).trim()
            );
        }
        (None, Some(recipe)) => {
            let _ = writeln!(
                s,
                "A Relax-level test: `recipe.json` holds the seed graph below, a Relax pattern and a random seed; \
                 oatest's Relax runner (embedded in repro.py) imports the seed with `from_onnx` and calls the \
                 pattern's entry from its dataflow block.\n\nSeed graph (minimized):\n\n```\n{}```\n",
                node_list(&m.case.model)
            );
            if let Some(pattern) = recipe["pattern"].as_str() {
                let from = recipe["provenance"]["test"].as_str().unwrap_or("?");
                let _ = writeln!(s, "Relax pattern (from TVM's `{from}`):\n\n```python\n{}\n```\n", pattern.trim());
            }
        }
        (None, None) => {
            let _ = writeln!(s, "The minimized model `model.onnx`:\n\n```\n{}```\n", node_list(&m.case.model));
        }
    }
    if tvm {
        let _ = writeln!(
            s,
            "`pip install {}numpy apache-tvm=={}`, then `python repro.py` (standalone: it embeds oatest's Relax \
             runner, whose pass pipeline per level is listed in it) runs the test with `disable` and with `{}` and \
             exits 1 while the bug reproduces.\n",
            if m.relax.is_some() { "" } else { "onnx " },
            f.target_version,
            t.config
        );
        let area = if t.culprits.is_empty() { "" } else { ", `relax:transform`" };
        let _ = writeln!(s, "### Triage\n\n`type: bug`{area}");
    } else {
        let _ = writeln!(s, "`oatest run model.onnx --target tract --inputs . --judge` runs it at every level.");
    }
    s
}
