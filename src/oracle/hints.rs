//! What the oracle learns from a test's graph besides its outputs: which values are quantization levels (made
//! by QuantizeLinear, DynamicQuantizeLinear, QLinear*, QGemm) and which floats are such levels dequantized (by
//! DequantizeLinear with a constant scale: one step is the scale), directly or through ops that only move,
//! select or clamp values, so that a difference of a quantization step is judged in steps; and which floats carry
//! only float32's precision (cast up to float64, then computed on), so that they are judged with float32's
//! tolerance: a float64 output of `Cast(float32 -> float64)` holds float32 roundings.

use crate::graph::{DType, Graph, Node, TensorType};
use std::collections::{BTreeMap, BTreeSet};

/// Hints about one test's model for the oracle's judges; the default knows nothing (integers compare exactly).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hints {
    /// Values (by name) whose integers are quantization levels.
    pub quantized: BTreeSet<String>,
    /// Float values (by name) that are dequantized levels, with the size of one step (the largest scale).
    pub dequantized: BTreeMap<String, f64>,
    /// Float values (by name) whose precision is a narrower float type's: made by a Cast (or CastLike) from
    /// float32 to float64, or computed from such a value; judged with that type's tolerance.
    pub precision: BTreeMap<String, DType>,
    /// The model's declared output types ([`super::contract`]), for ONNX tests: a reference run that breaks
    /// them makes the test invalid. Empty: not checked (a Relax recipe's seed graph is not what runs).
    pub declared: Vec<(String, TensorType)>,
}

/// Float types from the least to the most precise (bfloat16 has fewer significand bits than float16).
fn precision_rank(d: DType) -> Option<u8> {
    match d {
        DType::BF16 => Some(0),
        DType::F16 => Some(1),
        DType::F32 => Some(2),
        DType::F64 => Some(3),
        _ => None,
    }
}

/// Whether float type `a` is less precise than `b`.
pub fn less_precise(a: DType, b: DType) -> bool {
    matches!((precision_rank(a), precision_rank(b)), (Some(x), Some(y)) if x < y)
}

/// Ops that round a real value to a quantization level.
pub fn is_quantizing(op: &str) -> bool {
    op.starts_with("QLinear") || matches!(op, "QuantizeLinear" | "DynamicQuantizeLinear" | "QGemm")
}

/// The inputs of `n` whose values its outputs are (moved, selected, converted or clamped), so that a difference
/// of k steps in them is at most k steps in the outputs; none for other ops.
fn level_inputs(n: &Node) -> &[String] {
    let data = match n.op.name.as_str() {
        "Identity" | "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze" | "Flatten" | "Expand" | "Tile" | "Slice"
        | "Gather" | "GatherElements" | "GatherND" | "Split" | "Pad" | "DepthToSpace" | "SpaceToDepth" | "MaxPool"
        | "ReduceMax" | "ReduceMin" | "Cast" | "Clip" | "Relu" => 0..1,
        "Where" => 1..3,
        "Concat" | "Max" | "Min" => 0..n.inputs.len(),
        _ => 0..0,
    };
    n.inputs.get(data).unwrap_or_default()
}

impl Hints {
    /// The hints of `g`. Intermediate values are included, so they stay right for any graph that keeps these
    /// value names (a reduced one).
    pub fn of(g: &Graph) -> Hints {
        Hints::of_in(g, &Hints::default())
    }

    /// [`Hints::of`] an ONNX test's graph, with its declared output types (what the test itself runs).
    pub fn of_onnx(g: &Graph) -> Hints {
        Hints { declared: super::contract::declared(g), ..Hints::of(g) }
    }

    /// The hints of a test's graph `g`: [`Hints::of_onnx`] for an ONNX test, [`Hints::of`] for a Relax recipe's
    /// seed graph (not what runs: its declared outputs are no contract).
    pub fn of_test(g: &Graph, onnx: bool) -> Hints {
        if onnx {
            Hints::of_onnx(g)
        } else {
            Hints::of(g)
        }
    }

