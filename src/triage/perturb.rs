//! Perturbed evaluations of a model: how far rounding alone moves the exact result at a given input
//! ([`super::conditioning::refine`] judges by them). The float inputs and constants that no rounding boundary reads
//! move by a few ULPs (a fold rounds what it computes), and so do the values the model's arithmetic computes (a
//! fused kernel rounds elsewhere than the ops it replaces).

use super::reduce::Case;
use super::Reproducer;
use crate::compiler::{NamedTensor, Outcome};
use crate::graph::{onnx, DType, Tensor};
use rand::{Rng, SeedableRng};
use std::collections::HashSet;

/// How many ULPs (relative, of each input's dtype) a perturbation moves each float input element, at most.
pub const PERTURB_ULPS: f64 = 4.0;
/// How many perturbed evaluations measure the spread.
pub const PERTURBATIONS: u64 = 3;

/// The unit roundoff of a float dtype.
pub(super) fn epsilon(d: DType) -> Option<f64> {
    match d {
        DType::F32 => Some(f32::EPSILON as f64),
        DType::F64 => Some(f64::EPSILON),
        DType::F16 => Some(2f64.powi(-10)),
        DType::BF16 => Some(2f64.powi(-7)),
        _ => None,
    }
}

/// onnx.reference's results on `case` perturbed [`PERTURBATIONS`] times ([`perturbed_model`], [`perturbed`]); with
/// `variants`, each also with its 16-bit floats widened (a skipped rounding is rounding too, class `widened`) and
/// with the configuration's `approximations` (what it computes by design): how far those move the result. When
/// nothing can be perturbed, the model widened alone (with `variants`); empty without a semantic reference.
pub fn runs(r: &mut Reproducer, case: &Case, variants: bool, approximations: &[String]) -> Vec<Outcome> {
    let fixed = kept_in(&case.model.graph);
    let Some(s) = r.semantic.as_mut().filter(|_| r.finding.relax.is_none()) else { return Vec::new() };
    let half = variants && super::holds::has_half_floats(&case.model);
    if !can_perturb(&case.model, &case.feeds, &fixed) {
        // nothing moves (no arithmetic; a rounding boundary reads every given float): the model widened still shows
        // how far skipping its 16-bit roundings moves the result (a fused kernel may skip some of them)
        let widened = half.then(|| s.run_widened(&onnx::encode_model(&case.model), &case.feeds).ok()).flatten();
        return widened.into_iter().collect();
    }
    let approximate = variants && !approximations.is_empty();
    (1..=PERTURBATIONS)
        .flat_map(|k| {
            let model = onnx::encode_model(&perturbed_model(&case.model, k, &fixed));
            let feeds = perturbed(&case.feeds, k, &fixed);
            let widened = half.then(|| s.run_widened(&model, &feeds).ok()).flatten();
            let approximated = approximate.then(|| s.run_approximated(&model, &feeds, approximations).ok()).flatten();
            [s.run(&model, &feeds).ok(), widened, approximated]
        })
        .flatten()
        .collect()
}

/// The values of `g` that perturbations keep: what a rounding boundary reads ([`super::holds::before_boundaries_in`])
/// and the exponents of Pow (a model's `x ^ 2` is exact intent: 2 moved by a few ULPs makes a negative base NaN).
pub fn kept_in(g: &crate::graph::Graph) -> HashSet<String> {
    let mut kept = super::holds::before_boundaries_in(g);
    kept.extend(exponents(g));
    kept
}

/// The exponents of `g`'s Pow nodes.
fn exponents(g: &crate::graph::Graph) -> HashSet<String> {
    let pow = g.node_ids().map(|id| g.node(id)).filter(|n| n.op.name == "Pow" && n.op.domain.is_empty());
    pow.filter_map(|n| n.inputs.get(1).cloned()).collect()
}

