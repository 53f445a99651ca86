//! A model's graph drawn for a reader: its nodes (op and name), the graph's inputs and outputs, and the values
//! between them labelled with their types, laid out as SVG by `layout-rs` (Graphviz's DOT, in Rust).

use crate::graph::{Graph, Model};
use layout::backends::svg::SVGWriter;
use layout::gv::{DotParser, GraphBuilder};
use std::fmt::Write as _;

/// The most nodes drawn: a minimized model has a handful; a larger one is listed, not drawn.
pub const MAX_NODES: usize = 60;

/// DOT for `g`: one node per op, one box per graph input and output, an edge per value read (initializers are
/// not drawn, their readers say `+ constants`).
pub fn dot(g: &Graph) -> String {
    let q = |s: &str| s.replace('\\', "\\\\").replace('"', "'");
    let ty = |v: &str| g.tensor_type(v).map(|t| t.to_string()).unwrap_or_default();
    let mut s = String::from("digraph G {\n");
    for (i, name) in g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)).enumerate() {
        let _ = writeln!(s, "  in{i} [shape=box label=\"{}\\n{}\"];", q(name), q(&ty(name)));
    }
    let ids: Vec<_> = g.node_ids().collect();
    for (k, &id) in ids.iter().enumerate() {
        let n = g.node(id);
        let consts = n.inputs.iter().filter(|i| g.initializers.contains_key(*i)).count();
        let extra = if consts > 0 {
            format!("\\n+ {consts} constant{}", if consts == 1 { "" } else { "s" })
        } else {
            String::new()
        };
        let _ = writeln!(s, "  n{k} [label=\"{}{extra}\"];", q(&n.op.to_string()));
    }
    let index = |id| ids.iter().position(|&x| x == id);
    let source = |v: &str| -> Option<String> {
        if let Some(p) = g.producer(v) {
            return index(p.node).map(|k| format!("n{k}"));
        }
        g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)).position(|i| i == v).map(|i| format!("in{i}"))
    };
    for (k, &id) in ids.iter().enumerate() {
        for v in g.node(id).inputs.iter().filter(|v| !v.is_empty()) {
            if let Some(src) = source(v) {
                let _ = writeln!(s, "  {src} -> n{k} [label=\"{}\"];", q(&ty(v)));
            }
        }
    }
    for (i, name) in g.outputs.iter().enumerate() {
        let _ = writeln!(s, "  out{i} [shape=box label=\"{}\\n{}\"];", q(name), q(&ty(name)));
        if let Some(src) = source(name) {
            let _ = writeln!(s, "  {src} -> out{i};");
        }
    }
    s.push_str("}\n");
    s
}

/// The model's main graph as SVG; `None` when it has more than [`MAX_NODES`] nodes or cannot be laid out.
pub fn svg(m: &Model) -> Option<String> {
    if m.graph.node_ids().count() > MAX_NODES {
        return None;
    }
    let text = dot(&m.graph);
    let parsed = DotParser::new(&text).process().ok()?;
    let mut builder = GraphBuilder::new();
    builder.visit_graph(&parsed);
    let mut visual = builder.get();
    let mut writer = SVGWriter::new();
    // the layout library panics on some shapes it cannot place: such a graph is listed, not drawn
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| visual.do_it(false, false, false, &mut writer))).ok()?;
    Some(writer.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, Node, OpId, TensorType};

    #[test]
    fn a_small_graph_is_drawn_with_its_ops_inputs_and_outputs() {
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[2, 3]));
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[2, 3]));
        let d = dot(&g);
        assert!(d.contains("in0 -> n0") && d.contains("n0 -> out0") && d.contains("Relu"), "{d}");
        let svg = svg(&Model::new(g)).expect("drawn");
        assert!(svg.contains("<svg") && svg.contains("Relu"));
    }
}
