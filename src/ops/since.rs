//! Since which opset each ai.onnx op has its opset-20 signature (data/onnx-op-since.tsv, written by
//! scripts/onnx-op-since.py from onnx's schemas): a graph written at a lower opset must avoid the newer ones,
//! unless the op's schema there has the same form and allows the node's dtypes (data/onnx-op-forms.tsv, written
//! by scripts/onnx-op-forms.py): then the opset-20 node is also a node of that opset ([`same_at`]).

use crate::graph::{DType, Graph, Node};
use std::collections::HashMap;
use std::sync::OnceLock;

const TABLE: &str = include_str!("../../data/onnx-op-since.tsv");
const FORMS: &str = include_str!("../../data/onnx-op-forms.tsv");

/// One older schema with opset 20's form: from which opset, and the dtypes (ONNX codes) of each input and output.
struct Form {
    since: i64,
    inputs: Vec<Vec<i32>>,
    outputs: Vec<Vec<i32>>,
}

fn since_table() -> &'static HashMap<&'static str, i64> {
    static T: OnceLock<HashMap<&'static str, i64>> = OnceLock::new();
    T.get_or_init(|| {
        TABLE
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split_once('\t'))
            .filter_map(|(op, v)| Some((op, v.trim().parse().ok()?)))
            .collect()
    })
}

fn forms() -> &'static HashMap<&'static str, Vec<Form>> {
    static F: OnceLock<HashMap<&'static str, Vec<Form>>> = OnceLock::new();
    F.get_or_init(|| {
        let codes = |list: &str| -> Vec<Vec<i32>> {
            list.split('|').map(|t| t.split(',').filter_map(|c| c.trim().parse().ok()).collect()).collect()
        };
        let mut m: HashMap<&'static str, Vec<Form>> = HashMap::new();
        for l in FORMS.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let f: Vec<&str> = l.split('\t').collect();
            let (Some(op), Some(Ok(since)), Some(ins), Some(outs)) =
                (f.first(), f.get(1).map(|v| v.parse()), f.get(2), f.get(3))
            else {
                panic!("data/onnx-op-forms.tsv: malformed line {l:?}");
            };
            m.entry(op).or_default().push(Form { since, inputs: codes(ins), outputs: codes(outs) });
        }
        m
    })
}

/// Whether node `n`, written for opset 20 (its values' dtypes given by `dtype`), is the same node at ai.onnx
/// `opset`: its op is not newer there, or the schema `opset` has for it has opset 20's form (inputs, outputs,
/// attributes) and allows every dtype the node reads and writes (the last entry of a list covers a variadic
/// tail). Other domains are not versioned with ai.onnx.
pub fn same_at(n: &Node, dtype: impl Fn(&str) -> Option<DType>, opset: i64) -> bool {
    if !(n.op.domain.is_empty() || n.op.domain == "ai.onnx") || opset >= crate::graph::DEFAULT_OPSET {
        return true;
    }
    let name = n.op.name.as_str();
    if since_table().get(name).is_some_and(|&s| s <= opset) {
        return true;
    }
    let Some(form) = forms().get(name).and_then(|rows| rows.iter().rev().find(|f| f.since <= opset)) else {
        return false;
    };
    let allows = |values: &[String], lists: &[Vec<i32>]| {
        values.iter().enumerate().filter(|(_, v)| !v.is_empty()).all(|(i, v)| {
            let list = lists.get(i).or(lists.last());
            dtype(v).zip(list).is_some_and(|(d, l)| l.contains(&d.onnx()))
        })
    };
    allows(&n.inputs, &form.inputs) && allows(&n.outputs, &form.outputs)
}

/// The ai.onnx ops whose opset-20 signature (inputs, outputs, attributes, types) is newer than `opset`: at
/// `opset` they do not exist or mean something else. Ops the table does not list (contrib ops) are never newer.
pub fn newer_than(opset: i64) -> Vec<&'static str> {
    let mut newer: Vec<&'static str> = since_table().iter().filter(|(_, &v)| v > opset).map(|(&op, _)| op).collect();
    newer.sort_unstable();
    newer
}

/// The graph as the catalog can type it when written at ai.onnx `opset`: its ai.onnx nodes that are not
/// [`same_at`] `opset` (by their declared dtypes) and whose outputs are all declared (a pattern kept at its own
/// opset declares every inner value: UnsqueezeElimination's attribute-form Unsqueeze, ReduceMean's axes attribute
/// before 18) move to a domain the catalog does not know, so that a non-strict inference takes their declared
/// types. Nodes of such ops without declarations (bridges, which take the forms `opset` has) stay typed by the
/// catalog.
pub fn typed_at(g: &Graph, opset: i64) -> std::borrow::Cow<'_, Graph> {
    if !(1..crate::graph::DEFAULT_OPSET).contains(&opset) {
        return std::borrow::Cow::Borrowed(g);
    }
    opaque_where(g, |n| older_by_declarations(g, n, opset)).unwrap_or(std::borrow::Cow::Borrowed(g))
}

