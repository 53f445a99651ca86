//! A value quantized twice (QuantizeLinear, DequantizeLinear, QuantizeLinear, DequantizeLinear) that ONNX Runtime's
//! DoubleQDQPairsRemover collapses by design into one pair, its scale and zero point recomputed from both ranges:
//! a value on the edge of a step lands one step apart, and what reads it (a convolution, a matrix product) scales
//! that step. The model evaluated with the pass's own collapse decides: an optimized result that matches it is the
//! pass's documented rounding (class `precision`), not a wrong rewrite.

use super::classify::{Class, Classified};
use super::reduce::Case;
use super::Reproducer;
use crate::compiler::Outcome;
use crate::graph::{onnx, DType, Graph, Model, Node, NodeId, Tensor};

/// `c` (an `optimizer` inconsistency of `case`), `precision` when `optimized` agrees with onnx.reference on the
/// model whose double Q/DQ pairs are collapsed as DoubleQDQPairsRemover does ([`collapsed`]).
pub fn refine(r: &mut Reproducer, c: Classified, case: &Case, optimized: &Outcome) -> Classified {
    if c.class != Class::Optimizer || r.finding.relax.is_some() {
        return c;
    }
    let Some(model) = collapsed(&case.model) else { return c };
    let Some(s) = r.semantic.as_mut() else { return c };
    let Ok(expected) = s.run(&onnx::encode_model(&model), &case.feeds) else { return c };
    if r.oracle.inconsistency_with(&expected, optimized, &r.hints()).is_some() {
        return c;
    }
    Classified {
        class: Class::Precision,
        note: format!(
            "{}; but it matches the model with its double Q/DQ pairs collapsed into one, the scale and zero point \
             recomputed from both ranges, as DoubleQDQPairsRemover does by design: a value on the edge of a step \
             lands one step apart",
            c.note
        ),
    }
}

/// `model` with every Q1 -> DQ1 -> Q2 -> DQ2 chain of its main graph (scalar constant scales and 8-bit zero points
/// of one type, each link read once) made Q1 -> DQ2 with DoubleQDQPairsRemover's scale and zero point; `None`
/// when there is no such chain.
pub fn collapsed(model: &Model) -> Option<Model> {
    let g = &model.graph;
    let chains: Vec<[NodeId; 4]> = g.node_ids().filter_map(|id| chain(g, id)).collect();
    if chains.is_empty() {
        return None;
    }
    let mut inits = g.initializers.clone();
    let mut rewired: std::collections::HashMap<NodeId, Node> = Default::default();
    let mut dropped = std::collections::HashSet::new();
    for (k, [q1, dq1, q2, dq2]) in chains.into_iter().enumerate() {
        let (scale, zp) = recomputed(g, g.node(dq1), g.node(q2))?;
        let (s_name, z_name) = (format!("oatest_collapsed_scale_{k}"), format!("oatest_collapsed_zero_point_{k}"));
        inits.insert(s_name.clone(), scale);
        inits.insert(z_name.clone(), zp);
        let mut first = g.node(q1).clone();
        first.inputs.splice(1.., [s_name.clone(), z_name.clone()]);
        let mut last = g.node(dq2).clone();
        last.inputs = vec![first.outputs[0].clone(), s_name, z_name];
        rewired.insert(q1, first);
        rewired.insert(dq2, last);
        dropped.extend([dq1, q2]);
    }
    let order = g.topo_order().ok()?;
    let nodes = order.into_iter().filter(|id| !dropped.contains(id)).map(|id| {
        let n = rewired.get(&id).cloned();
        n.unwrap_or_else(|| g.node(id).clone())
    });
    let mut out = model.clone();
    out.graph = g.with_nodes(nodes.collect::<Vec<_>>()).ok()?;
    out.graph.initializers = inits;
    Some(out)
}

/// The chain `[Q1, DQ1, Q2, DQ2]` whose DQ1 is `dq1`, as DoubleQDQPairsRemover matches it: each of Q1, DQ1 and Q2
/// read by one node only and none a graph output, each pair with one scale and zero point.
fn chain(g: &Graph, dq1: NodeId) -> Option<[NodeId; 4]> {
    let is = |id: NodeId, op: &str| g.node(id).op.domain.is_empty() && g.node(id).op.name == op;
    let only_reader = |id: NodeId| -> Option<NodeId> {
        let out = g.node(id).outputs.first()?;
        let readers = g.consumers(out);
        (readers.len() == 1 && !g.outputs.contains(out)).then(|| readers[0].0)
    };
    if !is(dq1, "DequantizeLinear") {
        return None;
    }
    let q1 = g.producer(g.node(dq1).inputs.first()?)?.node;
    let q2 = only_reader(dq1)?;
    let dq2 = only_reader(q2)?;
    let ok = is(q1, "QuantizeLinear") && is(q2, "QuantizeLinear") && is(dq2, "DequantizeLinear");
    let paired = |q: NodeId, dq: NodeId| g.node(q).inputs.get(1..3) == g.node(dq).inputs.get(1..3);
    (ok && only_reader(q1) == Some(dq1) && paired(q1, dq1) && paired(q2, dq2)).then_some([q1, dq1, q2, dq2])
}

