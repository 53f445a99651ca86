//! The `attr` variation: one attribute of one pattern node takes a legal value the pattern's own test never wrote
//! (the other sign of an axis, another axis, a flipped flag, a padding or rounding mode, other pads, strides or a
//! permutation, an epsilon or coefficient), or an attribute the node leaves at its default is written with another
//! value. The catalog checks the variant (strict: every op known) and gives the pattern's outputs their new types;
//! a value it rejects is not used.

use crate::graph::{Attr, Graph, NodeId, TensorType};
use crate::ops::{infer_types, Rng};
use crate::pattern::{abstract_type, Pattern};
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use std::collections::HashMap;

/// The share of splices whose pattern gets another attribute value.
pub const ATTR_SHARE: f64 = 0.25;

/// How many candidate values are checked before the variation gives up on a pattern.
const TRIES: usize = 12;

/// 0/1 attributes: a flag flipped.
const FLAGS: &[&str] = &[
    "keepdims",
    "ceil_mode",
    "count_include_pad",
    "transA",
    "transB",
    "select_last_index",
    "exclusive",
    "reverse",
    "noop_with_empty_axes",
    "largest",
    "sorted",
    "detect_negative",
    "detect_positive",
    "upper",
];

/// String attributes and their legal values (per op where the name is shared).
fn enum_values(op: &str, name: &str) -> &'static [&'static str] {
    match (op, name) {
        (_, "auto_pad") => &["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"],
        ("Pad", "mode") => &["constant", "reflect", "edge"],
        ("Resize", "mode") => &["nearest", "linear", "cubic"],
        ("DepthToSpace", "mode") => &["DCR", "CRD"],
        (_, "coordinate_transformation_mode") => &["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"],
        (_, "nearest_mode") => &["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"],
        ("Gelu", "approximate") => &["none", "tanh"],
        _ => &[],
    }
}

/// Attributes an `op` node may leave at their default at ai.onnx `opset`, with that default: written with another
/// value, they are a case the pattern never had. Only attributes the op's schema has at that opset (MaxPool has no
/// `count_include_pad`, and neither pool has `ceil_mode` before opset 10: ORT rejects the model).
fn defaults(op: &str, opset: i64) -> Vec<(&'static str, Attr)> {
    let mut out = Vec::new();
    match op {
        "AveragePool" | "MaxPool" => {
            if opset >= 10 {
                out.push(("ceil_mode", Attr::Int(0)));
            }
            if op == "AveragePool" && opset >= 7 {
                out.push(("count_include_pad", Attr::Int(0)));
            }
        }
        "Gemm" => out.extend([("transA", Attr::Int(0)), ("transB", Attr::Int(0))]),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL2" | "ReduceSumSquare" => {
            out.push(("keepdims", Attr::Int(1)))
        }
        _ => {}
    }
    out
}