/// Whether `typed_at` takes node `n`'s types from its declarations: not the same node at `opset` as at opset 20
/// (an older form the catalog cannot type, or dtypes its signature does not hold for there), and every output
/// declared.
pub fn older_by_declarations(g: &Graph, n: &Node, opset: i64) -> bool {
    !same_at(n, |v| g.tensor_type(v).map(|t| t.dtype), opset)
        && n.outputs.iter().all(|o| o.is_empty() || g.types.contains_key(o))
}

/// The graph with the nodes `opaque` picks moved to a domain the catalog does not know, so that a non-strict
/// check takes their outputs' declared types (a copy only when there are such nodes).
pub fn opaque_where(
    g: &crate::graph::Graph,
    opaque: impl Fn(&crate::graph::Node) -> bool,
) -> Result<std::borrow::Cow<'_, crate::graph::Graph>, crate::graph::GraphError> {
    if !g.node_ids().any(|id| opaque(g.node(id))) {
        return Ok(std::borrow::Cow::Borrowed(g));
    }
    let nodes = g.nodes_in_order()?.into_iter().map(|n| {
        let mut n = n.clone();
        if opaque(&n) {
            n.op = crate::graph::OpId { domain: "oatest.opaque".into(), ..n.op };
        }
        n
    });
    Ok(std::borrow::Cow::Owned(g.with_nodes(nodes)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ops_onnx_changed_late_are_newer_than_old_opsets() {
        let at19 = super::newer_than(19);
        assert!(at19.contains(&"Gelu") && at19.contains(&"ReduceMax") && !at19.contains(&"ReduceMean"), "{at19:?}");
        let at16 = super::newer_than(16);
        for op in ["LayerNormalization", "ReduceMean", "Split", "Pad", "Cast", "Gelu"] {
            assert!(at16.contains(&op), "{op} changed after opset 16");
        }
        assert!(!at16.contains(&"Add") && !at16.contains(&"MatMul") && !at16.contains(&"Reshape"));
        assert!(super::newer_than(20).is_empty());
    }

    #[test]
    fn an_older_form_with_declared_outputs_is_typed_by_its_declarations() {
        use crate::graph::{Attr, DType, Graph, Node, OpId, TensorType};
        // Unsqueeze with its axes as an attribute (opset 11), declared output: the catalog cannot type it
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[3]));
        let mut u = Node::new("u", OpId::onnx("Unsqueeze"), vec!["x".into()], vec!["y".into()]);
        u.attrs.insert("axes".into(), Attr::Ints(vec![0]));
        g.add_node(u).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["y".into()], vec!["z".into()])).unwrap();
        g.add_output("z", TensorType::new(DType::F32, &[1, 3]));
        assert!(crate::ops::infer_types(&g, false).is_err(), "the catalog follows opset 20");
        assert!(crate::ops::infer_types(&super::typed_at(&g, 11), false).is_err(), "undeclared: stays the catalog's");
        g.types.insert("y".into(), TensorType::new(DType::F32, &[1, 3]).into());
        let types = crate::ops::infer_types(&super::typed_at(&g, 11), false).unwrap();
        assert_eq!(types["z"], TensorType::new(DType::F32, &[1, 3]));
        assert!(matches!(super::typed_at(&g, 20), std::borrow::Cow::Borrowed(_)), "at 20 nothing is older");
    }

    #[test]
    fn an_opset_20_node_is_the_same_at_an_older_opset_when_form_and_dtypes_are() {
        use crate::graph::{DType, Node, OpId};
        let node = |op: &str, ins: &[&str]| {
            Node::new("n", OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec!["y".into()])
        };
        let f32s = |_: &str| Some(DType::F32);
        let i8s = |_: &str| Some(DType::I8);
        let add = node("Add", &["a", "b"]);
        assert!(super::same_at(&add, f32s, 9), "Add on float32 is Add-7's");
        assert!(!super::same_at(&add, i8s, 9) && !super::same_at(&add, i8s, 13), "int8 came with Add-14");
        assert!(super::same_at(&add, i8s, 14));
        assert!(!super::same_at(&add, |_: &str| None, 9), "unknown dtypes are not assumed");
        assert!(!super::same_at(&node("Unsqueeze", &["x", "axes"]), f32s, 12), "axes became an input at 13");
        assert!(!super::same_at(&node("Softmax", &["x"]), f32s, 12), "same form, other meaning before 13");
        assert!(!super::same_at(&node("Sum", &["a", "b"]), f32s, 7), "no broadcasting before 8");
        assert!(super::same_at(&node("Sum", &["a", "b", "c"]), f32s, 8), "a variadic tail");
        let mut fg = node("FastGelu", &["x"]);
        fg.op = OpId { domain: "com.microsoft".into(), ..fg.op };
        assert!(super::same_at(&fg, |_: &str| None, 7), "contrib ops are not versioned with ai.onnx");
    }
}
