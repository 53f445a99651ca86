//! Optimization-aware synthesis: splice a pattern into a seed graph at a random point (open inputs fed from the
//! preceding context: exact type, abstract type, then `bridges`; open outputs feed the succeeding context or
//! become graph outputs; the result is validated), or into a control-flow body (`branch`). Also where tests come from (`source`), the Relax `recipe`,
//! and which library patterns a campaign can use (`usable`).

use crate::graph::{Graph, Model, Node, Tensor, TensorType};
use crate::ops::{check_graph, Rng};
use crate::pattern::Pattern;
use rand::Rng as _;
use std::collections::{BTreeMap, HashMap, HashSet};

pub mod branch;
pub mod bridges;
pub mod lower;
pub mod recipe;
pub mod relax_usable;
pub mod schedule;
pub mod source;
pub mod usable;

/// How each open input of a pattern was fed (counted in tests and stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feed {
    Exact,
    Abstract,
    Bridge,
    /// A new graph input: for ports whose values must stay in a range (indices, ratios), which context values
    /// would break; the input generator gives them valid values.
    Fresh,
    /// A constant: the value a port must hold for the pattern's own types to hold ([`shape_value`]).
    Constant,
    /// An edge shape on purpose (see [`EDGE_SHARE`]): the port fed, through a bridge, a tensor of its dtype with
    /// every dim 1, or of rank 0, where the pattern's ops accept it (catalog inference decides).
    Edge,
}

/// The share of splices that feed one open input of the pattern an edge shape ([`Feed::Edge`]): fused kernels
/// check ranks and sizes the unfused ops do not, and a pattern's own test rarely has size-1 dims or scalars.
/// Chosen by the splice's tag, apart from the splice's own random stream.
pub const EDGE_SHARE: f64 = 0.125;

/// The edge shapes a port of type `t` may take: every dim 1 (same rank), or rank 0; none that equals `t`.
fn edge_types(t: &TensorType) -> Vec<TensorType> {
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
fn range_sensitive(pg: &Graph, port: &crate::pattern::Port) -> bool {
    pg.consumers(&port.name).iter().any(|&(id, slot)| {
        let op = pg.node(id).op.name.as_str();
        RANGE_SENSITIVE.iter().any(|&(o, s)| o == op && s == slot)
            || (matches!(op, "Div" | "Mod") && slot == 1 && port.ty.dtype.is_int())
    }) || crate::compiler::inputs::read_as_mask(pg, &port.name)
}

/// The value an open input of a pattern must hold when the pattern's types follow from it: a ConstantOfShape's
/// shape, given by the type the pattern declares for its output (any other value makes what reads it ill-typed).
fn shape_value(pg: &Graph, port: &crate::pattern::Port) -> Option<Vec<i64>> {
    pg.consumers(&port.name).iter().find_map(|&(id, slot)| {
        let n = pg.node(id);
        let dims = (n.op.name == "ConstantOfShape" && slot == 0).then(|| pg.tensor_type(&n.outputs[0])?.dims());
        Some(dims??.iter().map(|&d| d as i64).collect())
    })
}

/// What a splice did, for statistics and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpliceInfo {
    pub point: usize,
    pub feeds: Vec<Feed>,
    /// Open outputs connected to a later node's input (the rest became graph outputs).
    pub connected: usize,
    pub bridge_ops: Vec<String>,
}

