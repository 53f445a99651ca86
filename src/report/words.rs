//! What reports say, shared by the trackers' templates (`tracker`, `templates`, `templates_ortx`) and the
//! upstream labels: the platform, the bug in words, expected and actual results, and the model as a node list.

use super::levels::Levels;
use crate::compiler::{Outcome, Status};
use crate::graph::{Attr, Model};
use crate::oracle::{Hints, Symptom, Tolerance};
use crate::triage::classify::Class;
use crate::triage::{Finding, Minimized, Triaged};
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

/// The faulty culprits (not the enablers), joined, or `unknown`; an error that came out of a Relax pass run
/// inside the culprit names that pass first: `FuseOpsByPattern (in FuseTransposeMatmul)`.
pub(super) fn faulty(t: &Triaged) -> String {
    faulty_or(t, "unknown")
}

pub(super) fn faulty_or(t: &Triaged, none: &str) -> String {
    let f = t.faulty();
    if f.is_empty() {
        return none.into();
    }
    let joined = f.join(" + ");
    match crate::compiler::tvm::raised_within(&t.detail) {
        Some(inner) => format!("{inner} (in {joined})"),
        None => joined,
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
    match &f.relax {
        Some(crate::triage::RelaxTest::Recipe(r)) if m.pattern_needed => serde_json::to_value(r).ok(),
        _ => None,
    }
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
                     is {} and the unoptimized result is right",
                    d.max,
                    if ort_schemas(&m.case.model).is_empty() {
                        "valid"
                    } else {
                        "valid (but for ONNX Runtime's own schemas, below)"
                    }
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

/// The model as a node list: inputs, constants, one line per node, outputs; the bodies of If, Loop and Scan
/// nodes indented under them.
pub fn node_list(m: &Model) -> String {
    let mut s = String::new();
    graph_lines(&m.graph, "", &mut s);
    s
}

fn graph_lines(g: &crate::graph::Graph, pad: &str, s: &mut String) {
    let ty = |v: &str| g.types.get(v).map(|t| t.to_string()).unwrap_or_else(|| "?".into());
    for i in g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)) {
        let _ = writeln!(s, "{pad}input  {i}: {}", ty(i));
    }
    for (name, t) in &g.initializers {
        let vals = match (t.to_f64s(), t.to_i64s()) {
            (Some(v), _) if v.len() <= 8 && t.dtype.is_float() => format!(" = {v:?}"),
            (_, Some(v)) if v.len() <= 8 => format!(" = {v:?}"),
            _ => String::new(),
        };
        let _ = writeln!(s, "{pad}const  {name}: {}{vals}", t.ty());
    }
    for n in g.nodes_in_order().unwrap_or_default() {
        let attrs: Vec<String> = n.attrs.iter().map(|(k, a)| format!("{k}={}", attr(a))).collect();
        let attrs = if attrs.is_empty() { String::new() } else { format!(" {{{}}}", attrs.join(", ")) };
        let _ = writeln!(s, "{pad}{} = {}({}){attrs}", n.outputs.join(", "), n.op, n.inputs.join(", "));
        for (key, body) in n.subgraphs() {
            let _ = writeln!(s, "{pad}  {key}:");
            graph_lines(body, &format!("{pad}    "), s);
        }
    }
    for o in &g.outputs {
        let _ = writeln!(s, "{pad}output {o}: {}", ty(o));
    }
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
        Attr::Graph(g) => format!("graph '{}' ({} nodes)", g.name, g.node_count()),
        Attr::Opaque(_) => "<graphs or other>".into(),
    }
}