/// `feeds` with every float element multiplied by `1 + u·PERTURB_ULPS·eps`, u uniform in [-1, 1] (seeded), but
/// those `fixed` names.
pub fn perturbed(feeds: &[NamedTensor], seed: u64, fixed: &HashSet<String>) -> Vec<NamedTensor> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    feeds
        .iter()
        .map(|f| {
            let t = &f.tensor;
            if fixed.contains(&f.name) {
                return f.clone();
            }
            let (Some(eps), Some(values)) = (epsilon(t.dtype), t.to_f64s()) else { return f.clone() };
            let moved: Vec<f64> =
                values.iter().map(|v| v * (1.0 + rng.random_range(-1.0..=1.0) * PERTURB_ULPS * eps)).collect();
            let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
            NamedTensor { name: f.name.clone(), tensor: Tensor::from_f64s(t.dtype, &dims, &moved) }
        })
        .collect()
}

/// `model` with every element of its float initializers moved as in [`perturbed`]: a constant a pass folds is
/// rounded to its dtype, so a correct fold (a float16 BatchNormalization into float16 weights) moves the result as
/// far as constants moved by a few ULPs do. Constants a rounding boundary reads (a quantized op, an integer Cast),
/// directly or through what they feed, stay (`fixed`, [`kept_in`]).
///
/// The values the main graph's rounding ops compute move too, each element by up to [`ROUNDING_ULPS`]: a fused
/// kernel rounds at other places than the ops it replaces, and where the model cancels (a mean of values minus
/// that mean, divided by a tiny epsilon) those few ULPs are the whole result. So do those a rounding boundary reads:
/// a computed float is only known to rounding, and one on a boundary (a convolution's sum exactly between two
/// quantization steps) is rounded either way by correct kernels; a given one (an input, a constant) is exact.
pub fn perturbed_model(model: &crate::graph::Model, seed: u64, fixed: &HashSet<String>) -> crate::graph::Model {
    let mut moved = model.clone();
    perturb_graph(&mut moved.graph, seed ^ 0x5eed_c0de, fixed);
    // variances before levels: the catalog types the model as written, not with the levels' noise around it
    if model.opset() >= 7 {
        if let Ok(g) = variance_noise(&moved.graph, model.opset(), seed ^ 0x0a_e1a5) {
            moved.graph = g;
        }
    }
    // levels before rounding: the values they add are exact (a float level moved by an ULP would truncate to the one
    // below)
    let mut exact = exponents(&model.graph);
    if model.opset() >= 11 {
        if let Ok((g, levels)) = level_noise(&moved.graph, model.opset(), seed) {
            moved.graph = g;
            exact.extend(levels);
        }
    }
    if model.opset() >= 7 {
        if let Ok(g) = round_noise(&moved.graph, model.opset(), seed ^ 0x0dd_ba11, &exact) {
            moved.graph = g;
        }
    }
    moved
}

/// The levels of an integer type quantization writes, as floats (other types: none).
fn level_range(d: DType) -> Option<(f64, f64)> {
    match d {
        DType::I8 => Some((-128.0, 127.0)),
        DType::U8 => Some((0.0, 255.0)),
        DType::I16 => Some((-32768.0, 32767.0)),
        DType::U16 => Some((0.0, 65535.0)),
        _ => None,
    }
}

