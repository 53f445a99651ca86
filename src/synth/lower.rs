//! Opset-20 patterns at older opsets. A pattern that fires only at its own older opset X (UnsqueezeElimination's
//! attribute-form Unsqueeze, AttentionFusion at 9) is written into tests at X, which used to meet no other pass's
//! pattern. An opset-20 pattern each of whose nodes is the same node at X (`ops::since::same_at`: the op's schema
//! at X has opset 20's form and allows the node's dtypes, Add on float32 at 9) is also a pattern of X: a copy
//! written at X, with every value's type declared, can be spliced into a passing test written at X, so that the
//! passes of older opsets meet the others in one graph.

use crate::pattern::Pattern;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Copies of `p` (written at the seeds' opset) at each of `opsets` it is the same pattern at: none for a pattern
/// with control flow (its bodies are not checked) or one the catalog cannot type.
pub fn lowered(p: &Pattern, opsets: &BTreeSet<i64>) -> Vec<(i64, Arc<Pattern>)> {
    let g = &p.model.graph;
    // a pattern written above the seeds' opset may hold newer forms (a blocked DequantizeLinear at 21)
    if p.model.opset() > crate::graph::DEFAULT_OPSET || g.node_ids().any(|id| g.node(id).subgraphs().next().is_some()) {
        return Vec::new();
    }
    let Ok(types) = crate::ops::infer_types(g, false) else { return Vec::new() };
    let dtype = |v: &str| types.get(v).map(|t| t.dtype).or_else(|| g.tensor_type(v).map(|t| t.dtype));
    opsets
        .iter()
        .filter(|&&x| x < p.model.opset())
        .filter(|&&x| g.node_ids().all(|id| crate::ops::since::same_at(g.node(id), dtype, x)))
        .map(|&x| {
            let mut q = p.clone();
            q.model.opsets.remove("ai.onnx");
            q.model.opsets.insert(String::new(), x);
            // declared in name order: a test's bytes must not depend on a hash map's
            let mut inner: Vec<(&String, &crate::graph::TensorType)> = types.iter().collect();
            inner.sort_by(|a, b| a.0.cmp(b.0));
            for (name, t) in inner {
                if !q.model.graph.types.contains_key(name) && q.model.graph.is_defined(name) {
                    q.model.graph.types.insert(name.clone(), t.clone().into());
                }
            }
            (x, Arc::new(q))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::graph::{DType, Graph, Model, Node, OpId, TensorType};
    use crate::pattern::{abstract_type, Granularity, Pattern, PatternMeta, Port};

    fn pattern(op: &str, dtype: DType) -> Pattern {
        let mut g = Graph::new("p");
        g.add_input("a", TensorType::new(dtype, &[2, 3]));
        g.add_input("b", TensorType::new(dtype, &[2, 3]));
        g.add_node(Node::new("n", OpId::onnx(op), vec!["a".into(), "b".into()], vec!["s".into()])).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["s".into()], vec!["y".into()])).unwrap();
        g.add_output("y", TensorType::new(dtype, &[2, 3]));
        let mut m = Model::new(g);
        m.opsets.insert(String::new(), 20);
        let ty = TensorType::new(dtype, &[2, 3]);
        let port = |n: &str| Port { name: n.into(), ty: ty.clone(), abstract_ty: abstract_type(&ty, &[op]) };
        let meta = PatternMeta {
            format: 1,
            compiler: "ort".into(),
            compiler_version: "t".into(),
            pass: "SomeFusion".into(),
            granularity: Granularity::Block,
            inputs: vec![port("a"), port("b")],
            outputs: vec![port("y")],
            provenance: Vec::new(),
            key: String::new(),
        };
        Pattern { model: m, meta }
    }

    #[test]
    fn a_pattern_is_lowered_to_the_opsets_whose_schemas_take_its_nodes() {
        let opsets = [9, 12, 17].into_iter().collect();
        let f32s = super::lowered(&pattern("Add", DType::F32), &opsets);
        assert_eq!(f32s.iter().map(|(x, _)| *x).collect::<Vec<_>>(), [9, 12, 17]);
        let (x, q) = &f32s[0];
        assert_eq!((q.model.opset(), *x), (9, 9));
        assert!(q.model.graph.types.contains_key("s"), "inner values declared: {:?}", q.model.graph.types.keys());
        // Relu on int8 came with Relu-14, Add on int8 with Add-14
        let i8s = super::lowered(&pattern("Add", DType::I8), &opsets);
        assert_eq!(i8s.iter().map(|(x, _)| *x).collect::<Vec<_>>(), [17]);
        // a pattern written at opset 21 (a campaign of DQMatMulNBitsFusion's blocked DequantizeLinear wrote it at
        // 20, where ORT refuses `block_size`) is never lowered
        let mut newer = pattern("Add", DType::F32);
        newer.model.opsets.insert(String::new(), 21);
        assert!(super::lowered(&newer, &[9, 12, 17, 20].into_iter().collect()).is_empty());
    }
}
