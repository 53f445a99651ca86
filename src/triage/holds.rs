//! What a model holds that decides how its results are judged: quantized ops (whose fast x64 kernels may
//! overflow, and which float64 evaluation does not model), and float16/bfloat16 values (whose roundings a
//! compiler may skip). Bodies of control-flow nodes count, however deep.

use crate::graph::DType;

/// ONNX Runtime's session configuration entry that makes its x64 quantized kernels avoid the U8S8 overflow.
pub const PRECISE_X64_QUANT: (&str, &str) = ("session.x64quantprecision", "1");

/// Whether a model has quantized ops (whose fast x64 kernels may overflow): Q/DQ, QLinear*, integer matmuls and
/// convolutions, QGemm, dynamic quantization.
pub fn has_quantized_ops(model: &crate::graph::Model) -> bool {
    has_quantized_nodes(&model.graph)
}

/// Whether `g` or a control-flow body in it, however deep, holds a quantized op (a review found a quantized
/// Loop body's documented x64 overflow filed as a bug: only the top level was looked at).
fn has_quantized_nodes(g: &crate::graph::Graph) -> bool {
    g.node_ids().map(|id| g.node(id)).any(is_quantized)
}

/// A quantized op, or a control-flow node whose bodies hold one.
pub(super) fn is_quantized(n: &crate::graph::Node) -> bool {
    let op = n.op.name.as_str();
    op.contains("Quantize")
        || op.starts_with("QLinear")
        || op.contains("Integer")
        || op == "QGemm"
        || n.subgraphs().any(|(_, b)| has_quantized_nodes(b))
}

/// The graph outputs of `model` that no quantized op computes, directly or through what it feeds (a quantized
/// branch beside a float one leaves the float outputs comparable with a float64 evaluation).
pub fn outputs_without_quantized_ops(model: &crate::graph::Model) -> std::collections::HashSet<String> {
    let g = &model.graph;
    let top = Scope { graph: g, outer: None };
    g.outputs.iter().filter(|o| !cone_quantized(&top, o)).cloned().collect()
}

/// A graph and the scopes around it (a control-flow body reads its enclosing graphs' values by name).
struct Scope<'a> {
    graph: &'a crate::graph::Graph,
    outer: Option<&'a Scope<'a>>,
}

/// Whether a quantized op of `scope`'s graph computes `value`, directly or through what it feeds (within that
/// graph, bodies included), other than one whose levels a float64 evaluation computes alike.
fn cone_quantized(scope: &Scope, value: &str) -> bool {
    let g = scope.graph;
    let (mut todo, mut seen) = (vec![value.to_string()], std::collections::HashSet::new());
    while let Some(v) = todo.pop() {
        let Some(at) = g.producer(&v) else { continue };
        if !seen.insert(at.node) {
            continue;
        }
        let n = g.node(at.node);
        // a QuantizeLinear (or a dynamic one) of given values (a graph input, an initializer) rounds them as
        // float32 would: the float64 evaluation moves no rounding boundary there (a ConvMulFusion output
        // computed from a quantized graph input was left out, and its float16 rounding filed as a bug)
        let of_given = matches!(n.op.name.as_str(), "QuantizeLinear" | "DynamicQuantizeLinear" | "DequantizeLinear")
            && n.inputs.first().is_some_and(|x| given(scope, x, 0));
        // a quantized op of given levels and parameters computes the same levels in float64 (a layer
        // normalization of the dequantized QLinearConv output of a graph input: the fused kernel exact)
        let of_given = of_given || given(scope, &v, 0);
        if computes_quantized(scope, n, at.slot) && !of_given {
            return true;
        }
        todo.extend(n.reads().iter().cloned());
    }
    false
}

/// Whether output `slot` of node `n` (of `scope`'s graph) is computed by a quantized op: `n` is one, or a
/// control-flow node whose body output behind that slot is (a Scan's float output beside a quantized one in its
/// body stays comparable; a body's quantization of an outer graph input is one of given values).
fn computes_quantized(scope: &Scope, n: &crate::graph::Node, slot: usize) -> bool {
    let Some(body_output) = n.body_output(slot) else { return is_quantized(n) };
    n.subgraphs().any(|(_, b)| {
        let inner = Scope { graph: b, outer: Some(scope) };
        match b.outputs.get(body_output) {
            Some(o) => cone_quantized(&inner, o),
            None => has_quantized_nodes(b),
        }
    })
}