/// `g` (at ai.onnx `opset`) with the levels each quantizing op of the main graph writes (QuantizeLinear, QLinear*)
/// moved one level, saturating: all up (perturbation `seed` 1, 4, ...), all down (2, 5, ...), or each element
/// either way (3, 6, ...; seeded). A quantized kernel is exact to a level only (the oracle's `steps` tolerance),
/// and a level amplified downstream, a Gemm of the levels, is no wrong rewrite (a review found a fused
/// QLinearSoftmax's table one level below 255 at exactly 1.0, filed through such a Gemm); moving all levels one way
/// keeps two quantizations in a row from cancelling.
/// Also returns the values it adds.
fn level_noise(
    g: &crate::graph::Graph,
    opset: i64,
    seed: u64,
) -> anyhow::Result<(crate::graph::Graph, HashSet<String>)> {
    use crate::graph::{Attr, Node, OpId};
    let types = crate::ops::infer_types(&crate::ops::since::typed_at(g, opset), false)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x1e7e1);
    let (mut nodes, mut constants, mut budget) = (Vec::new(), Vec::new(), MAX_NOISE_ELEMENTS);
    let (mut added, mut declared) = (HashSet::new(), Vec::new());
    for n in g.nodes_in_order()? {
        let mut n = n.clone();
        let quantizes = crate::oracle::is_quantizing(&n.op.name) && n.subgraphs().next().is_none();
        let levels = n.outputs.first().filter(|v| quantizes && !v.is_empty()).cloned();
        let typed = levels.as_ref().and_then(|v| types.get(v)).and_then(|t| Some((t.dtype, t.dims()?)));
        let plan = levels.zip(typed).and_then(|(v, (dtype, dims))| {
            let (lo, hi) = level_range(dtype)?;
            let size: usize = dims.iter().product();
            (size <= budget).then_some((v, dtype, dims, size, lo, hi))
        });
        let Some((v, dtype, dims, size, lo, hi)) = plan else {
            nodes.push(n);
            continue;
        };
        budget -= size;
        let shift: Vec<f64> = match seed % 3 {
            1 => vec![1.0; size],
            2 => vec![-1.0; size],
            _ => (0..size).map(|_| if rng.random_bool(0.5) { 1.0 } else { -1.0 }).collect(),
        };
        let name = |s: &str| format!("{v}__level_{s}");
        constants.push((name("shift"), Tensor::from_f64s(DType::F32, &dims, &shift)));
        constants.push((name("lo"), Tensor::from_f64s(DType::F32, &[], &[lo])));
        constants.push((name("hi"), Tensor::from_f64s(DType::F32, &[], &[hi])));
        n.outputs[0] = name("exact");
        // declared: a quantizing op the catalog types by declarations only (DynamicQuantizeLinear) stays typed
        declared.push((name("exact"), crate::graph::TensorType::new(dtype, &dims)));
        let node = |op: &str, ins: Vec<String>, out: String| Node::new(out.clone(), OpId::onnx(op), ins, vec![out]);
        let to = |d: DType| Attr::Int(d.onnx() as i64);
        nodes.push(n);
        nodes.push(node("Cast", vec![name("exact")], name("float")).with_attr("to", to(DType::F32)));
        nodes.push(node("Add", vec![name("float"), name("shift")], name("moved")));
        nodes.push(node("Clip", vec![name("moved"), name("lo"), name("hi")], name("clipped")));
        added.extend(["exact", "float", "moved", "clipped"].map(name));
        nodes.push(node("Cast", vec![name("clipped")], v).with_attr("to", to(dtype)));
    }
    let mut out = g.with_nodes(nodes)?;
    for (name, t) in constants {
        out.add_initializer(&name, t);
    }
    for (name, ty) in declared {
        out.types.insert(name, ty.into());
    }
    Ok((out, added))
}

/// How many ULPs (relative) an intermediate value of a rounding op moves in [`perturbed_model`], at most.
pub const ROUNDING_ULPS: f64 = 1.0;

/// Ops whose float results are rounded (arithmetic), as opposed to those that move or select values exactly.
const ROUNDING_OPS: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Sqrt",
    "Reciprocal",
    "Exp",
    "Log",
    "Tanh",
    "Sigmoid",
    "Erf",
    "Softmax",
    "LogSoftmax",
    "ReduceMean",
    "ReduceSum",
    "ReduceSumSquare",
    "ReduceL2",
    "ReduceLogSumExp",
    "ReduceProd",
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "BatchNormalization",
    "LayerNormalization",
    "InstanceNormalization",
    "AveragePool",
    "GlobalAveragePool",
    "Sum",
    "Mean",
    "Gelu",
    "Elu",
    "Softplus",
    "Einsum",
];

/// Values above this many elements in all are left exact (each moved value adds a constant of its size).
const MAX_NOISE_ELEMENTS: usize = 1 << 22;

