//! Constants written negative, a share of the `constant` variation ([`super::vary_const`]): an integer constant
//! that counts positions from the start of a dimension, or dimensions from the first, is written counting from
//! the end, which its op reads as the same positions or dimensions. Gather's indices, the start and limit of a
//! Range that computes a Gather's indices (constants, or hidden as `Clip(p, c, c)` by extraction's `unfold`
//! repair), the axes inputs of Squeeze, Unsqueeze and the reductions, and Slice's starts, ends and axes. A pass that
//! reads the constant without normalizing it goes wrong (ONNX Runtime 1.32.0's GatherToSliceFusion slices
//! `Range(-8, 0, 1)` empty); the test's own patterns almost always count from the start.

use crate::graph::{Dim, Graph, NodeId, Tensor};
use crate::ops::check_graph;
use crate::pattern::Pattern;
use rand::seq::IndexedRandom as _;

/// One way to write a pattern's constants negative: each initializer with its new values.
pub(super) type Site = Vec<(String, Vec<i64>)>;

/// Ops whose input `slot` holds axes counting the dimensions of their first input (Unsqueeze: of its output).
const AXES_INPUTS: &[(&str, usize)] = &[
    ("Squeeze", 1),
    ("Unsqueeze", 1),
    ("ReduceSum", 1),
    ("ReduceMean", 1),
    ("ReduceMax", 1),
    ("ReduceMin", 1),
    ("ReduceProd", 1),
    ("ReduceL1", 1),
    ("ReduceL2", 1),
    ("ReduceLogSum", 1),
    ("ReduceLogSumExp", 1),
    ("ReduceSumSquare", 1),
    ("Slice", 3),
];

/// The static dims of `value`, when every one is known.
fn dims(g: &Graph, value: &str) -> Option<Vec<i64>> {
    g.tensor_type(value)?.shape?.iter().map(|d| if let Dim::Fixed(n) = d { Some(*n) } else { None }).collect()
}

/// The values of signed integer initializer `name` (no graph input), when node `reader` is its only reader.
fn own_ints(g: &Graph, name: &str, reader: NodeId) -> Option<Vec<i64>> {
    let t = g.initializers.get(name).filter(|t| t.dtype.is_int() && t.dtype.is_signed())?;
    let only = !g.inputs.iter().any(|i| i == name) && g.consumers(name).iter().all(|(id, _)| *id == reader);
    only.then(|| t.to_i64s())?
}

/// Each value `v` with `0 <= v < m` (its modulus) written `v - m`; None when none is.
fn shifted(values: &[i64], moduli: &[i64]) -> Option<Vec<i64>> {
    let out: Vec<i64> = values.iter().zip(moduli).map(|(&v, &m)| if (0..m).contains(&v) { v - m } else { v }).collect();
    (out != values).then_some(out)
}

/// The integer constant a value is, by initializer name: an initializer, or `Clip(p, c, c)` of one (`c` whatever
/// `p` holds).
fn constant_of<'a>(g: &'a Graph, value: &'a str) -> Option<&'a str> {
    if g.initializers.contains_key(value) && !g.inputs.iter().any(|i| i == value) {
        return Some(value);
    }
    let n = g.node(g.producer(value)?.node);
    let clip = n.op.name == "Clip" && n.inputs.len() == 3 && n.inputs[1] == n.inputs[2];
    (clip && g.initializers.contains_key(&n.inputs[1])).then_some(n.inputs[1].as_str())
}