    /// The hints of a graph whose nodes may read values of enclosing graphs with hints `outer` (a body).
    fn of_in(g: &Graph, outer: &Hints) -> Hints {
        let mut h = outer.clone();
        let types = crate::ops::infer_types(g, false).unwrap_or_default();
        let float = |v: &str| types.get(v).map(|t| t.dtype).filter(|d| d.is_float());
        for n in g.nodes_in_order().unwrap_or_default() {
            // the least precise type this node's float results carry: a Cast up from float32, or an input that
            // already carries one. 16-bit floats cast up are judged as what they are cast to: a skipped 16-bit
            // rounding is for triage to classify (`widened`, or a wrong unoptimized run), not for the tolerance
            let cast_from = matches!(n.op.name.as_str(), "Cast" | "CastLike")
                .then(|| float(n.inputs.first()?))
                .flatten()
                .filter(|d| *d == DType::F32);
            let carried = n.inputs.iter().filter_map(|v| h.precision.get(v).copied());
            if let Some(p) = cast_from.into_iter().chain(carried).min_by_key(|d| precision_rank(*d)) {
                for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                    if float(o).is_some_and(|d| less_precise(p, d)) {
                        h.precision.insert(o.clone(), p);
                    }
                }
            }
            let outputs = n.outputs.iter().filter(|o| !o.is_empty()).cloned();
            let from = level_inputs(n);
            if is_quantizing(&n.op.name) || from.iter().any(|v| h.quantized.contains(v)) {
                h.quantized.extend(outputs.clone());
            }
            let step = if n.op.name == "DequantizeLinear" {
                let own = n.inputs.first().filter(|q| h.quantized.contains(*q)).and_then(|_| scale(g, n));
                // levels requantized from a dequantized value: one rounding or two (DoubleQDQPairsRemover makes
                // one of Q, DQ, Q, DQ), the value is known to one step of the coarser scale
                let requantized = n.inputs.first().and_then(|q| g.producer(q)).map(|at| g.node(at.node));
                let before = requantized
                    .filter(|q| q.op.name == "QuantizeLinear")
                    .and_then(|q| h.dequantized.get(q.inputs.first()?).copied());
                own.map(|s| before.map_or(s, |b| s.max(b)))
            } else {
                from.iter().filter_map(|v| h.dequantized.get(v).copied()).reduce(f64::max)
            };
            if let Some(step) = step {
                h.dequantized.extend(outputs.map(|o| (o, step)));
            }
            h.through_bodies(n);
        }
        h
    }

    /// A control-flow node's outputs carry what its bodies' outputs carry (any body: an If's branches join).
    fn through_bodies(&mut self, n: &Node) {
        // a Loop's body yields its condition first
        let skip = usize::from(n.op.name == "Loop" && n.op.domain.is_empty());
        for (_, body) in n.subgraphs() {
            let inner = Hints::of_in(body, self);
            for (k, o) in n.outputs.iter().enumerate().filter(|(_, o)| !o.is_empty()) {
                let Some(b) = body.outputs.get(k + skip) else { continue };
                if inner.quantized.contains(b) {
                    self.quantized.insert(o.clone());
                }
                if let Some(&step) = inner.dequantized.get(b) {
                    let e = self.dequantized.entry(o.clone()).or_insert(step);
                    *e = e.max(step);
                }
                if let Some(&p) = inner.precision.get(b) {
                    let e = self.precision.entry(o.clone()).or_insert(p);
                    if less_precise(p, *e) {
                        *e = p;
                    }
                }
            }
        }
    }
}

/// The largest scale of a DequantizeLinear node, when it is a constant.
fn scale(g: &Graph, n: &Node) -> Option<f64> {
    let t = g.initializers.get(n.inputs.get(1)?)?;
    let s = t.to_f64s()?.into_iter().map(f64::abs).reduce(f64::max)?;
    (s.is_finite() && s > 0.0).then_some(s)
}

/// The names of every value of `g` that holds quantization levels ([`Hints::of`]).
pub fn quantized_outputs(g: &Graph) -> BTreeSet<String> {
    Hints::of(g).quantized
}