/// Ops that move, select or repeat values without computing new ones: what they make of given values is given.
/// A Pad copies its input and fills given values (oatest's own shape bridges are a Pad and a Reshape).
pub(super) const MOVES: &[&str] = &[
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Transpose",
    "Expand",
    "Tile",
    "Slice",
    "Concat",
    "Pad",
    "DepthToSpace",
    "SpaceToDepth",
    "Split",
    "Gather",
];

/// Whether `value` is given (a graph input, an initializer) or moved from given values only ([`MOVES`]), or
/// quantized or dequantized from them: a quantization of it rounds the same elements in float64 (a reshaped graph
/// input, dynamically quantized; a quantized graph input requantized to another scale).
fn given(scope: &Scope, value: &str, depth: usize) -> bool {
    let g = scope.graph;
    // a body's own inputs are not: a loop-carried value is what the previous iteration computed
    if (scope.outer.is_none() && g.inputs.iter().any(|i| i == value)) || g.initializers.contains_key(value) {
        return true;
    }
    // a value a body reads from an enclosing graph is given if it is given there (a Scan body's layer
    // normalization of a quantized outer value was judged computed: its float64 judgement refused)
    let Some(at) = g.producer(value) else { return scope.outer.is_some_and(|o| given(o, value, depth + 1)) };
    let n = g.node(at.node);
    let moved = MOVES.contains(&n.op.name.as_str()) && n.op.domain.is_empty();
    // what some ops make of given values is the same in a float64 evaluation: a quantized op's levels (a QLinearConv
    // of a quantized graph input), a selection (a MaxPool of its levels, a Relu of a graph input), a sign, a Cast
    // but to a 16-bit float
    let selects = ["MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Max", "Min", "Relu", "Clip", "Abs", "Neg"];
    let exact = n.subgraphs().next().is_none()
        && (is_quantized(n)
            || selects.contains(&n.op.name.as_str())
            || (n.op.name == "Cast" && n.attr_int("to").is_some_and(|c| !is_half(DType::from_onnx(c as i32)))));
    depth < 16
        && (moved || exact || matches!(n.op.name.as_str(), "DequantizeLinear" | "QuantizeLinear"))
        && n.inputs.iter().filter(|i| !i.is_empty()).all(|i| given(scope, i, depth + 1))
}

/// Float ops whose float result jumps where their input crosses a boundary (Sign at 0, Floor at an integer).
pub(super) const FLOAT_STEPS: &[&str] = &["Sign", "Floor", "Ceil", "Round"];

/// Other ops whose result is discrete though they read floats: one ULP in the input may move it by a whole unit.
const DISCRETE: &[&str] = &[
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "Equal",
    "ArgMax",
    "ArgMin",
    "TopK",
    "NonZero",
    "IsInf",
    "IsNaN",
];

/// Whether `n` makes discrete values of what it reads: a quantized op, a Cast to an integer or bool, a comparison,
/// a step ([`FLOAT_STEPS`], [`DISCRETE`]).
fn is_boundary(n: &crate::graph::Node) -> bool {
    let op = n.op.name.as_str();
    let to_discrete =
        matches!(op, "Cast" | "CastLike") && n.attr_int("to").is_none_or(|c| !DType::from_onnx(c as i32).is_float());
    is_quantized(n) || to_discrete || FLOAT_STEPS.contains(&op) || DISCRETE.contains(&op)
}

/// The values of `model`'s main graph a rounding boundary reads (a quantized op, an integer Cast, a comparison),
/// directly or through what they feed: moving one (a perturbed input, a scale) moves the result by whole units, so
/// rounding there is no measure of a float computation.
pub fn before_boundaries(model: &crate::graph::Model) -> std::collections::HashSet<String> {
    before_boundaries_in(&model.graph)
}

/// [`before_boundaries`] of one graph (a control-flow body: what its own boundaries read).
pub fn before_boundaries_in(g: &crate::graph::Graph) -> std::collections::HashSet<String> {
    behind(g, g.node_ids().map(|id| g.node(id)).filter(|n| is_boundary(n)).flat_map(|n| n.reads()).collect())
}

