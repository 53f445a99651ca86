//! The `per-axis` variation: a pattern's per-tensor quantization becomes per-axis. A scalar scale (and its zero
//! point) read only by QuantizeLinear and DequantizeLinear nodes becomes a 1-D tensor along one axis of the values
//! they quantize, each channel with another scale, and those nodes get that `axis`. The QDQ passes' tests write
//! per-tensor parameters almost everywhere; per-axis ones on other axes (around a Transpose, a Squeeze, a Reshape
//! that moves the axis) are where their bugs live. The catalog checks the variant; one it rejects is not used.

use crate::graph::{Attr, Dim, Tensor};
use crate::ops::{infer_types, Rng};
use crate::pattern::Pattern;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};

/// The share of splices whose pattern's quantization becomes per-axis.
pub const PER_AXIS_SHARE: f64 = 0.25;

/// Channels above this many are left per-tensor (a scale per channel is a constant of that size).
const MAX_CHANNELS: i64 = 4096;

/// For [`PER_AXIS_SHARE`] of the tags: pattern `p` with one scalar quantization scale made per-axis (see the
/// module); None for the other tags, below opset 13 (no per-axis DequantizeLinear), or when no scale qualifies.
pub(super) fn per_axis(p: &Pattern, tag: u64) -> Option<Pattern> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x00a1_5e5a_c0de_0005);
    if !vrng.random_bool(PER_AXIS_SHARE) || p.model.opset() < 13 {
        return None;
    }
    let g = &p.model.graph;
    let types = infer_types(g, false).ok()?;
    let scalar = |v: &str| g.initializers.get(v).is_some_and(|t| t.dtype.is_float() && t.numel() == 1);
    let qdq = |op: &str| matches!(op, "QuantizeLinear" | "DequantizeLinear");
    // (scale, axis, channels): every reader of the scale a default-domain Q or DQ of values with that many channels
    let mut choices: Vec<(String, i64, i64)> = Vec::new();
    for scale in g.initializers.keys().filter(|s| scalar(s)) {
        let readers: Vec<_> = g.consumers(scale).into_iter().map(|(id, slot)| (g.node(id), slot)).collect();
        let quantizers = readers.iter().all(|(n, slot)| *slot == 1 && n.op.domain.is_empty() && qdq(&n.op.name));
        if readers.is_empty() || !quantizers {
            continue;
        }
        let dims: Vec<Vec<i64>> = readers
            .iter()
            .filter_map(|(n, _)| types.get(&n.inputs[0]).and_then(|t| t.shape.clone()))
            .map(|s| s.iter().map(|d| if let Dim::Fixed(n) = d { *n } else { -1 }).collect())
            .collect();
        let Some(first) = dims.first().filter(|_| dims.len() == readers.len()) else { continue };
        for axis in 0..first.len() {
            let c = first[axis];
            if c > 1 && c <= MAX_CHANNELS && dims.iter().all(|d| d.len() == first.len() && d[axis] == c) {
                choices.push((scale.clone(), axis as i64, c));
            }
        }
    }
    choices.shuffle(&mut vrng);
    let (scale, axis, channels) = choices.into_iter().next()?;
    let mut q = p.clone();
    let readers: Vec<_> = g.consumers(&scale).into_iter().map(|(id, _)| id).collect();
    // a zero point read by other nodes than the scale's stays shared: it cannot become per-axis alone
    let zero_points: Vec<String> =
        readers.iter().filter_map(|&id| g.node(id).inputs.get(2).filter(|z| !z.is_empty()).cloned()).collect();
    for zp in &zero_points {
        let t = g.initializers.get(zp)?;
        if t.numel() != 1 || g.consumers(zp).iter().any(|(id, _)| !readers.contains(id)) {
            return None;
        }
    }
    let s = g.initializers[&scale].to_f64s()?[0];
    // each channel another scale: 1, 1.5, 0.75, 1.25, ... times the pattern's
    let factors = [1.0, 1.5, 0.75, 1.25, 0.5, 2.0];
    let per: Vec<f64> = (0..channels as usize).map(|c| s * factors[c % factors.len()]).collect();
    let dtype = g.initializers[&scale].dtype;
    q.model.graph.initializers.insert(scale.clone(), Tensor::from_f64s(dtype, &[channels as usize], &per));
    for zp in &zero_points {
        let t = &g.initializers[zp];
        let v = t.to_f64s()?[0];
        let repeated = vec![v; channels as usize];
        q.model.graph.initializers.insert(zp.clone(), Tensor::from_f64s(t.dtype, &[channels as usize], &repeated));
    }
    for id in readers {
        q.model.graph.node_attrs_mut(id).insert("axis".to_string(), Attr::Int(axis));
    }
    super::vary_attrs::retype_outputs(&mut q)?;
    Some(q)
}