/// `g` (at ai.onnx `opset`) with every float result of a [`ROUNDING_OPS`] node of the default domain whose shape
/// is known and that is not `fixed` (a Pow's exponent) multiplied by a constant `1 + u·ROUNDING_ULPS·eps` (u
/// uniform in [-1, 1], seeded) of its own shape: the node writes `<value>__exact`, a Mul gives the value its readers
/// read.
fn round_noise(
    g: &crate::graph::Graph,
    opset: i64,
    seed: u64,
    fixed: &HashSet<String>,
) -> anyhow::Result<crate::graph::Graph> {
    // a model at an older opset: its older-form nodes are typed by their declarations
    let types = crate::ops::infer_types(&crate::ops::since::typed_at(g, opset), false)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut nodes, mut noise, mut budget) = (Vec::new(), Vec::new(), MAX_NOISE_ELEMENTS);
    for n in g.nodes_in_order()? {
        let (mut n, mut muls) = (n.clone(), Vec::new());
        let rounds = n.op.domain.is_empty() && ROUNDING_OPS.contains(&n.op.name.as_str());
        for k in 0..n.outputs.len() {
            let v = n.outputs[k].clone();
            let Some(t) = types.get(&v).filter(|_| rounds && !v.is_empty() && !fixed.contains(&v)) else { continue };
            let (Some(eps), Some(dims)) = (epsilon(t.dtype), t.dims()) else { continue };
            let size: usize = dims.iter().product();
            if size > budget {
                continue;
            }
            budget -= size;
            let factor: Vec<f64> =
                (0..size).map(|_| 1.0 + rng.random_range(-1.0..=1.0) * ROUNDING_ULPS * eps).collect();
            let (exact, by) = (format!("{v}__exact"), format!("{v}__noise"));
            noise.push((by.clone(), Tensor::from_f64s(t.dtype, &dims, &factor)));
            n.outputs[k] = exact.clone();
            let name = format!("{}__noise{k}", n.name);
            muls.push(crate::graph::Node::new(name, crate::graph::OpId::onnx("Mul"), vec![exact, by], vec![v]));
        }
        nodes.push(n);
        nodes.append(&mut muls);
    }
    let mut out = g.with_nodes(nodes)?;
    for (name, t) in noise {
        out.add_initializer(&name, t);
    }
    Ok(out)
}

/// `g` (at ai.onnx `opset`) with each variance its main graph computes two-pass, `ReduceMean((a - ReduceMean(a))^2)`,
/// moved by up to [`ONE_PASS_ULPS`] units of roundoff of `ReduceMean(a * a)`: a fused layer normalization kernel
/// may compute it in one pass, `E[a²] - E[a]²` (ONNX Runtime's does), whose rounding is relative to the mean square,
/// not to the variance. Where the values normalized agree to a few digits, that rounding is the variance's whole
/// size (a review found LayerNormFusion's kernel 8e-4 off the variance of [0.9999272, 1, 1] filed as its bug).
fn variance_noise(g: &crate::graph::Graph, opset: i64, seed: u64) -> anyhow::Result<crate::graph::Graph> {
    use crate::graph::{Node, OpId};
    let types = crate::ops::infer_types(&crate::ops::since::typed_at(g, opset), false)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (mut nodes, mut noise, mut budget) = (Vec::new(), Vec::new(), MAX_NOISE_ELEMENTS);
    for n in g.nodes_in_order()? {
        let mut n = n.clone();
        let v = n.outputs.first().cloned().unwrap_or_default();
        let typed = types.get(&v).and_then(|t| Some((epsilon(t.dtype)?, t.dtype, t.dims()?)));
        let (Some(a), Some((eps, dtype, dims))) = (variance_of(g, &n), typed) else {
            nodes.push(n);
            continue;
        };
        let size: usize = dims.iter().product();
        if size > budget {
            nodes.push(n);
            continue;
        }
        budget -= size;
        let by: Vec<f64> = (0..size).map(|_| rng.random_range(-1.0..=1.0) * ONE_PASS_ULPS * eps).collect();
        let name = |what: &str| format!("{v}__one_pass_{what}");
        let mut square_mean = n.clone();
        square_mean.name = name("mean_square_node");
        square_mean.inputs[0] = name("square");
        square_mean.outputs = vec![name("mean_square")];
        n.outputs[0] = name("exact");
        let square = Node::new(name("square_node"), OpId::onnx("Mul"), vec![a.clone(), a], vec![name("square")]);
        let scaled =
            Node::new(name("by_node"), OpId::onnx("Mul"), vec![name("mean_square"), name("by")], vec![name("noise")]);
        let moved = Node::new(name("add_node"), OpId::onnx("Add"), vec![name("exact"), name("noise")], vec![v.clone()]);
        noise.push((name("by"), Tensor::from_f64s(dtype, &dims, &by)));
        nodes.extend([n, square, square_mean, scaled, moved]);
    }
    let mut out = g.with_nodes(nodes)?;
    for (name, t) in noise {
        out.add_initializer(&name, t);
    }
    Ok(out)
}

