//! The `broadcast` variation: one constant of a pattern, read only where ONNX broadcasts (Add, Mul, Where, a
//! PRelu's slope, a Gemm's C, ...), is written in another shape that broadcasts to the same values. Fusions test a
//! constant's shape before they read it (a scalar scale, a one-dimensional bias, a [C, 1, 1] Conv bias) and then
//! read it assuming that shape; their own tests write one shape per check. The forms:
//! - `lead`: leading ones added ([C] as [1, C], a scalar as [1, 1, 1]), up to its readers' output rank;
//! - `unlead`: its leading ones dropped ([1, C, 1, 1] as [C, 1, 1]);
//! - `scalar`: a constant of equal values as a scalar or a [1];
//! - `full`: expanded to its reader's output shape (small outputs only), values repeated.
//!
//! A form is kept only when every node's output type of the varied pattern is what it was (the catalog types
//! broadcasting), so the pattern computes the same values; patterns below opset 7 (the `broadcast` attribute's
//! semantics) are left alone.

use crate::graph::{Dim, Graph, Tensor, TensorData, ValueType};
use crate::ops::{check_graph, Rng};
use crate::pattern::Pattern;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};

/// The share of splices whose pattern gets one constant in another broadcasting shape.
pub const BROADCAST_SHARE: f64 = 0.25;

/// A `full` constant holds at most this many elements.
const MAX_FULL: usize = 4096;

/// (ai.onnx op, input slots) that broadcast (multidirectionally, or a PRelu's slope and a Gemm's C towards the
/// output).
const BROADCASTING: &[(&str, &[usize])] = &[
    ("Add", &[0, 1]),
    ("Sub", &[0, 1]),
    ("Mul", &[0, 1]),
    ("Div", &[0, 1]),
    ("Pow", &[0, 1]),
    ("Mod", &[0, 1]),
    ("Max", &[0, 1, 2, 3]),
    ("Min", &[0, 1, 2, 3]),
    ("Sum", &[0, 1, 2, 3]),
    ("Mean", &[0, 1, 2, 3]),
    ("Where", &[0, 1, 2]),
    ("Equal", &[0, 1]),
    ("Greater", &[0, 1]),
    ("GreaterOrEqual", &[0, 1]),
    ("Less", &[0, 1]),
    ("LessOrEqual", &[0, 1]),
    ("And", &[0, 1]),
    ("Or", &[0, 1]),
    ("Xor", &[0, 1]),
    ("BitShift", &[0, 1]),
    ("PRelu", &[1]),
    ("Gemm", &[2]),
];

/// How the varied constant is reshaped.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    Lead,
    Unlead,
    Scalar,
    Full,
}

/// The readers' smallest output rank and, when every reader's output has one static shape, that shape; None when
/// `name` has no reader, a reader does not broadcast it ([`BROADCASTING`]) or an output's rank is unknown.
fn readers(g: &Graph, name: &str, types: &std::collections::HashMap<String, crate::graph::TensorType>) -> Option<Out> {
    let mut shapes = Vec::new();
    for (id, slot) in g.consumers(name) {
        let n = g.node(id);
        let broadcasts = matches!(n.op.domain.as_str(), "" | "ai.onnx")
            && BROADCASTING.iter().any(|(op, slots)| *op == n.op.name && slots.contains(&slot));
        if !broadcasts {
            return None;
        }
        shapes.push(types.get(n.outputs.first()?)?.shape.clone()?);
    }
    let rank = shapes.iter().map(Vec::len).min()?;
    let fixed = |s: &Vec<Dim>| -> Option<Vec<usize>> {
        s.iter().map(|d| if let Dim::Fixed(v) = d { Some(*v as usize) } else { None }).collect()
    };
    let shape = fixed(&shapes[0]).filter(|f| shapes.iter().all(|s| fixed(s).as_ref() == Some(f)));
    Some(Out { rank, shape })
}

/// What a constant's readers make of it.
struct Out {
    /// The smallest output rank of its readers.
    rank: usize,
    /// Their one static output shape, when they share one.
    shape: Option<Vec<usize>>,
}

/// The raw elements of `t` (fixed-size types only), one slice per element.
fn elements(t: &Tensor) -> Option<Vec<&[u8]>> {
    let TensorData::Raw(raw) = &t.data else { return None };
    let size = t.dtype.size()?;
    (raw.len() == size * t.numel() && size > 0).then(|| raw.chunks_exact(size).collect())
}

