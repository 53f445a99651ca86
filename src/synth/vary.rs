//! Variation after splicing: what a pattern's own test never wrote, where a pass's corner cases live. A kind is
//! chosen by the splice's tag, apart from the splice's own random stream, so a test without it is the same test.
//! - `extra-reader`: a value inside the pattern (a node output that is no pattern output) is also read by a later
//!   node of the seed that takes its type (half of the time, when one does), else returned as a graph output, so
//!   a pass that removes its producer must keep it (the review of a 30-minute ORT campaign found FastGelu,
//!   BiasSkipLayerNorm, EmbedLayerNorm and Attention fusions deleting a node whose output was still read).
//! - `dtype`: one element type of the pattern (of its inputs and constants) is another one throughout (ports,
//!   constants, Cast targets, declared types), the first that the pattern's ops accept (the catalog's CPU
//!   dtypes), so the bridges feed it that type: FuseReluClip and DivMulFusion's tests use float only, their
//!   bugs live on int32 and int64.
//! - `attr`: one attribute of one pattern node takes another legal value ([`super::vary_attrs`]).
//! - `per-axis`: a per-tensor quantization scale becomes per-axis on one axis ([`super::vary_axis`]).
//! - `constant`: one initializer becomes an open input the splice feeds, or a Constant node ([`super::vary_const`]).
//! - `broadcast`: one constant read only where ONNX broadcasts takes another shape that broadcasts to the same
//!   values ([`super::vary_broadcast`]).

use crate::graph::{Attr, DType, Graph, Tensor, TensorType, ValueType};
use crate::ops::{check_graph, Rng};
use crate::pattern::{abstract_type, Pattern};
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use std::collections::HashMap;

/// The share of splices whose pattern gets an extra reader of one inner value ([`Variation::ExtraReader`]).
pub const EXTRA_READER_SHARE: f64 = 0.25;

/// A way a spliced pattern differs from its own test (`--vary`; counted per kind in stats.json `variations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variation {
    ExtraReader,
    Dtype,
    Attr,
    PerAxis,
    Constant,
    Broadcast,
}

/// The share of splices whose pattern takes another element type ([`Variation::Dtype`]).
pub const DTYPE_SHARE: f64 = 0.25;

/// The element types a pattern's type may become (the catalog decides which its ops accept).
const DTYPES: &[DType] = &[DType::F32, DType::F16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64];

impl Variation {
    pub const ALL: &'static [Variation] = &[
        Variation::ExtraReader,
        Variation::Dtype,
        Variation::Attr,
        Variation::PerAxis,
        Variation::Constant,
        Variation::Broadcast,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Variation::ExtraReader => "extra-reader",
            Variation::Dtype => "dtype",
            Variation::Attr => "attr",
            Variation::PerAxis => "per-axis",
            Variation::Constant => "constant",
            Variation::Broadcast => "broadcast",
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<Variation> {
        Variation::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Variation::ALL.iter().map(|v| v.name()).collect();
            anyhow::anyhow!("--vary {s}: expected one of {}", names.join(", "))
        })
    }
}

/// The extra reader a splice adds: which inner value, its type, and who reads it.
pub(super) struct Reader {
    /// The value, by its name in the pattern.
    pub value: String,
    pub ty: TensorType,
    /// A later seed node reads it (when one takes its type), rather than a new graph output.
    pub by_node: bool,
    /// Which of the seed nodes' free inputs of its type (modulo their count).
    pub pick: usize,
}

/// For [`EXTRA_READER_SHARE`] of the tags: one inner value of pattern graph `pg` to read again, typed with the
/// pattern's inputs as `ports` says where they differ from the pattern's own (abstract reuse, edge shapes); None
/// for the other tags, or when no inner value has a type.
pub(super) fn extra_reader(pg: &Graph, ports: &HashMap<String, TensorType>, tag: u64) -> Option<Reader> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x7a11_0e0d_e000_0002);
    if !vrng.random_bool(EXTRA_READER_SHARE) {
        return None;
    }
    let types = if ports.is_empty() {
        check_graph(pg, false).ok()?
    } else {
        // the pattern's declared inner types hold only for its own input shapes
        let mut probe = pg.clone();
        probe.types.retain(|v, _| pg.inputs.contains(v));
        for (n, t) in ports {
            probe.types.insert(n.clone(), t.clone().into());
        }
        check_graph(&probe, false).ok()?
    };
    let inner: Vec<(String, TensorType)> = pg
        .nodes_in_order()
        .ok()?
        .iter()
        .flat_map(|n| n.outputs.iter())
        .filter(|o| !o.is_empty() && !pg.outputs.contains(*o))
        .filter_map(|o| Some((o.clone(), types.get(o)?.clone())))
        .collect();
    let (value, ty) = inner.get(vrng.random_range(0..inner.len().max(1)))?.clone();
    Some(Reader { value, ty, by_node: vrng.random_bool(0.5), pick: vrng.random_range(0..1 << 16) })
}