/// The other legal values of attribute `name` = `a` of an `op` node whose first input has rank `rank`.
/// `negative`: whether the opset has negative axes (from 11; Flatten's axis -5 at opset 10: ORT refused the model).
fn alternatives(op: &str, name: &str, a: &Attr, rank: Option<i64>, negative: bool) -> Vec<Attr> {
    let spatial = |v: &[i64], x: i64| Attr::Ints(vec![x; v.len()]);
    match a {
        Attr::Int(v) if FLAGS.contains(&name) => vec![Attr::Int(1 - v.clamp(&0, &1))],
        Attr::Int(v) if name == "axis" => match rank {
            Some(r) if r > 0 => {
                let same = if *v >= 0 { v - r } else { v + r };
                let others = (0..r).filter(|x| x != v && *x != v + r);
                std::iter::once(same).chain(others).filter(|x| negative || *x >= 0).map(Attr::Int).collect()
            }
            _ => Vec::new(),
        },
        Attr::Ints(v) if name == "axes" => match rank {
            Some(r) => {
                let other: Vec<i64> = v.iter().map(|&x| if x >= 0 { x - r } else { x }).collect();
                if negative || other.iter().all(|&x| x >= 0) {
                    vec![Attr::Ints(other)]
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        },
        Attr::Ints(v) if name == "perm" && v.len() > 1 => {
            (0..v.len() - 1).map(|i| Attr::Ints([&v[..i], &[v[i + 1], v[i]], &v[i + 2..]].concat())).collect()
        }
        Attr::Ints(v) if name == "pads" && !v.is_empty() => {
            let begin_only: Vec<i64> = v.iter().enumerate().map(|(i, x)| x + (i < v.len() / 2) as i64).collect();
            vec![spatial(v, 0), Attr::Ints(begin_only), Attr::Ints(v.iter().map(|x| x + 1).collect())]
        }
        Attr::Ints(v) if matches!(name, "strides" | "dilations") && !v.is_empty() => {
            vec![spatial(v, 1), spatial(v, 2)]
        }
        Attr::Float(_) if name == "epsilon" => [1e-12f32, 1e-5, 0.1].iter().map(|&e| Attr::Float(e)).collect(),
        Attr::Float(f) if matches!(name, "alpha" | "beta" | "gamma") => {
            [0.0, 1.0, 2.0 * f, -f].iter().filter(|&&x| x != *f).map(|&x| Attr::Float(x)).collect()
        }
        Attr::String(s) => enum_values(op, name)
            .iter()
            .filter(|e| e.as_bytes() != s.as_slice())
            .map(|e| Attr::String(e.as_bytes().to_vec()))
            .collect(),
        _ => Vec::new(),
    }
}

/// For [`ATTR_SHARE`] of the tags: pattern `p` with one attribute of one node set to another legal value (see the
/// module), its outputs' types those the catalog gives the variant; None for the other tags, or when no candidate
/// type-checks.
pub(super) fn reattributed(p: &Pattern, tag: u64) -> Option<Pattern> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x7a11_0e0d_e000_0004);
    if !vrng.random_bool(ATTR_SHARE) {
        return None;
    }
    let g = &p.model.graph;
    let types = infer_types(g, false).ok()?;
    let mut choices: Vec<(NodeId, String, Attr)> = Vec::new();
    for id in g.node_ids() {
        let n = g.node(id);
        let rank = n.inputs.first().and_then(|v| types.get(v)).and_then(|t| t.shape.as_ref()).map(|s| s.len() as i64);
        let opset = if matches!(n.op.domain.as_str(), "" | "ai.onnx") { p.model.opset() } else { 0 };
        let absent = defaults(&n.op.name, opset).into_iter().filter(|(k, _)| !n.attrs.contains_key(*k));
        let present = n.attrs.iter().map(|(k, a)| (k.as_str(), a.clone()));
        for (name, a) in present.chain(absent) {
            let alts = alternatives(&n.op.name, name, &a, rank, p.model.opset() >= 11);
            choices.extend(alts.into_iter().map(|alt| (id, name.to_string(), alt)));
        }
    }
    choices.shuffle(&mut vrng);
    choices.into_iter().take(TRIES).find_map(|(id, name, alt)| {
        let mut q = p.clone();
        let attrs = q.model.graph.node_attrs_mut(id);
        // explicit pads and an automatic padding exclude each other
        if name == "auto_pad" && !matches!(&alt, Attr::String(s) if s == b"NOTSET") {
            attrs.remove("pads");
        }
        attrs.insert(name, alt);
        retype_outputs(&mut q)?;
        Some(q)
    })
}

/// Gives `q`'s values the types the catalog infers for them (strict) from its inputs' declared types, and its output
/// ports theirs; None when the catalog rejects the graph.
pub(super) fn retype_outputs(q: &mut Pattern) -> Option<()> {
    let g: &mut Graph = &mut q.model.graph;
    let mut probe = g.clone();
    probe.types.retain(|v, _| g.inputs.contains(v) || g.initializers.contains_key(v));
    let types: HashMap<String, TensorType> = infer_types(&probe, true).ok()?;
    for o in g.outputs.clone() {
        g.types.insert(o.clone(), types.get(&o)?.clone().into());
    }
    g.types.retain(|v, _| g.inputs.contains(v) || g.outputs.contains(v) || g.initializers.contains_key(v));
    for port in q.meta.outputs.iter_mut() {
        let ty = types.get(&port.name)?.clone();
        port.abstract_ty.dtype_class = abstract_type(&ty, &[]).dtype_class;
        port.abstract_ty.rank = port.abstract_ty.rank.and(ty.rank());
        port.ty = ty;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::defaults;

    /// A review of invalid attr variants: MaxPool was given `count_include_pad`, which only AveragePool has, and
    /// ORT refuses the model ("Unrecognized attribute"); `ceil_mode` only exists from opset 10.
    #[test]
    fn absent_attributes_are_only_those_the_ops_schema_has_at_the_models_opset() {
        let names = |op, opset| defaults(op, opset).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(names("MaxPool", 13), ["ceil_mode"]);
        assert_eq!(names("AveragePool", 13), ["ceil_mode", "count_include_pad"]);
        assert_eq!(names("AveragePool", 9), ["count_include_pad"]);
        assert!(names("MaxPool", 9).is_empty());
    }
}