/// Splices `p` into `seed`. `tag` makes the pattern's value names unique; `point`, when given, overrides the
/// random synthesis point (tests). Errors say why a splice was impossible.
pub fn splice(
    seed: &Model,
    p: &Pattern,
    rng: &mut Rng,
    tag: u64,
    point: Option<usize>,
) -> Result<(Model, SpliceInfo), String> {
    let g = &seed.graph;
    // a seed written at an older opset: its older-form nodes (of an earlier own-opset pattern) by declarations
    let types = check_graph(&crate::ops::since::typed_at(g, seed.opset()), false)
        .map_err(|e| format!("seed does not type-check: {e}"))?;
    let order = g.topo_order().map_err(|e| e.to_string())?;
    let k = point.unwrap_or_else(|| rng.random_range(0..=order.len())).min(order.len());
    let mut info = SpliceInfo { point: k, ..Default::default() };

    // preceding context: graph inputs and outputs of the nodes before the point that depend on them; values
    // computed from constants alone are left out, or constant folding would erase the pattern before its pass
    let mut variable: HashSet<&str> =
        g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)).map(String::as_str).collect();
    for &id in &order {
        let n = g.node(id);
        if n.reads().iter().any(|i| variable.contains(i.as_str())) {
            variable.extend(n.outputs.iter().map(String::as_str));
        }
    }
    let mut preceding: Vec<(String, TensorType)> = Vec::new();
    for n in g.inputs.iter().filter(|i| variable.contains(i.as_str())) {
        if let Some(t) = types.get(n) {
            preceding.push((n.clone(), t.clone()));
        }
    }
    for &id in &order[..k] {
        for o in g.node(id).outputs.iter().filter(|o| variable.contains(o.as_str())) {
            if let Some(t) = types.get(o) {
                preceding.push((o.clone(), t.clone()));
            }
        }
    }
    preceding.retain(|(_, t)| t.dims().is_some_and(|d| d.iter().product::<usize>() > 0));

    let pg = &p.model.graph;
    let rename = |n: &str| if n.is_empty() { String::new() } else { format!("p{tag}_{n}") };
    // a pattern at an older opset: its nodes of an older form (not the same node at opset 20) are typed by its
    // declarations, which hold only for the pattern's own shapes: no abstract reuse then
    let opaque: HashSet<String> = pg
        .node_ids()
        .map(|id| pg.node(id))
        .filter(|n| !crate::ops::since::same_at(n, |v| pg.tensor_type(v).map(|t| t.dtype), p.model.opset()))
        .flat_map(|n| n.outputs.iter().filter(|o| !o.is_empty()).map(|o| rename(o)))
        .collect();
    let mut counter = 0u64;
    let mut fresh = |prefix: &str| {
        counter += 1;
        format!("s{tag}_{prefix}{counter}")
    };
    let mut new_nodes: Vec<Node> = Vec::new();
    let mut new_consts: Vec<(String, Tensor)> = Vec::new();
    // pattern input name -> value that feeds it
    let mut fed: HashMap<String, String> = HashMap::new();
    let mut abstract_types: HashMap<String, TensorType> = HashMap::new();
    let mut fresh_inputs: Vec<(String, TensorType)> = Vec::new();
    let edge = edge_port(p, &preceding, tag);
    // bridges take the forms the spliced model's ai.onnx opset has
    let opset = match seed.opset().max(p.model.opset()) {
        0 => crate::graph::DEFAULT_OPSET,
        o => o,
    };
    for port in p.meta.inputs.iter().filter(|port| pg.inputs.contains(&port.name)) {
        if let Some(v) = shape_value(pg, port) {
            let c = rename(&port.name);
            new_consts.push((c.clone(), Tensor::from_i64(&[v.len()], &v)));
            fed.insert(port.name.clone(), c);
            info.feeds.push(Feed::Constant);
            continue;
        }
        if let Some((name, src, src_ty, want, mut erng)) = edge.as_ref().map(|e| e.clone()).filter(|e| e.0 == port.name)
        {
            if let Some((nodes, consts, out)) = bridges::plan(&src, &src_ty, &want, opset, &mut erng, &mut fresh) {
                info.bridge_ops.extend(nodes.iter().map(|n| n.op.name.clone()));
                new_nodes.extend(nodes);
                new_consts.extend(consts);
                fed.insert(name, out);
                abstract_types.insert(port.name.clone(), want);
                info.feeds.push(Feed::Edge);
                continue;
            }
        }
        if range_sensitive(pg, port) {
            fresh_inputs.push((rename(&port.name), port.ty.clone()));
            info.feeds.push(Feed::Fresh);
            continue;
        }
        let exact: Vec<&(String, TensorType)> = preceding.iter().filter(|(_, t)| *t == port.ty).collect();
        if !exact.is_empty() && rng.random_bool(0.9) {
            fed.insert(port.name.clone(), exact[rng.random_range(0..exact.len())].0.clone());
            info.feeds.push(Feed::Exact);
            continue;
        }
        let a = &port.abstract_ty;
        let abstract_ok: Vec<&(String, TensorType)> = preceding
            .iter()
            .filter(|(_, t)| {
                t.dtype == port.ty.dtype && a.rank.is_none_or(|r| t.rank() == Some(r)) && t.rank() == port.ty.rank()
            })
            .collect();
        if opaque.is_empty() && !abstract_ok.is_empty() && rng.random_bool(0.3) {
            let (n, t) = abstract_ok[rng.random_range(0..abstract_ok.len())];
            fed.insert(port.name.clone(), n.clone());
            abstract_types.insert(port.name.clone(), t.clone());
            info.feeds.push(Feed::Abstract);
            continue;
        }
        if preceding.is_empty() {
            return Err("no value precedes the synthesis point".into());
        }
        let same: Vec<&(String, TensorType)> = preceding.iter().filter(|(_, t)| t.dtype == port.ty.dtype).collect();
        let pool = if same.is_empty() || rng.random_bool(0.2) { preceding.iter().collect::<Vec<_>>() } else { same };
        let (src, src_ty) = pool[rng.random_range(0..pool.len())];
        let Some((nodes, consts, out)) = bridges::plan(src, src_ty, &port.ty, opset, rng, &mut fresh) else {
            // below opset 11 the generic path (reshape, slice or pad, reshape) does not exist: a fresh input
            if opset < bridges::GENERIC_SINCE {
                fresh_inputs.push((rename(&port.name), port.ty.clone()));
                info.feeds.push(Feed::Fresh);
                continue;
            }
            return Err(format!("no bridge from {src_ty} to {}", port.ty));
        };
        info.bridge_ops.extend(nodes.iter().map(|n| n.op.name.clone()));
        new_nodes.extend(nodes);
        new_consts.extend(consts);
        fed.insert(port.name.clone(), out);
        info.feeds.push(Feed::Bridge);
    }

    // abstract reuse changes the pattern's internal shapes: recompute them through the catalog
    let mut out_types: HashMap<String, TensorType> =
        pg.outputs.iter().filter_map(|o| pg.tensor_type(o).map(|t| (o.clone(), t))).collect();
    if !abstract_types.is_empty() {
        let mut probe = pg.clone();
        for (n, t) in &abstract_types {
            probe.types.insert(n.clone(), t.clone().into());
        }
        let inferred = check_graph_outputs(&probe).ok_or("the pattern's ops reject the abstractly reused inputs")?;
        out_types = inferred;
    }

    for (n, t) in &pg.initializers {
        new_consts.push((rename(n), t.clone()));
    }
    let map_in = |i: &String| -> String {
        if i.is_empty() {
            return String::new();
        }
        fed.get(i).cloned().unwrap_or_else(|| rename(i))
    };
    for node in pg.nodes_in_order().map_err(|e| e.to_string())? {
        let mut n = node.clone();
        n.name = rename(&n.name);
        n.inputs = n.inputs.iter().map(map_in).collect();
        n.outputs = n.outputs.iter().map(|o| rename(o)).collect();
        new_nodes.push(n);
    }

    // succeeding context: inputs of the nodes after the point, by type
    let mut replace: HashMap<(usize, usize), String> = HashMap::new();
    let mut new_outputs: Vec<(String, TensorType)> = Vec::new();
    for o in &pg.outputs {
        let t = out_types.get(o).cloned().ok_or_else(|| format!("pattern output '{o}' has no type"))?;
        let name = rename(o);
        let slots: Vec<(usize, usize)> = order[k..]
            .iter()
            .enumerate()
            .flat_map(|(j, &id)| g.node(id).inputs.iter().enumerate().map(move |(s, i)| (k + j, s, i)))
            .filter(|(_, _, i)| !i.is_empty() && types.get(*i) == Some(&t) && !g.initializers.contains_key(*i))
            .filter(|(j, s, _)| !replace.contains_key(&(*j, *s)))
            .map(|(j, s, _)| (j, s))
            .collect();
        if !slots.is_empty() && rng.random_bool(0.8) {
            replace.insert(slots[rng.random_range(0..slots.len())], name);
            info.connected += 1;
        } else {
            new_outputs.push((name, t));
        }
    }

    // assemble: nodes before the point, bridges and pattern, nodes after (rewired)
    let mut out = Graph::new(g.name.clone());
    for i in &g.inputs {
        out.add_input(i, g.types[i].clone());
    }
    for (n, t) in fresh_inputs {
        out.add_input(&n, t);
    }
    for (n, t) in g.initializers.iter().map(|(n, t)| (n.clone(), t.clone())).chain(new_consts) {
        out.add_initializer(&n, t);
    }
    for &id in &order[..k] {
        out.add_node(g.node(id).clone()).map_err(|e| e.to_string())?;
    }
    for n in new_nodes {
        out.add_node(n).map_err(|e| e.to_string())?;
    }
    for (j, &id) in order.iter().enumerate().skip(k) {
        let mut n = g.node(id).clone();
        for (s, inp) in n.inputs.iter_mut().enumerate() {
            if let Some(v) = replace.get(&(j, s)) {
                *inp = v.clone();
            }
        }
        out.add_node(n).map_err(|e| e.to_string())?;
    }
    for o in &g.outputs {
        out.add_output(o, g.types[o].clone());
    }
    for (n, t) in new_outputs {
        out.add_output(&n, t);
    }
    // a pattern output of an older form read by the seed's nodes: declared, so that a later test can type it
    for o in pg.outputs.iter().filter(|o| opaque.contains(&rename(o))) {
        if let Some(t) = out_types.get(o).filter(|_| !out.types.contains_key(&rename(o))) {
            out.types.insert(rename(o), t.clone().into());
        }
    }
    for (n, t) in &g.types {
        if !out.types.contains_key(n) && out.is_defined(n) {
            out.types.insert(n.clone(), t.clone());
        }
    }
    // the pattern's own declared types of its inner values (what ops the catalog does not know, such as
    // Dropout or MatMulInteger, are typed by): they hold unless abstract reuse changed its shapes
    if abstract_types.is_empty() {
        for (n, t) in pg.types.iter().filter(|(n, _)| !pg.inputs.contains(n) && !pg.outputs.contains(n)) {
            let r = rename(n);
            if !out.types.contains_key(&r) && out.is_defined(&r) {
                out.types.insert(r, t.clone());
            }
        }
    }
    // (and so are a base's own older-form nodes, from an earlier test at this opset)
    let typed = crate::ops::since::opaque_where(&out, |n| {
        n.outputs.iter().any(|o| opaque.contains(o)) || crate::ops::since::older_by_declarations(&out, n, opset)
    })
    .map_err(|e| e.to_string())?;
    check_graph(typed.as_ref(), false).map_err(|e| format!("spliced graph is invalid: {e}"))?;

    let mut m = Model::new(out);
    m.ir_version = seed.ir_version.max(p.model.ir_version).min(10);
    let mut opsets: BTreeMap<String, i64> = BTreeMap::new();
    for (d, v) in seed.opsets.iter().chain(&p.model.opsets) {
        // "ai.onnx" and "" name one domain: keep one entry, or a runtime may pick the older version
        let d = if d == "ai.onnx" { String::new() } else { d.clone() };
        let e = opsets.entry(d).or_insert(*v);
        *e = (*e).max(*v);
    }
    m.opsets = opsets;
    // the seed may itself be an earlier synthesized test with model-local functions: keep both sets
    m.functions = seed.functions.clone();
    for f in &p.model.functions {
        if !m.functions.contains(f) {
            m.functions.push(f.clone());
        }
    }
    m.producer_name = "oatest synth".into();
    Ok((m, info))
}

/// For [`EDGE_SHARE`] of the tags: (port, source value, its type, the edge type it gets, the rng its bridge
/// draws from) for one open input of `p` whose edge shape the pattern's ops accept and some preceding value of
/// its dtype can be bridged to; None for the other tags, or when no port qualifies.
fn edge_port(
    p: &Pattern,
    preceding: &[(String, TensorType)],
    tag: u64,
) -> Option<(String, String, TensorType, TensorType, Rng)> {
    use rand::SeedableRng as _;
    let mut erng = Rng::seed_from_u64(tag ^ 0xed6e_5ba9_e000_0001);
    if !erng.random_bool(EDGE_SHARE) {
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
fn check_graph_outputs(g: &Graph) -> Option<HashMap<String, TensorType>> {
    let mut probe = g.clone();
    // only the inputs' types hold: inner and output types are what inference recomputes
    probe.types.retain(|n, _| g.inputs.contains(n));
    let types = crate::ops::infer_types(&probe, true).ok()?;
    let set: HashSet<&String> = g.outputs.iter().collect();
    Some(types.into_iter().filter(|(k, _)| set.contains(k)).collect())
}

#[cfg(test)]
mod tests;