/// For [`DTYPE_SHARE`] of the tags: pattern `p` with one element type of its inputs and constants replaced by
/// another everywhere (inputs, outputs, declared types, constants, Constant nodes, Cast targets), the first of
/// [`DTYPES`] in a random order that its ops accept; None for the other tags, or when none type-checks.
/// Constant values are converted; a nonzero float that an integer type would make zero becomes +-1 (no new
/// division by zero).
pub(super) fn retyped(p: &Pattern, tag: u64) -> Option<Pattern> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x7a11_0e0d_e000_0003);
    if !vrng.random_bool(DTYPE_SHARE) {
        return None;
    }
    let g = &p.model.graph;
    let mut from: Vec<DType> = g
        .inputs
        .iter()
        .filter_map(|i| g.tensor_type(i))
        .map(|t| t.dtype)
        .chain(g.initializers.values().map(|t| t.dtype))
        .filter(|d| DTYPES.contains(d))
        .collect();
    from.sort();
    from.dedup();
    let from = *from.get(vrng.random_range(0..from.len().max(1)))?;
    let original = check_graph(g, true).unwrap_or_default();
    let mut to: Vec<DType> = DTYPES.iter().copied().filter(|&d| d != from).collect();
    to.shuffle(&mut vrng);
    to.into_iter().find_map(|d| {
        let mut q = p.clone();
        retype_graph(&mut q.model.graph, from, d);
        // strict: an op the catalog does not know (typed by declarations) would take any type
        let types = check_graph(&q.model.graph, true).ok()?;
        if d.is_int() && !divisors_in_range(&q.model.graph, &types) {
            return None;
        }
        if !same_schemas((&p.model.graph, &original), (&q.model.graph, &types), p.model.opset()) {
            return None;
        }
        let consumers = |g: &Graph, v: &str| -> Vec<String> {
            g.consumers(v).iter().map(|(id, _)| g.node(*id).op.name.clone()).collect()
        };
        let port_types: Vec<(usize, TensorType)> = q
            .meta
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(k, port)| Some((k, q.model.graph.tensor_type(&port.name)?)))
            .collect();
        for (k, ty) in port_types {
            let readers = consumers(&q.model.graph, &q.meta.inputs[k].name);
            q.meta.inputs[k].abstract_ty = abstract_type(&ty, &readers.iter().map(String::as_str).collect::<Vec<_>>());
            q.meta.inputs[k].ty = ty;
        }
        for port in q.meta.outputs.iter_mut() {
            if let Some(ty) = q.model.graph.tensor_type(&port.name) {
                port.abstract_ty.dtype_class = abstract_type(&ty, &[]).dtype_class;
                port.ty = ty;
            }
        }
        Some(q)
    })
}

/// Whether every node of `g` that is the same node at the pattern's own `opset` as at opset 20 stays so in its
/// variant `q` (typed by `types`): an int8 Relu, Div or Mul before opset 14, a float16 DequantizeLinear scale before
/// 19 are not (a 10-minute run had dtype variants at 0.9896 validity, such nodes among the refused ones).
fn same_schemas(
    (g, g_types): (&Graph, &HashMap<String, TensorType>),
    (q, q_types): (&Graph, &HashMap<String, TensorType>),
    opset: i64,
) -> bool {
    let before = |v: &str| g_types.get(v).map(|t| t.dtype).or_else(|| g.tensor_type(v).map(|t| t.dtype));
    let after = |v: &str| q_types.get(v).map(|t| t.dtype).or_else(|| q.tensor_type(v).map(|t| t.dtype));
    g.node_ids().zip(q.node_ids()).all(|(a, b)| {
        !crate::ops::since::same_at(g.node(a), before, opset) || crate::ops::since::same_at(q.node(b), after, opset)
    }) && q.node_ids().all(|b| old_kernel_takes(q.node(b), after, opset))
}