/// How many units of roundoff of the mean square [`variance_noise`] moves a variance by, at most: a one-pass
/// variance rounds its two means and their difference.
const ONE_PASS_ULPS: f64 = 4.0;

/// The values `a` whose variance node `n` computes two-pass: `n` a ReduceMean of `(a - ReduceMean(a))^2` (a Pow of
/// exponent 2, or a Mul of the difference by itself).
fn variance_of(g: &crate::graph::Graph, n: &crate::graph::Node) -> Option<String> {
    let plain = |n: &crate::graph::Node, op: &str| n.op.name == op && n.op.domain.is_empty();
    let producer = |v: &str| g.producer(v).map(|at| g.node(at.node));
    if !plain(n, "ReduceMean") {
        return None;
    }
    let squared = producer(n.inputs.first()?)?;
    let two = |v: &String| g.initializers.get(v).and_then(|t| t.to_f64s()).is_some_and(|x| x == [2.0]);
    let by_itself = plain(squared, "Mul") && squared.inputs.first() == squared.inputs.get(1);
    if !(by_itself || (plain(squared, "Pow") && squared.inputs.get(1).is_some_and(two))) {
        return None;
    }
    let sub = producer(squared.inputs.first()?).filter(|s| plain(s, "Sub"))?;
    let (a, mean) = (sub.inputs.first()?, producer(sub.inputs.get(1)?)?);
    (plain(mean, "ReduceMean") && mean.inputs.first() == Some(a)).then(|| a.clone())
}

/// The nodes of `g` whose bodies' constants move: those with a result no rounding boundary reads.
fn movable_bodies(g: &crate::graph::Graph, fixed: &HashSet<String>) -> Vec<crate::graph::NodeId> {
    let movable =
        |n: &crate::graph::Node| n.subgraphs().next().is_some() && n.outputs.iter().any(|o| !fixed.contains(o));
    g.node_ids().filter(|&id| movable(g.node(id))).collect()
}

/// Moves the float initializers of `g` not `fixed`, and those of its [`movable_bodies`] (a Loop's weights) but what
/// their own rounding boundaries read and what the body outputs behind `fixed` results are computed from (a Loop
/// whose float16 output is returned and whose other output is compared).
fn perturb_graph(g: &mut crate::graph::Graph, seed: u64, fixed: &HashSet<String>) {
    let as_feeds: Vec<NamedTensor> =
        g.initializers.iter().map(|(name, t)| NamedTensor { name: name.clone(), tensor: t.clone() }).collect();
    for f in perturbed(&as_feeds, seed, fixed) {
        g.initializers.insert(f.name, f.tensor);
    }
    for (k, id) in movable_bodies(g, fixed).into_iter().enumerate() {
        let n = g.node(id);
        let slots: Vec<usize> =
            (0..n.outputs.len()).filter(|&s| fixed.contains(&n.outputs[s])).filter_map(|s| n.body_output(s)).collect();
        g.edit_bodies(id, |b| {
            let mut kept = kept_in(b);
            kept.extend(super::holds::behind(b, slots.iter().filter_map(|&i| b.outputs.get(i).cloned()).collect()));
            perturb_graph(b, seed.wrapping_add(k as u64 + 1), &kept)
        });
    }
}

