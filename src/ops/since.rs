//! Since which opset each ai.onnx op has its opset-20 signature (data/onnx-op-since.tsv, written by
//! scripts/onnx-op-since.py from onnx's schemas): a graph written at a lower opset must avoid the newer ones.

const TABLE: &str = include_str!("../../data/onnx-op-since.tsv");

/// The ai.onnx ops whose opset-20 signature (inputs, outputs, attributes, types) is newer than `opset`: at
/// `opset` they do not exist or mean something else. Ops the table does not list (contrib ops) are never newer.
pub fn newer_than(opset: i64) -> Vec<&'static str> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, v)| v.trim().parse::<i64>().is_ok_and(|v| v > opset))
        .map(|(op, _)| op)
        .collect()
}

/// The graph as the catalog can type it when written at ai.onnx `opset`: its ai.onnx nodes whose opset-20
/// signature is newer than `opset` and whose outputs are all declared (a pattern kept at its own opset declares
/// every inner value: UnsqueezeElimination's attribute-form Unsqueeze, ReduceMean's axes attribute before 18) move
/// to a domain the catalog does not know, so that a non-strict inference takes their declared types. Nodes of
/// such ops without declarations (bridges, which take the forms `opset` has) stay typed by the catalog.
pub fn typed_at(g: &crate::graph::Graph, opset: i64) -> std::borrow::Cow<'_, crate::graph::Graph> {
    let newer = if (1..crate::graph::DEFAULT_OPSET).contains(&opset) { newer_than(opset) } else { Vec::new() };
    let opaque = |n: &crate::graph::Node| {
        n.op.domain.is_empty()
            && newer.contains(&n.op.name.as_str())
            && n.outputs.iter().all(|o| o.is_empty() || g.types.contains_key(o))
    };
    opaque_where(g, opaque).unwrap_or(std::borrow::Cow::Borrowed(g))
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
}