/// ONNX Runtime's CPU kernels of older op versions that take fewer element types than their ONNX schemas: (op,
/// first and last opset of that version, the types its kernel takes). A 5-minute run had float64 Clip-11 variants
/// among the invalid tests ("Could not find an implementation for Clip(11)"; float and float16 run).
const OLD_KERNELS: &[(&str, i64, i64, &[DType])] = &[("Clip", 11, 11, &[DType::F32, DType::F16])];

/// Whether node `n` (its values' dtypes given by `dtype`) at ai.onnx `opset` has a CPU kernel for its input type.
fn old_kernel_takes(n: &crate::graph::Node, dtype: impl Fn(&str) -> Option<DType>, opset: i64) -> bool {
    if !matches!(n.op.domain.as_str(), "" | "ai.onnx") {
        return true;
    }
    let input = n.inputs.first().and_then(|v| dtype(v));
    OLD_KERNELS
        .iter()
        .filter(|(op, from, to, _)| *op == n.op.name && (*from..=*to).contains(&opset))
        .all(|(_, _, _, takes)| input.is_none_or(|d| takes.contains(&d)))
}

/// Whether every integer Div or Mod of `g` divides by a nonzero constant or by a pattern input (which the splice
/// feeds a fresh input kept nonzero, `ports::range_sensitive`): an inner value may be zero (a device run of 170,000
/// tests had 340 integer divisions by zero from dtype variants, all invalid tests).
fn divisors_in_range(g: &Graph, types: &HashMap<String, TensorType>) -> bool {
    g.node_ids().map(|id| g.node(id)).filter(|n| matches!(n.op.name.as_str(), "Div" | "Mod")).all(|n| {
        let divisor = n.inputs.get(1).map(String::as_str).unwrap_or("");
        let nonzero = |t: &Tensor| t.to_f64s().is_some_and(|v| v.iter().all(|&x| x != 0.0));
        !types.get(divisor).is_some_and(|t| t.dtype.is_int())
            || g.initializers.get(divisor).is_some_and(nonzero)
            || (g.inputs.iter().any(|i| i == divisor) && !g.initializers.contains_key(divisor))
    })
}

/// Every `from` of graph `g` made `to`: declared types, initializers, tensor attributes, Cast targets.
fn retype_graph(g: &mut Graph, from: DType, to: DType) {
    for t in g.types.values_mut() {
        if let ValueType::Tensor(t) = t {
            if t.dtype == from {
                t.dtype = to;
            }
        }
    }
    for t in g.initializers.values_mut() {
        retype_tensor(t, from, to);
    }
    let ids: Vec<_> = g.node_ids().collect();
    for id in ids {
        for (name, a) in g.node_attrs_mut(id).iter_mut() {
            match a {
                Attr::Tensor(t) => retype_tensor(t, from, to),
                Attr::Int(code) if name == "to" && *code == from.onnx() as i64 => *code = to.onnx() as i64,
                _ => {}
            }
        }
    }
}

fn retype_tensor(t: &mut Tensor, from: DType, to: DType) {
    if t.dtype != from {
        return;
    }
    let Some(values) = t.to_f64s() else { return };
    let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
    let converted: Vec<f64> = values
        .iter()
        .map(|&v| {
            if !to.is_int() {
                return v;
            }
            let r = v.round();
            let r = if r == 0.0 && v != 0.0 { v.signum() } else { r };
            let (lo, hi) = match to {
                DType::I8 => (-128.0, 127.0),
                DType::U8 => (0.0, 255.0),
                DType::I32 => (i32::MIN as f64, i32::MAX as f64),
                _ => (-9.0e15, 9.0e15),
            };
            if r.is_finite() {
                r.clamp(lo, hi)
            } else {
                0.0
            }
        })
        .collect();
    *t = Tensor::from_f64s(to, &dims, &converted);
}