/// The ai.onnx nodes of `model` (bodies included) that only ONNX Runtime's own schemas define at the model's opset:
/// LayerNormalization before opset 17 (ONNX Runtime registers a LayerNormalization-1 in the ONNX domain for models
/// exported before ONNX had one) and SimplifiedLayerNormalization (ONNX Runtime's, in the ONNX domain).
/// onnx.checker refuses such a model; ONNX Runtime runs it.
pub(super) fn ort_schemas(model: &Model) -> Vec<&'static str> {
    fn walk(g: &crate::graph::Graph, opset: i64, out: &mut Vec<&'static str>) {
        for id in g.node_ids() {
            let n = g.node(id);
            if n.op.domain.is_empty() || n.op.domain == "ai.onnx" {
                let own = match n.op.name.as_str() {
                    "LayerNormalization" if opset < 17 => Some("LayerNormalization"),
                    "SimplifiedLayerNormalization" => Some("SimplifiedLayerNormalization"),
                    _ => None,
                };
                out.extend(own.filter(|o| !out.contains(o)));
            }
            for (_, body) in n.subgraphs() {
                walk(body, opset, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&model.graph, model.opset(), &mut out);
    out
}

/// A paragraph on [`ort_schemas`], naming the passes written for such models among `culprits`.
pub(super) fn ort_schemas_words(model: &Model, culprits: &[String]) -> Option<String> {
    let ops = ort_schemas(model);
    if ops.is_empty() {
        return None;
    }
    let only_there = if culprits.iter().any(|c| c == "AttentionFusion") {
        " `AttentionFusion` fires only on such models: its BERT path matches LayerNormalization version 1 alone \
         (and MatMul before opset 13), so no model onnx.checker accepts can show this bug."
    } else {
        ""
    };
    Some(format!(
        "The model's `{}` at ai.onnx opset {} is ONNX Runtime's own schema (it registers LayerNormalization-1 and \
         SimplifiedLayerNormalization in the ONNX domain for models exported before ONNX defined them): ONNX Runtime \
         runs the model, onnx.checker refuses it.{only_there}",
        ops.join("`, `"),
        model.opset()
    ))
}

#[cfg(test)]
mod tests {
    use crate::graph::{Attr, DType, Graph, Model, Node, OpId, TensorType};

    fn unary(op: &str, x: &str, y: &str) -> Node {
        Node::new(format!("{y}_{op}"), OpId::onnx(op), vec![x.into()], vec![y.into()])
    }

    #[test]
    fn reports_list_the_bodies_under_their_node() {
        let ty = TensorType::new(DType::F32, &[2, 3]);
        let mut then = Graph::new("then");
        then.add_node(unary("Relu", "a", "r")).unwrap();
        then.add_node(unary("Sigmoid", "r", "s")).unwrap();
        then.add_output("s", ty.clone());
        let mut els = Graph::new("else");
        els.add_node(unary("Tanh", "x", "t")).unwrap();
        els.add_output("t", ty.clone());
        let mut g = Graph::new("g");
        g.add_input("x", ty.clone());
        g.add_input("cond", TensorType::new(DType::Bool, &[]));
        g.add_node(unary("Abs", "x", "a")).unwrap();
        let node = Node::new("if", OpId::onnx("If"), vec!["cond".into()], vec!["o".into()])
            .with_attr("then_branch", Attr::Graph(Box::new(then)))
            .with_attr("else_branch", Attr::Graph(Box::new(els)));
        g.add_node(node).unwrap();
        g.add_output("o", ty);
        let list = super::node_list(&Model::new(g));
        assert!(list.contains("o = If(cond)"), "{list}");
        assert!(list.contains("\n  then_branch:\n    r = Relu(a)\n    s = Sigmoid(r)\n"), "{list}");
        assert!(list.contains("\n    output t: float32[2,3]"), "{list}");
    }

    #[test]
    fn a_layer_normalization_before_opset_17_is_named_as_ort_s_own_schema_even_in_a_body() {
        let ty = TensorType::new(DType::F32, &[2, 3]);
        let mut body = Graph::new("then");
        body.add_node(unary("LayerNormalization", "x", "n")).unwrap();
        body.add_output("n", ty.clone());
        let mut g = Graph::new("g");
        g.add_input("x", ty.clone());
        g.add_input("cond", TensorType::new(DType::Bool, &[]));
        let node = Node::new("if", OpId::onnx("If"), vec!["cond".into()], vec!["o".into()])
            .with_attr("then_branch", Attr::Graph(Box::new(body.clone())))
            .with_attr("else_branch", Attr::Graph(Box::new(body)));
        g.add_node(node).unwrap();
        g.add_output("o", ty);
        let mut m = Model::new(g);
        m.opsets.insert(String::new(), 9);
        let words = super::ort_schemas_words(&m, &["AttentionFusion".to_string()]).expect("named");
        assert!(words.contains("`LayerNormalization` at ai.onnx opset 9"), "{words}");
        assert!(words.contains("onnx.checker refuses it"), "{words}");
        assert!(words.contains("`AttentionFusion` fires only on such models"), "{words}");
        m.opsets.insert(String::new(), 17);
        assert_eq!(super::ort_schemas_words(&m, &[]), None);
    }
}