/// `t` broadcast to `to` (ONNX rules; `to` is a shape `t` broadcasts to), its elements repeated.
fn expanded(t: &Tensor, to: &[usize]) -> Option<Tensor> {
    let el = elements(t)?;
    let from: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
    if from.len() > to.len() {
        return None;
    }
    let lead = to.len() - from.len();
    let mut raw = Vec::new();
    let total: usize = to.iter().product();
    for flat in 0..total {
        // the output index, digit by digit from the last dimension, folded into the source's flat index
        let (mut rest, mut src, mut stride) = (flat, 0, 1);
        for k in (0..to.len()).rev() {
            let i = rest % to[k];
            rest /= to[k];
            if k >= lead {
                let d = from[k - lead];
                if d != 1 && d != to[k] {
                    return None;
                }
                src += if d == 1 { 0 } else { i * stride };
                stride *= d;
            }
        }
        raw.extend_from_slice(el.get(src)?);
    }
    Some(Tensor { dtype: t.dtype, dims: to.iter().map(|&d| d as i64).collect(), data: TensorData::Raw(raw) })
}

/// Initializer `t` in `form` (`rank`: its readers' smallest output rank, `full`: their shape), or None when the
/// form does not apply to it.
fn reshaped(t: &Tensor, form: Form, out: &Out, vrng: &mut Rng) -> Option<Tensor> {
    let mut q = t.clone();
    match form {
        Form::Lead => {
            let room = out.rank.checked_sub(t.dims.len()).filter(|&r| r > 0)?;
            let k = vrng.random_range(1..=room);
            q.dims = std::iter::repeat_n(1, k).chain(t.dims.iter().copied()).collect();
        }
        Form::Unlead => {
            let ones = t.dims.iter().take_while(|&&d| d == 1).count();
            q.dims = t.dims[vrng.random_range(1..=ones.max(1)).min(ones)..].to_vec();
        }
        Form::Scalar => {
            let el = elements(t)?;
            let first = *el.first()?;
            if !el.iter().all(|e| *e == first) {
                return None;
            }
            let dims = if t.dims.is_empty() || vrng.random_bool(0.5) && t.dims != [1] { vec![1] } else { vec![] };
            q = Tensor { dtype: t.dtype, dims, data: TensorData::Raw(first.to_vec()) };
        }
        Form::Full => {
            let to = out.shape.as_ref()?;
            if to.iter().product::<usize>() > MAX_FULL {
                return None;
            }
            q = expanded(t, to)?;
        }
    }
    (q.dims != t.dims).then_some(q)
}

