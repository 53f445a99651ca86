//! Value domains a pass assumes of what its pattern reads, beyond types and shapes. AttentionFusion folds
//! `(1 - Cast(mask)) * c` into Attention's `mask_index`, which keeps what is non-zero: it assumes an attention mask
//! of 0s and 1s (a review called a fused attention over a mask of 2s and 3s no bug, as a maintainer would). A
//! finding whose faulty passes assume a domain that its inputs leave breaks the pass's contract: class `contract`;
//! so does a wrong value of a model that reads a value ONNX leaves unspecified (a pooling window wholly in padding).

use super::reduce::Case;
use crate::graph::{Attr, Graph, NamedTensor};

/// How `case` leaves a value domain one of `faulty` assumes, or (`values`: the symptom is a wrong value) reads a
/// value ONNX does not specify, if it does.
pub fn violation(case: &Case, faulty: &[String], values: bool) -> Option<String> {
    if values {
        if let Some(why) = unspecified(case) {
            return Some(why);
        }
    }
    if !faulty.iter().any(|p| p == "AttentionFusion") {
        return None;
    }
    let g = &case.model.graph;
    g.node_ids().map(|id| g.node(id)).filter(|n| n.op.name == "Sub" && n.op.domain.is_empty()).find_map(|n| {
        let one = constant(g, n.inputs.first()?)?;
        if one.len() != 1 || one[0] != 1.0 {
            return None;
        }
        let input = moved_input(g, n.inputs.get(1)?)?;
        let values = fed(&case.feeds, &input)?;
        let outside: Vec<f64> = values.into_iter().filter(|v| *v != 0.0 && *v != 1.0).take(3).collect();
        (!outside.is_empty()).then(|| {
            format!(
                "AttentionFusion assumes an attention mask of 0s and 1s (it keeps what is non-zero), but input \
                 '{input}', the mask of `1 - mask`, holds {outside:?}: the inputs leave the pass's contract"
            )
        })
    })
}

/// A pooling window wholly in the padding (ONNX specifies no value there: ONNX Runtime's MaxPool gives the lowest
/// float, onnx.reference 0; a review found a FusedConv overflowing on it), as the op catalog finds it.
fn unspecified(case: &Case) -> Option<String> {
    let e = crate::ops::infer_types(&case.model.graph, false).err()?.to_string();
    e.contains(crate::ops::conv::WHOLLY_PADDED)
        .then(|| format!("the model reads a value ONNX does not specify ({e}): the test breaks its own contract"))
}

/// Ops whose output ONNX leaves open where what they take a max or min of holds NaN.
const NAN_OPEN: &[&str] = &["MaxPool", "GlobalMaxPool", "MaxRoiPool", "ReduceMax", "ReduceMin", "Max", "Min"];

/// The outputs of `g` that a max or min over NaN computes ([`NAN_OPEN`], through ops that only move values):
/// where the model's values give NaN, ONNX does not say what they hold.
pub fn nan_open(g: &Graph) -> Vec<String> {
    let of_max = |value: &str| {
        let mut value = value.to_string();
        while let Some(p) = g.producer(&value) {
            let n = g.node(p.node);
            let op = n.op.name.as_str();
            if NAN_OPEN.contains(&op) || (n.op.domain == "com.microsoft" && op == "NhwcMaxPool") {
                return true;
            }
            // a Concat's other inputs are not the max's
            let moves = super::holds::MOVES.contains(&op) && n.op.domain.is_empty() && op != "Concat";
            match n.inputs.first() {
                Some(first) if moves && p.slot == 0 => value = first.clone(),
                _ => return false,
            }
        }
        false
    };
    g.outputs.iter().filter(|o| of_max(o)).cloned().collect()
}

/// The values of a constant (an initializer, a Constant node's tensor) as floats.
fn constant(g: &Graph, value: &str) -> Option<Vec<f64>> {
    if let Some(t) = g.initializers.get(value) {
        return t.to_f64s();
    }
    let n = g.node(g.producer(value)?.node);
    match (n.op.name.as_str(), n.attrs.get("value")) {
        ("Constant", Some(Attr::Tensor(t))) => t.to_f64s(),
        _ => None,
    }
}

/// The graph input `value` is, or is moved or cast from (Cast, Reshape, Unsqueeze, ...).
fn moved_input(g: &Graph, value: &str) -> Option<String> {
    if g.inputs.iter().any(|i| i == value) {
        return Some(value.to_string());
    }
    let n = g.node(g.producer(value)?.node);
    let moves = super::holds::MOVES.contains(&n.op.name.as_str()) || n.op.name == "Cast";
    if !moves || !n.op.domain.is_empty() {
        return None;
    }
    moved_input(g, n.inputs.first()?)
}

fn fed(feeds: &[NamedTensor], name: &str) -> Option<Vec<f64>> {
    feeds.iter().find(|t| t.name == name)?.tensor.to_f64s()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, Model, Node, OpId, Tensor, TensorType};

    fn case(mask: &[i64]) -> Case {
        let mut g = Graph::new("g");
        g.add_input("mask", TensorType::new(DType::I64, &[mask.len()]));
        g.add_initializer("one", Tensor::from_f32(&[], &[1.0]));
        let cast =
            Node::new("c", OpId::onnx("Cast"), vec!["mask".into()], vec!["m".into()]).with_attr("to", Attr::Int(1));
        g.add_node(cast).unwrap();
        g.add_node(Node::new("s", OpId::onnx("Sub"), vec!["one".into(), "m".into()], vec!["y".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[mask.len()]));
        let feeds = vec![NamedTensor { name: "mask".into(), tensor: Tensor::from_i64(&[mask.len()], mask) }];
        Case { model: Model::new(g), feeds }
    }

    #[test]
    fn a_max_over_nan_is_left_open() {
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[1, 1, 4]));
        let pool = Node::new("p", OpId::onnx("MaxPool"), vec!["x".into()], vec!["m".into()])
            .with_attr("kernel_shape", Attr::Ints(vec![2]));
        g.add_node(pool).unwrap();
        g.add_node(Node::new("t", OpId::onnx("Transpose"), vec!["m".into()], vec!["y".into()])).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["m".into()], vec!["z".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[3, 1, 1]));
        g.add_output("z", TensorType::new(DType::F32, &[1, 1, 3]));
        g.add_output("x", TensorType::new(DType::F32, &[1, 1, 4]));
        assert_eq!(nan_open(&g), ["y"]);
    }

    #[test]
    fn a_mask_beyond_zero_and_one_breaks_attention_fusions_contract() {
        let faulty = ["AttentionFusion".to_string()];
        assert!(violation(&case(&[1, 2, 3]), &faulty, true).is_some_and(|w| w.contains("[2.0, 3.0]")));
        assert_eq!(violation(&case(&[0, 1, 1]), &faulty, true), None);
        assert_eq!(violation(&case(&[1, 2, 3]), &["SkipLayerNormFusion".to_string()], true), None);
    }
}