/// Gather's site: its own indices initializer, or the start and limit of the Range computing its indices
/// (delta > 0, `0 <= start < limit <= dim`) when the Range feeds only this Gather and its constants only it.
fn gather_site(g: &Graph, id: NodeId) -> Option<Site> {
    let n = g.node(id);
    let shape = dims(g, &n.inputs[0])?;
    let axis = n.attr_int("axis").unwrap_or(0);
    let dim = *shape.get(usize::try_from(if axis < 0 { axis + shape.len() as i64 } else { axis }).ok()?)?;
    let indices = n.inputs.get(1)?;
    if let Some(v) = own_ints(g, indices, id) {
        return Some(vec![(indices.clone(), shifted(&v, &vec![dim; v.len()])?)]);
    }
    let range = g.producer(indices)?.node;
    let r = g.node(range);
    if r.op.name != "Range" || r.inputs.len() != 3 || g.consumers(indices).len() != 1 {
        return None;
    }
    let c: Vec<&str> = r.inputs.iter().map(|v| constant_of(g, v)).collect::<Option<_>>()?;
    if c[0] == c[1] || c[0] == c[2] || c[1] == c[2] {
        return None;
    }
    // each constant read by the Range, or by the Clip that hides it
    let scalar = |k: usize| {
        let reader = if c[k] == r.inputs[k] { range } else { g.producer(&r.inputs[k])?.node };
        own_ints(g, c[k], reader).filter(|v| v.len() == 1).map(|v| v[0])
    };
    let (start, limit, delta) = (scalar(0)?, scalar(1)?, scalar(2)?);
    (delta > 0 && 0 <= start && start < limit && limit <= dim)
        .then(|| vec![(c[0].to_string(), vec![start - dim]), (c[1].to_string(), vec![limit - dim])])
}

/// The site of an axes input (`slot` of node `id`): nonnegative axes counted from the last dimension.
fn axes_site(g: &Graph, id: NodeId, slot: usize) -> Option<Site> {
    let n = g.node(id);
    let axes = n.inputs.get(slot).filter(|a| !a.is_empty())?;
    let v = own_ints(g, axes, id)?;
    let rank = dims(g, &n.inputs[0])?.len() as i64 + if n.op.name == "Unsqueeze" { v.len() as i64 } else { 0 };
    Some(vec![(axes.clone(), shifted(&v, &vec![rank; v.len()])?)])
}

/// Slice's starts or ends (`slot` 1 or 2): each position counted from the end of the dimension its axis names.
fn slice_site(g: &Graph, id: NodeId, slot: usize) -> Option<Site> {
    let n = g.node(id);
    let shape = dims(g, &n.inputs[0])?;
    let rank = shape.len() as i64;
    let name = n.inputs.get(slot)?;
    let v = own_ints(g, name, id)?;
    let axes = match n.inputs.get(3).filter(|a| !a.is_empty()) {
        Some(a) => g.initializers.get(a)?.to_i64s()?,
        None => (0..v.len() as i64).collect(),
    };
    let moduli: Vec<i64> = axes
        .iter()
        .map(|&a| shape.get(usize::try_from(if a < 0 { a + rank } else { a }).ok()?).copied())
        .collect::<Option<_>>()?;
    (moduli.len() == v.len()).then_some(())?;
    Some(vec![(name.clone(), shifted(&v, &moduli)?)])
}

/// Every way to write one node's constants of pattern graph `g` negative.
pub(super) fn negative_sites(g: &Graph) -> Vec<Site> {
    let mut out = Vec::new();
    for id in g.node_ids() {
        let n = g.node(id);
        if !matches!(n.op.domain.as_str(), "" | "ai.onnx") || n.inputs.is_empty() {
            continue;
        }
        let op = n.op.name.as_str();
        if op == "Gather" {
            out.extend(gather_site(g, id));
        }
        if op == "Slice" {
            out.extend([1, 2].into_iter().filter_map(|slot| slice_site(g, id, slot)));
        }
        out.extend(AXES_INPUTS.iter().filter(|(o, _)| *o == op).filter_map(|&(_, slot)| axes_site(g, id, slot)));
    }
    out
}

/// Pattern `p` with one of its `sites` ([`negative_sites`], drawn by `rng`) written negative, when the catalog
/// gives its outputs the same types (an op it does not know, such as Range, typed by the pattern's declarations).
pub(super) fn negated(p: &Pattern, sites: &[Site], rng: &mut crate::ops::Rng) -> Option<Pattern> {
    let g = &p.model.graph;
    let site = sites.choose(rng)?.clone();
    let before = check_graph(g, false).ok()?;
    let mut q = p.clone();
    for (name, values) in site {
        let t = q.model.graph.initializers.get_mut(name.as_str())?;
        let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
        *t = Tensor::from_f64s(t.dtype, &dims, &values.iter().map(|&v| v as f64).collect::<Vec<_>>());
    }
    let after = check_graph(&q.model.graph, false).ok()?;
    g.outputs.iter().all(|o| before.get(o) == after.get(o)).then_some(q)
}