/// For [`BROADCAST_SHARE`] of the tags: pattern `p` with one initializer read only by broadcasting slots in another
/// shape (a form in a random order that applies and keeps every node's output type); None for the other tags, or
/// when no initializer of `p` has such a form.
pub(super) fn broadcast(p: &Pattern, tag: u64) -> Option<Pattern> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x0b0a_dca5_7000_0007);
    if !vrng.random_bool(BROADCAST_SHARE) || p.model.opset() < 7 {
        return None;
    }
    let g = &p.model.graph;
    let types = check_graph(g, true).ok()?;
    let mut names: Vec<&String> = g
        .initializers
        .keys()
        .filter(|v| !g.inputs.contains(v) && !g.outputs.contains(v) && elements(&g.initializers[*v]).is_some())
        .collect();
    names.sort();
    names.shuffle(&mut vrng);
    let mut forms = [Form::Lead, Form::Unlead, Form::Scalar, Form::Full];
    for name in names {
        let Some(out) = readers(g, name, &types) else { continue };
        forms.shuffle(&mut vrng);
        for form in forms {
            let Some(t) = reshaped(&g.initializers[name], form, &out, &mut vrng) else { continue };
            let mut q = p.clone();
            if q.model.graph.types.contains_key(name.as_str()) {
                q.model.graph.types.insert(name.to_string(), ValueType::Tensor(t.ty()));
            }
            q.model.graph.initializers.insert(name.to_string(), t);
            let Ok(after) = check_graph(&q.model.graph, true) else { continue };
            let same = g.node_ids().flat_map(|id| g.node(id).outputs.iter()).all(|o| after.get(o) == types.get(o));
            if same {
                return Some(q);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, Node, OpId, TensorType};

    fn t(d: &[usize]) -> TensorType {
        TensorType::new(DType::F32, d)
    }

    /// Add(in f32[2, 3], c) -> out, with initializer `c` (the ports of `tests::pattern`).
    fn add(c: Tensor) -> Pattern {
        let mut p = super::super::tests::pattern(t(&[2, 3]));
        let mut g = Graph::new("p");
        g.add_input("in", t(&[2, 3]));
        g.add_initializer("c", c);
        g.add_node(Node::new("add", OpId::onnx("Add"), vec!["in".into(), "c".into()], vec!["out".into()])).unwrap();
        g.add_output("out", t(&[2, 3]));
        p.model.graph = g;
        p
    }

    fn shapes(p: &Pattern) -> std::collections::BTreeSet<Vec<i64>> {
        (0..800).filter_map(|tag| broadcast(p, tag)).map(|q| q.model.graph.initializers["c"].dims.clone()).collect()
    }

    /// A bias [3] of distinct values: [1, 3] (leading one) or [2, 3] (expanded), never a rank above the output's
    /// or a scalar; a constant of equal values also as [] and [1]; the expansion repeats the row.
    #[test]
    fn a_broadcast_variant_keeps_the_values_its_readers_see() {
        let p = add(Tensor::from_f32(&[3], &[1.0, 2.0, 3.0]));
        assert_eq!(shapes(&p), [vec![1, 3], vec![2, 3]].into());
        let q = (0..800).filter_map(|tag| broadcast(&p, tag)).find(|q| q.model.graph.initializers["c"].dims == [2, 3]);
        assert_eq!(q.unwrap().model.graph.initializers["c"].to_f64s().unwrap(), [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let equal = add(Tensor::from_f32(&[1, 3], &[0.5; 3]));
        assert_eq!(shapes(&equal), [vec![], vec![1], vec![3], vec![2, 3]].into());
        let share = (0..800).filter(|&tag| broadcast(&p, tag).is_some()).count() as f64 / 800.0;
        assert!((0.15..0.35).contains(&share), "{share}");
    }

    /// A constant also read where ONNX does not broadcast (a MatMul's operand) keeps its shape.
    #[test]
    fn a_constant_read_without_broadcasting_keeps_its_shape() {
        let mut p = add(Tensor::from_f32(&[3], &[1.0, 2.0, 3.0]));
        let g = &mut p.model.graph;
        let n = Node::new("m", OpId::onnx("MatMul"), vec!["in".into(), "c".into()], vec!["z".into()]);
        g.add_node(n).unwrap();
        g.add_output("z", t(&[2]));
        assert!(check_graph(g, true).is_ok());
        assert!(shapes(&p).is_empty());
    }

    /// Half of the splices whose pattern took a broadcast variant feed a port an edge shape (rank 0 or all ones),
    /// so the varied constant may set the output's rank; the other splices one in eight.
    #[test]
    fn a_broadcast_variant_feeds_an_edge_shape_in_half_of_its_splices() {
        use super::super::{splice_varied, vary::Variation, Feed, BROADCAST_EDGE_SHARE, EDGE_SHARE};
        let p = add(Tensor::from_f32(&[3], &[1.0, 2.0, 3.0]));
        let (mut varied, mut other) = ((0, 0), (0, 0));
        for tag in 0..1600 {
            let mut rng = Rng::seed_from_u64(tag);
            let seed = super::super::tests::seed();
            let Ok((_, info)) = splice_varied(&seed, &p, &mut rng, tag, Some(1), &[Variation::Broadcast]) else {
                continue;
            };
            let count = if info.variations.contains(&Variation::Broadcast) { &mut varied } else { &mut other };
            *count = (count.0 + 1, count.1 + info.feeds.contains(&Feed::Edge) as usize);
        }
        let share = |(n, e): (usize, usize)| e as f64 / n.max(1) as f64;
        assert!(varied.0 >= 200 && other.0 >= 800, "{varied:?} {other:?}");
        assert!((share(varied) - BROADCAST_EDGE_SHARE).abs() < 0.1, "{varied:?}");
        assert!((share(other) - EDGE_SHARE).abs() < 0.05, "{other:?}");
    }
}