/// DoubleQDQPairsRemover's scale and zero point for the pairs of `dq1` and `q2`: the range both can hold, over the
/// zero point type's 255 steps, computed in float32 as it does.
fn recomputed(g: &Graph, dq1: &Node, q2: &Node) -> Option<(Tensor, Tensor)> {
    let scalar = |name: &String| -> Option<(DType, f64)> {
        let t = g.initializers.get(name)?;
        let v = t.to_f64s()?;
        (v.len() == 1).then(|| (t.dtype, v[0]))
    };
    let ((st1, s1), (zt1, z1)) = (scalar(dq1.inputs.get(1)?)?, scalar(dq1.inputs.get(2)?)?);
    let ((st2, s2), (zt2, z2)) = (scalar(q2.inputs.get(1)?)?, scalar(q2.inputs.get(2)?)?);
    let (qmin, qmax) = match zt1 {
        DType::U8 => (0f32, 255f32),
        DType::I8 => (-128f32, 127f32),
        _ => return None,
    };
    if zt1 != zt2 || st1 != DType::F32 || st2 != DType::F32 {
        return None;
    }
    let (s1, s2, z1, z2) = (s1 as f32, s2 as f32, z1 as f32, z2 as f32);
    let real_min = ((qmin - z1) * s1).max((qmin - z2) * s2);
    let real_max = ((qmax - z1) * s1).min((qmax - z2) * s2);
    let scale = (real_max - real_min) / (qmax - qmin);
    let zero_point = (qmin - real_min / scale).round().clamp(qmin, qmax);
    let scale = Tensor::from_f64s(DType::F32, &[], &[scale as f64]);
    Some((scale, Tensor::from_f64s(zt1, &[], &[zero_point as f64])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{OpId, TensorType};

    /// Q(1/127.5) -> DQ -> Q(1/127) -> DQ becomes one pair with the scale of the range both hold, read by what read
    /// the last DequantizeLinear; a chain whose middle value has a second reader stays.
    #[test]
    fn a_double_pair_collapses_into_one_with_the_common_range() {
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        for (s, v) in [("s1", 1.0 / 127.5), ("s2", 1.0 / 127.0)] {
            g.add_initializer(s, Tensor::from_f64s(DType::F32, &[], &[v]));
        }
        g.add_initializer("z", Tensor::from_f64s(DType::I8, &[], &[0.0]));
        let node = |op: &str, i: [&str; 3], o: &str| {
            Node::new(o, OpId::onnx(op), i.iter().map(|s| s.to_string()).collect(), vec![o.to_string()])
        };
        g.add_node(node("QuantizeLinear", ["x", "s1", "z"], "q1")).unwrap();
        g.add_node(node("DequantizeLinear", ["q1", "s1", "z"], "d1")).unwrap();
        g.add_node(node("QuantizeLinear", ["d1", "s2", "z"], "q2")).unwrap();
        g.add_node(node("DequantizeLinear", ["q2", "s2", "z"], "d2")).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["d2".into()], vec!["y".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[2]));
        let model = Model::new(g);
        let c = collapsed(&model).expect("a chain").graph;
        let ops: Vec<String> = c.nodes_in_order().unwrap().iter().map(|n| n.op.name.clone()).collect();
        assert_eq!(ops, ["QuantizeLinear", "DequantizeLinear", "Relu"]);
        let dq = c.node(c.producer("d2").unwrap().node);
        assert_eq!(dq.inputs[0], "q1");
        // the common range is [-128/127.5, 127/127.5]: 255 steps of 1/127.5
        let scale = c.initializers[&dq.inputs[1]].to_f64s().unwrap()[0];
        assert!((scale - 1.0 / 127.5).abs() < 1e-9, "{scale}");
        let mut read_twice = model.clone();
        let second = Node::new("n", OpId::onnx("Neg"), vec!["d1".into()], vec!["w".into()]);
        read_twice.graph.add_node(second).unwrap();
        assert!(collapsed(&read_twice).is_none());
    }
}
