//! What feeds a pattern's open inputs when it is spliced: ports that must stay in range or hold a given value,
//! the edge shapes a port may take and the one port of a splice that gets one, and the pattern's output types
//! recomputed by catalog inference.

use crate::graph::{Graph, TensorType};
use crate::ops::Rng;
use crate::pattern::{Pattern, Port};
use rand::Rng as _;
use std::collections::{HashMap, HashSet};

/// The edge shapes a port of type `t` may take: every dim 1 (same rank), or rank 0; none that equals `t`.
pub(super) fn edge_types(t: &TensorType) -> Vec<TensorType> {
    let Some(dims) = t.dims() else { return Vec::new() };
    let mut out = Vec::new();
    if !dims.is_empty() && dims.iter().any(|&d| d != 1) {
        out.push(TensorType::new(t.dtype, &vec![1; dims.len()]));
    }
    if !dims.is_empty() {
        out.push(TensorType::new(t.dtype, &[]));
    }
    out
}

/// (op, input slot) whose value must stay in a range: such open inputs become fresh graph inputs.
const RANGE_SENSITIVE: &[(&str, usize)] = &[
    ("Gather", 1),
    ("GatherElements", 1),
    ("GatherND", 1),
    ("ScatterElements", 1),
    ("ScatterND", 1),
    ("OneHot", 1),
    ("Dropout", 1),
    ("EmbedLayerNormalization", 0),
    ("EmbedLayerNormalization", 1),
    ("EmbedLayerNormalization", 7),
    ("Attention", 3),
];

/// Whether an open input of a pattern must stay in a range (`RANGE_SENSITIVE`, an integer divisor: integer
/// division by zero fails the run, or an attention mask: 0/1), so that it becomes a fresh graph input, which input
/// generation keeps in range.
pub(super) fn range_sensitive(pg: &Graph, port: &Port) -> bool {
    pg.consumers(&port.name).iter().any(|&(id, slot)| {
        let op = pg.node(id).op.name.as_str();
        RANGE_SENSITIVE.iter().any(|&(o, s)| o == op && s == slot)
            || (matches!(op, "Div" | "Mod") && slot == 1 && port.ty.dtype.is_int())
    }) || crate::compiler::inputs::read_as_mask(pg, &port.name)
}

/// The value an open input of a pattern must hold when the pattern's types follow from it: a ConstantOfShape's
/// shape, given by the type the pattern declares for its output (any other value makes what reads it ill-typed).
pub(super) fn shape_value(pg: &Graph, port: &Port) -> Option<Vec<i64>> {
    pg.consumers(&port.name).iter().find_map(|&(id, slot)| {
        let n = pg.node(id);
        let dims = (n.op.name == "ConstantOfShape" && slot == 0).then(|| pg.tensor_type(&n.outputs[0])?.dims());
        Some(dims??.iter().map(|&d| d as i64).collect())
    })
}

/// For `share` of the tags ([`super::EDGE_SHARE`], or [`super::BROADCAST_EDGE_SHARE`] for a pattern whose
/// constant took another shape): (port, source value, its type, the edge type it gets, the rng its bridge draws
/// from) for one open input of `p` whose edge shape the pattern's ops accept and some preceding value of its dtype
/// can be bridged to; None for the other tags, or when no port qualifies.
pub(super) fn edge_port(
    p: &Pattern,
    preceding: &[(String, TensorType)],
    tag: u64,
    share: f64,
) -> Option<(String, String, TensorType, TensorType, Rng)> {
    use rand::SeedableRng as _;
    let mut erng = Rng::seed_from_u64(tag ^ 0xed6e_5ba9_e000_0001);
    if !erng.random_bool(share) {
        return None;
    }
    let pg = &p.model.graph;
    let mut ports: Vec<&crate::pattern::Port> = p
        .meta
        .inputs
        .iter()
        .filter(|port| pg.inputs.contains(&port.name))
        .filter(|port| !range_sensitive(pg, port))
        .collect();
    while !ports.is_empty() {
        let port = ports.swap_remove(erng.random_range(0..ports.len()));
        let mut kinds = edge_types(&port.ty);
        while !kinds.is_empty() {
            let want = kinds.swap_remove(erng.random_range(0..kinds.len()));
            let mut probe = pg.clone();
            probe.types.insert(port.name.clone(), want.clone().into());
            if check_graph_outputs(&probe).is_none() {
                continue;
            }
            let sources: Vec<&(String, TensorType)> = preceding.iter().filter(|(_, t)| t.dtype == want.dtype).collect();
            if sources.is_empty() {
                continue;
            }
            let (src, src_ty) = sources[erng.random_range(0..sources.len())];
            return Some((port.name.clone(), src.clone(), src_ty.clone(), want, erng));
        }
    }
    None
}

/// Output types of a pattern graph, recomputed by catalog inference (every op must be known).
pub(super) fn check_graph_outputs(g: &Graph) -> Option<HashMap<String, TensorType>> {
    let mut probe = g.clone();
    // only the inputs' types hold: inner and output types are what inference recomputes
    probe.types.retain(|n, _| g.inputs.contains(n));
    let types = crate::ops::infer_types(&probe, true).ok()?;
    let set: HashSet<&String> = g.outputs.iter().collect();
    Some(types.into_iter().filter(|(k, _)| set.contains(k)).collect())
}