/// Whether [`perturbed`] and [`perturbed_model`] move anything: a float input or initializer not `fixed`, a
/// float initializer of a [`movable_bodies`] body, or a value a [`ROUNDING_OPS`] node of the main graph computes.
pub fn can_perturb(model: &crate::graph::Model, feeds: &[NamedTensor], fixed: &HashSet<String>) -> bool {
    let movable = |name: &String, t: &Tensor| t.dtype.is_float() && !fixed.contains(name);
    let g = &model.graph;
    let rounds = |n: &crate::graph::Node| n.op.domain.is_empty() && ROUNDING_OPS.contains(&n.op.name.as_str());
    (model.opset() >= 7 && g.node_ids().any(|id| rounds(g.node(id))))
        || feeds.iter().any(|f| movable(&f.name, &f.tensor))
        || g.initializers.iter().any(|(n, t)| movable(n, t))
        || movable_bodies(g, fixed)
            .into_iter()
            .any(|id| g.node(id).subgraphs().any(|(_, b)| b.initializers.values().any(|t| t.dtype.is_float())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-pass variance, `ReduceMean((x - ReduceMean(x))^2)`, is found (with exponent 2, or squared by a Mul),
    /// and moved by its mean square's roundoff: the model's result moves with it.
    #[test]
    fn a_two_pass_variance_moves_as_a_one_pass_kernel_rounds_it() {
        use crate::graph::{Graph, Model, Node, OpId, TensorType};
        let variance = |exponent: f64| {
            let mut g = Graph::new("g");
            g.add_input("x", TensorType::new(DType::F32, &[1, 3]));
            g.add_initializer("e", Tensor::from_f64s(DType::F32, &[], &[exponent]));
            let node = |op: &str, ins: &[&str], out: &str| {
                Node::new(out, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![out.into()])
            };
            for n in [
                node("ReduceMean", &["x"], "m"),
                node("Sub", &["x", "m"], "d"),
                node("Pow", &["d", "e"], "sq"),
                node("ReduceMean", &["sq"], "v"),
            ] {
                g.add_node(n).unwrap();
            }
            g.add_output("v", TensorType::new(DType::F32, &[1, 1]));
            g
        };
        let g = variance(2.0);
        let n = g.node(g.producer("v").unwrap().node);
        assert_eq!(variance_of(&g, n).as_deref(), Some("x"));
        let cubed = variance(3.0);
        assert_eq!(variance_of(&cubed, cubed.node(cubed.producer("v").unwrap().node)), None);
        let moved = variance_noise(&g, 17, 1).unwrap();
        let model = Model::new(moved);
        assert!(crate::ops::infer_types(&model.graph, false).is_ok());
        assert!(model.graph.node_ids().any(|id| model.graph.node(id).name.ends_with("one_pass_add_node")));
    }

    /// A fold rounds the constants it computes: a float model's initializers move by a few ULPs, never more, and
    /// integers stay; given values a quantized op reads stay (moving a scale moves its rounding boundaries), the sum
    /// it reads moves.
    #[test]
    fn perturbed_constants_move_by_a_few_ulps_unless_a_quantized_op_reads_them() {
        use crate::graph::{Graph, Model, Node, OpId};
        let mut g = Graph::new("g");
        g.add_initializer("w", Tensor::from_f64s(DType::F16, &[3], &[1.0, -2.0, 0.5]));
        g.add_initializer("k", Tensor::from_f64s(DType::I64, &[1], &[3.0]));
        g.add_input("x", crate::graph::TensorType::new(DType::F16, &[3]));
        g.add_node(Node::new("add", OpId::onnx("Add"), vec!["x".into(), "w".into()], vec!["y".into()])).unwrap();
        g.add_output("y", crate::graph::TensorType::new(DType::F16, &[3]));
        let model = Model::new(g);
        let fixed = |m: &Model| kept_in(&m.graph);
        assert!(can_perturb(&model, &[], &fixed(&model)));
        let moved = perturbed_model(&model, 1, &fixed(&model));
        let (w0, w1) =
            (model.graph.initializers["w"].to_f64s().unwrap(), moved.graph.initializers["w"].to_f64s().unwrap());
        assert_ne!(w0, w1, "float constants move");
        for (a, b) in w0.iter().zip(&w1) {
            assert!((a - b).abs() <= PERTURB_ULPS * 2f64.powi(-10) * a.abs(), "{a} -> {b}");
        }
        assert_eq!(model.graph.initializers["k"], moved.graph.initializers["k"], "integers stay");
        let mut q = model.clone();
        q.graph.add_initializer("s", Tensor::from_f64s(DType::F16, &[], &[0.5]));
        q.graph
            .add_node(Node::new("q", OpId::onnx("QuantizeLinear"), vec!["y".into(), "s".into()], vec!["z".into()]))
            .unwrap();
        let moved_q = perturbed_model(&q, 1, &fixed(&q)).graph;
        let added = |n: &String| n.ends_with("__noise") || n.contains("__level_");
        let constants = |g: &Graph| g.initializers.iter().filter(|(n, _)| !added(n)).count();
        assert_eq!(constants(&moved_q), q.graph.initializers.len());
        // its levels move by one, all up in the first perturbation, all down in the second
        let shift = |k: u64| perturbed_model(&q, k, &fixed(&q)).graph.initializers["z__level_shift"].to_f64s();
        assert_eq!((shift(1), shift(2)), (Some(vec![1.0; 3]), Some(vec![-1.0; 3])));
        for (name, t) in &q.graph.initializers {
            assert_eq!(&moved_q.initializers[name], t, "{name}: given values a quantized op reads stay");
        }
        // the sum the quantized op reads is computed: it moves by an ULP (a correct kernel may round it either way)
        assert!(moved_q.initializers.contains_key("y__noise"), "{:?}", moved_q.initializers.keys());
        assert!(can_perturb(&q, &[], &fixed(&q)));
    }

    /// A fused kernel rounds elsewhere than the ops it replaces: the values arithmetic computes move by an ULP (a
    /// Mul by a constant near 1 after the node), what only moves or selects values (Relu) does not, and a Pow's
    /// exponent stays exact.
    #[test]
    fn computed_values_of_arithmetic_move_and_exponents_stay() {
        use crate::graph::{Graph, Model, Node, OpId, TensorType};
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[3]));
        g.add_initializer("w", Tensor::from_f64s(DType::F32, &[3], &[1.0, -2.0, 0.5]));
        g.add_initializer("two", Tensor::from_f64s(DType::F32, &[], &[2.0]));
        let node = |op: &str, i: &[&str], o: &str| {
            Node::new(o, OpId::onnx(op), i.iter().map(|s| s.to_string()).collect(), vec![o.to_string()])
        };
        g.add_node(node("Add", &["x", "w"], "a")).unwrap();
        g.add_node(node("Relu", &["a"], "r")).unwrap();
        g.add_node(node("Pow", &["r", "two"], "y")).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[3]));
        let model = Model::new(g);
        let kept = kept_in(&model.graph);
        assert!(kept.contains("two"), "{kept:?}");
        let moved = perturbed_model(&model, 1, &kept).graph;
        assert_eq!(moved.initializers["two"], model.graph.initializers["two"]);
        let producer = |v: &str| moved.node(moved.producer(v).unwrap().node).op.name.clone();
        assert_eq!((producer("a"), producer("a__exact")), ("Mul".to_string(), "Add".to_string()));
        assert_eq!(producer("r"), "Relu");
        assert_eq!(producer("y"), "Mul");
        let factor = moved.initializers["a__noise"].to_f64s().unwrap();
        assert!(factor.iter().all(|f| (f - 1.0).abs() <= ROUNDING_ULPS * f32::EPSILON as f64), "{factor:?}");
    }
}
