//! report.md's body for the ort-transformers target, in ONNX Runtime's bug report template: what
//! `optimize_model` does with the minimized model, the culprit fusions and their FusionOptions switches, and a
//! snippet that shows it with onnx and onnxruntime alone.

use super::templates::{doing, ort_environment, responsible, results};
use super::words::{faulty, node_list, reference_is_right, without_words};
use crate::compiler::{ortx, Config, Level};
use crate::oracle::Tolerance;
use crate::triage::classify::Class;
use crate::triage::{Finding, Minimized, Triaged};
use std::fmt::Write as _;

/// The optimizer's model type for the minimized model (configuration option, else the model's metadata).
fn model_type(config: &Config, m: &Minimized) -> String {
    let meta = m.case.model.metadata.iter().find(|(k, _)| k == "oatest.model_type").map(|(_, v)| v.clone());
    config.options.iter().find(|(k, _)| k == "model_type").map(|(_, v)| v.clone()).or(meta).unwrap_or("bert".into())
}

/// How ONNX Runtime runs the optimized model at a level of this target.
fn session_level(level: Level) -> &'static str {
    match level {
        Level::Disable | Level::Basic => "ORT_DISABLE_ALL",
        Level::Extended => "ORT_ENABLE_EXTENDED",
        Level::Layout => "ORT_ENABLE_LAYOUT",
        Level::All => "ORT_ENABLE_ALL",
    }
}

/// The FusionOptions lines that turn the culprits off (those with a switch), and the culprits without one.
fn switches(culprits: &[String]) -> (String, Vec<String>) {
    let (mut lines, mut none) = (String::new(), Vec::new());
    for c in culprits {
        match ortx::switch_of(c) {
            Some(sw) => {
                let _ = writeln!(lines, "options.{sw} = False  # turns off {c} (and the fusions sharing the switch)");
            }
            None => none.push(c.clone()),
        }
    }
    (lines, none)
}

pub fn ortx(f: &Finding, t: &Triaged, m: &Minimized, levels: &super::levels::Levels, tol: Tolerance) -> String {
    let config = Config::parse(&t.config).unwrap_or_else(|_| f.config.clone());
    let mt = model_type(&config, m);
    let opt_level = config.options.iter().find(|(k, _)| k == "opt_level").map(|(_, v)| v.as_str()).unwrap_or("0");
    let mut s = String::from("### Describe the issue\n\n");
    let _ = writeln!(
        s,
        "`onnxruntime.transformers.optimizer.optimize_model(model, model_type=\"{mt}\", opt_level={opt_level})` \
         {} on the {}-node model below (its output saved with `save_model_to_file`, checked with \
         `onnx.checker`, then run in ONNX Runtime with `{}`); the original model in ONNX Runtime without graph \
         optimizations {}. {}\n",
        doing(f, t),
        t.nodes,
        session_level(config.level),
        match (t.class, reference_is_right(f, t, levels, m, tol)) {
            (Class::Reference, _) => "does not",
            (_, true) => "runs, and its results agree with ONNX semantics (onnx.reference)",
            (_, false) => "runs",
        },
        responsible(t, "fusion")
    );
    s.push_str(&results(f, t, m, levels, tol));
    let (lines, no_switch) = switches(&t.culprits);
    if let (Some(w), Some((_, words))) = (&m.without, without_words(m, tol)) {
        let _ = writeln!(s, "Leaving `{}` out (`{}`), the model {words}.\n", faulty(t), w.config);
    }
    s.push_str("\n### To reproduce\n\n");
    let _ = writeln!(
        s,
        "The minimized model `model.onnx` ({} nodes; attach it with `input_*.pb`):\n\n```\n{}```\n",
        t.nodes,
        node_list(&m.case.model)
    );
    let _ = writeln!(
        s,
        "`pip install onnx numpy sympy onnxruntime=={}`, then `python repro.py`: it embeds oatest's runner of the \
         optimizer (which records and skips fusions by wrapping their `apply` in memory), runs the model \
         unoptimized and with `{}`, each in a child process, and exits 1 while the bug reproduces. With the \
         optimizer alone:\n",
        f.target_version, t.config
    );
    let _ = writeln!(
        s,
        "```python\nimport onnx\nimport onnxruntime as ort\nfrom onnxruntime.transformers.fusion_options import \
         FusionOptions\nfrom onnxruntime.transformers.optimizer import optimize_model\n\noptions = \
         FusionOptions(\"{mt}\")\n# {}\noptimizer = optimize_model(onnx.load(\"model.onnx\"), model_type=\"{mt}\", \
         opt_level={opt_level}, optimization_options=options)\noptimizer.save_model_to_file(\"optimized.onnx\")\n\
         onnx.checker.check_model(\"optimized.onnx\")\nso = ort.SessionOptions()\nso.graph_optimization_level = \
         ort.GraphOptimizationLevel.{}\nsess = ort.InferenceSession(\"optimized.onnx\", so, \
         providers=[\"CPUExecutionProvider\"])\n```\n",
        if lines.is_empty() {
            "(no FusionOptions switch turns the culprits off)".to_string()
        } else {
            format!("uncomment to turn the culprits off:\n# {}", lines.trim_end().replace('\n', "\n# "))
        },
        session_level(config.level)
    );
    if !no_switch.is_empty() {
        let _ = writeln!(s, "No FusionOptions switch turns off `{}`; repro.py skips it.\n", no_switch.join("`, `"));
    }
    s.push_str(&ort_environment(f));
    s
}