/// `values` of `g` and every value of `g` they are computed from.
pub fn behind(g: &crate::graph::Graph, mut todo: Vec<String>) -> std::collections::HashSet<String> {
    let mut seen = std::collections::HashSet::new();
    while let Some(v) = todo.pop() {
        if seen.insert(v.clone()) {
            if let Some(at) = g.producer(&v) {
                todo.extend(g.node(at.node).reads());
            }
        }
    }
    seen
}

/// A 16-bit float type.
fn is_half(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16)
}

/// Whether a model computes in float16 or bfloat16 anywhere (a value, an initializer or a Cast target).
pub fn has_half_floats(model: &crate::graph::Model) -> bool {
    has_half_floats_in(&model.graph)
}

/// [`has_half_floats`] of a graph and its control-flow bodies, however deep.
fn has_half_floats_in(g: &crate::graph::Graph) -> bool {
    let cast_to_half = |n: &crate::graph::Node| {
        ["to", "dtype"].iter().any(|k| n.attr_int(k).is_some_and(|c| is_half(DType::from_onnx(c as i32))))
    };
    g.types.values().filter_map(|t| t.tensor()).any(|t| is_half(t.dtype))
        || g.initializers.values().any(|t| is_half(t.dtype))
        || g.node_ids()
            .map(|id| g.node(id))
            .any(|n| cast_to_half(n) || n.subgraphs().any(|(_, b)| has_half_floats_in(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Graph, Model, Node, OpId, TensorType};

    /// An If whose branches compute one output through a DequantizeLinear and another from floats only: the float
    /// output stays comparable with a float64 evaluation (a review found a Scan's float16 Conv output judged
    /// against float32 only, as a quantized op sat beside it in the body).
    #[test]
    fn a_control_flow_output_beside_a_quantized_one_stays_comparable() {
        let branch = || {
            let mut b = Graph::new("b");
            b.add_initializer("s", crate::graph::Tensor::from_f64s(DType::F32, &[], &[0.5]));
            b.add_node(Node::new("r", OpId::onnx("Exp"), vec!["x".into()], vec!["f".into()])).unwrap();
            let q = Node::new("q", OpId::onnx("QuantizeLinear"), vec!["f".into(), "s".into()], vec!["qf".into()]);
            b.add_node(q).unwrap();
            let dq = Node::new("dq", OpId::onnx("DequantizeLinear"), vec!["qf".into(), "s".into()], vec!["d".into()]);
            b.add_node(dq).unwrap();
            b.add_output("d", TensorType::new(DType::F32, &[2]));
            b.add_output("f", TensorType::new(DType::F32, &[2]));
            crate::graph::Attr::Graph(Box::new(b))
        };
        let mut g = Graph::new("g");
        g.add_input("c", TensorType::new(DType::Bool, &[]));
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        let node = Node::new("if", OpId::onnx("If"), vec!["c".into()], vec!["y0".into(), "y1".into()])
            .with_attr("then_branch", branch())
            .with_attr("else_branch", branch());
        g.add_node(node).unwrap();
        g.add_output("y0", TensorType::new(DType::F32, &[2]));
        g.add_output("y1", TensorType::new(DType::F32, &[2]));
        let comparable = outputs_without_quantized_ops(&Model::new(g));
        assert!(comparable.contains("y1") && !comparable.contains("y0"), "{comparable:?}");
    }

    /// A body's quantization of a value its enclosing graph gives (a Relu of a graph input there) is one of given
    /// values: its output stays comparable, as at the top level (a Scan body's layer normalization of a quantized
    /// outer value was filed as a bug its float64 judgement could not decide).
    #[test]
    fn a_body_quantizing_an_outer_given_value_stays_comparable() {
        let mut b = Graph::new("b");
        b.add_initializer("s", crate::graph::Tensor::from_f64s(DType::F32, &[], &[0.5]));
        let q = Node::new("q", OpId::onnx("QuantizeLinear"), vec!["r".into(), "s".into()], vec!["qr".into()]);
        b.add_node(q).unwrap();
        let dq = Node::new("dq", OpId::onnx("DequantizeLinear"), vec!["qr".into(), "s".into()], vec!["d".into()]);
        b.add_node(dq).unwrap();
        b.add_output("d", TensorType::new(DType::F32, &[2]));
        let mut g = Graph::new("g");
        g.add_input("c", TensorType::new(DType::Bool, &[]));
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["x".into()], vec!["r".into()])).unwrap();
        let node = Node::new("if", OpId::onnx("If"), vec!["c".into()], vec!["y".into()])
            .with_attr("then_branch", crate::graph::Attr::Graph(Box::new(b.clone())))
            .with_attr("else_branch", crate::graph::Attr::Graph(Box::new(b)));
        g.add_node(node).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[2]));
        assert!(outputs_without_quantized_ops(&Model::new(g.clone())).contains("y"));
        // of a computed outer value (an Exp) it is not
        g.remove_node(g.producer("r").unwrap().node);
        g.add_node(Node::new("r", OpId::onnx("Exp"), vec!["x".into()], vec!["r".into()])).unwrap();
        assert!(outputs_without_quantized_ops(&Model::new(g)).is_empty());
    }

    /// A quantized op inside a Loop body makes a quantized model (the review found a Loop body's documented x64
    /// quantization overflow filed as a bug: its platform check never ran), and so does a float16 value.
    #[test]
    fn quantized_ops_and_half_floats_inside_bodies_count() {
        let mut body = Graph::new("body");
        body.add_input("q", TensorType::new(DType::U8, &[2]));
        body.add_input("s", TensorType::new(DType::F32, &[]));
        let q = Node::new("q", OpId::onnx("QuantizeLinear"), vec!["q".into(), "s".into()], vec!["y".into()]);
        body.add_node(q).unwrap();
        body.add_output("y", TensorType::new(DType::F16, &[2]));
        let mut g = crate::ops::testutil::if_of(body);
        g.add_output("o", TensorType::new(DType::F32, &[2]));
        let m = Model::new(g);
        assert!(has_quantized_ops(&m), "quantized");
        assert!(has_half_floats(&m), "half");
        assert!(!has_quantized_ops(&Model::new(Graph::new("empty"))));
        assert!(outputs_without_quantized_ops(&m).is_empty());
        // a QuantizeLinear of a graph input, then float ops, stays comparable; of a computed value (an Exp: a Relu
        // selects, as exact in float64) it does not
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        g.add_initializer("s", crate::graph::Tensor::from_f32(&[], &[0.5]));
        let q =
            |x: &str, y: &str| Node::new(y, OpId::onnx("QuantizeLinear"), vec![x.into(), "s".into()], vec![y.into()]);
        g.add_node(q("x", "qx")).unwrap();
        g.add_node(
            Node::new("c", OpId::onnx("Cast"), vec!["qx".into()], vec!["f".into()])
                .with_attr("to", crate::graph::Attr::Int(1)),
        )
        .unwrap();
        g.add_node(Node::new("r", OpId::onnx("Exp"), vec!["f".into()], vec!["r".into()])).unwrap();
        g.add_node(q("r", "qr")).unwrap();
        g.add_output("r", TensorType::new(DType::F32, &[2]));
        g.add_output("qr", TensorType::new(DType::U8, &[2]));
        let m2 = Model::new(g);
        assert_eq!(outputs_without_quantized_ops(&m2), ["r".to_string()].into());
        // what a quantized op reads, however far back, stays when inputs are perturbed; what it does not read moves
        assert_eq!(before_boundaries(&m2), ["x", "s", "r", "f", "qx"].map(String::from).into());
        // a dynamic quantization of a reshaped graph input rounds the same elements in float64: comparable
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        g.add_initializer("shape", crate::graph::Tensor::from_i64(&[2], &[1, 2]));
        g.add_node(Node::new("r", OpId::onnx("Reshape"), vec!["x".into(), "shape".into()], vec!["rx".into()])).unwrap();
        let outs = vec!["q".into(), "qs".into(), "qz".into()];
        g.add_node(Node::new("d", OpId::onnx("DynamicQuantizeLinear"), vec!["rx".into()], outs)).unwrap();
        g.add_output("qs", TensorType::new(DType::F32, &[]));
        assert_eq!(outputs_without_quantized_ops(&Model::new(g)), ["qs".to_string()].into());
        // a float branch beside a quantized one stays comparable
        let mut g = m.graph.clone();
        g.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["c".into()], vec!["r".into()])).unwrap();
        g.add_output("r", TensorType::new(DType::Bool, &[]));
        assert_eq!(outputs_without_quantized_ops(&Model::new(g)), ["r".to_string()].into());
    }
}
