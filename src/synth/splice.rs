//! Splicing a pattern into a seed graph at a point of its topological order. Each step says what it changes as
//! [`Edit`] values, as reduction does, and [`apply`] makes the edits in one place:
//! 1. the preceding context: the values before the point that depend on the graph's inputs ([`preceding`]);
//! 2. each open input of the pattern fed: a shape constant, an edge shape, a fresh input, an exact or abstract
//!    reuse of a preceding value, or a bridge from one ([`feed_ports`]);
//! 3. the pattern's constants and nodes, renamed by the splice's tag ([`pattern_edits`]);
//! 4. each open output read by a later node's input of its type, or made a graph output ([`connect_outputs`]);
//!    for a share of tags, an inner value made a graph output too ([`super::vary`]);
//! 5. the edits applied, the graph checked, the model's opsets and functions merged ([`model_of`]).

use super::ports::{check_graph_outputs, edge_port, range_sensitive, shape_value};
use super::vary::Variation;
use super::{bridges, Feed, SpliceInfo};
use crate::graph::{Graph, Model, Node, Tensor, TensorType, ValueType};
use crate::ops::{check_graph, Rng};
use crate::pattern::Pattern;
use rand::Rng as _;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Why a splice was impossible.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl From<String> for Refused {
    fn from(why: String) -> Refused {
        Refused(why)
    }
}

impl From<&str> for Refused {
    fn from(why: &str) -> Refused {
        Refused(why.to_string())
    }
}

/// One change a splice makes to the seed graph ([`apply`]).
#[derive(Clone, Debug)]
enum Edit {
    /// A new graph input, after the seed's.
    Input(String, TensorType),
    /// A new initializer, after the seed's.
    Constant(String, Tensor),
    /// A node inserted at the splice point: bridges first, then the pattern's nodes.
    Node(Node),
    /// Input `slot` of the seed's node at position `at` of its topological order reads `value` instead.
    Rewire { at: usize, slot: usize, value: String },
    /// A new graph output, after the seed's.
    Output(String, TensorType),
    /// A declared type for a value the splice added, unless it has one; `defined`: only if the graph defines the
    /// value. Declarations that need not be defined come before the seed's own types, the others after.
    Declare { name: String, ty: ValueType, defined: bool },
}

/// The names a splice gives: the pattern's values renamed by the tag, fresh names for bridge values.
struct Names {
    tag: u64,
    counter: u64,
}

impl Names {
    fn rename(&self, n: &str) -> String {
        if n.is_empty() {
            String::new()
        } else {
            format!("p{}_{n}", self.tag)
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("s{}_{prefix}{}", self.tag, self.counter)
    }
}

/// Splices `p` into `seed`. `tag` makes the pattern's value names unique; `point`, when given, overrides the
/// random synthesis point (tests). Errors say why a splice was impossible.
pub fn splice(
    seed: &Model,
    p: &Pattern,
    rng: &mut Rng,
    tag: u64,
    point: Option<usize>,
) -> Result<(Model, SpliceInfo), Refused> {
    splice_varied(seed, p, rng, tag, point, &[])
}

/// [`splice`] with the variations `vary` allows ([`super::vary`]; each for its share of tags).
pub fn splice_varied(
    seed: &Model,
    p: &Pattern,
    rng: &mut Rng,
    tag: u64,
    point: Option<usize>,
    vary: &[Variation],
) -> Result<(Model, SpliceInfo), Refused> {
    // variations: another value of one attribute, per-axis quantization, the pattern in another element type its
    // ops accept, one constant in another broadcasting shape, one constant in another form
    let reattributed = vary.contains(&Variation::Attr).then(|| super::vary_attrs::reattributed(p, tag)).flatten();
    let p = reattributed.as_ref().unwrap_or(p);
    let per_axis = vary.contains(&Variation::PerAxis).then(|| super::vary_axis::per_axis(p, tag)).flatten();
    let p = per_axis.as_ref().unwrap_or(p);
    let retyped = vary.contains(&Variation::Dtype).then(|| super::vary::retyped(p, tag)).flatten();
    let p = retyped.as_ref().unwrap_or(p);
    let broadcast = vary.contains(&Variation::Broadcast).then(|| super::vary_broadcast::broadcast(p, tag)).flatten();
    let p = broadcast.as_ref().unwrap_or(p);
    let reformed = vary.contains(&Variation::Constant).then(|| super::vary_const::reformed(p, tag)).flatten();
    let p = reformed.as_ref().unwrap_or(p);
    let g = &seed.graph;
    // a seed written at an older opset: its older-form nodes (of an earlier own-opset pattern) by declarations
    let types = check_graph(&crate::ops::since::typed_at(g, seed.opset()), false)
        .map_err(|e| Refused(format!("seed does not type-check: {e}")))?;
    let order = g.topo_order().map_err(|e| Refused(e.to_string()))?;
    let k = point.unwrap_or_else(|| rng.random_range(0..=order.len())).min(order.len());
    let mut info = SpliceInfo { point: k, ..Default::default() };
    if reattributed.is_some() {
        info.variations.push(Variation::Attr);
    }
    if retyped.is_some() {
        info.variations.push(Variation::Dtype);
    }
    if per_axis.is_some() {
        info.variations.push(Variation::PerAxis);
    }
    if reformed.is_some() {
        info.variations.push(Variation::Constant);
    }
    if broadcast.is_some() {
        info.variations.push(Variation::Broadcast);
    }
    let preceding = preceding(g, &order, k, &types);
    let pg = &p.model.graph;
    let mut names = Names { tag, counter: 0 };
    // a pattern at an older opset: its nodes of an older form (not the same node at opset 20) are typed by its
    // declarations, which hold only for the pattern's own shapes: no abstract reuse then
    let opaque: HashSet<String> = pg
        .node_ids()
        .map(|id| pg.node(id))
        .filter(|n| !crate::ops::since::same_at(n, |v| pg.tensor_type(v).map(|t| t.dtype), p.model.opset()))
        .flat_map(|n| n.outputs.iter().filter(|o| !o.is_empty()).map(|o| names.rename(o)))
        .collect();
    // bridges take the forms the spliced model's ai.onnx opset has
    let opset = match seed.opset().max(p.model.opset()) {
        0 => crate::graph::DEFAULT_OPSET,
        o => o,
    };
    let mut edits = Vec::new();
    let fed = feed_ports(p, &preceding, opaque.is_empty(), opset, rng, &mut names, &mut info, &mut edits)?;
    // abstract reuse changes the pattern's internal shapes: recompute them through the catalog
    let mut out_types: HashMap<String, TensorType> =
        pg.outputs.iter().filter_map(|o| pg.tensor_type(o).map(|t| (o.clone(), t))).collect();
    if !fed.abstract_types.is_empty() {
        let mut probe = pg.clone();
        for (n, t) in &fed.abstract_types {
            probe.types.insert(n.clone(), t.clone().into());
        }
        out_types = check_graph_outputs(&probe).ok_or("the pattern's ops reject the abstractly reused inputs")?;
    }
    pattern_edits(pg, &fed.by_port, &names, &mut edits)?;
    connect_outputs(g, &order, k, &types, pg, &out_types, &names, rng, &mut info, &mut edits)?;
    // a variation: an inner value of the pattern also read as a graph output (not for older-form nodes)
    let extra_reader = vary.contains(&Variation::ExtraReader) && opaque.is_empty();
    if let Some(reader) = extra_reader.then(|| super::vary::extra_reader(pg, &fed.abstract_types, tag)).flatten() {
        read_again(g, &order, k, &types, reader, &names, &mut edits);
        info.variations.push(Variation::ExtraReader);
    }
    // a pattern output of an older form read by the seed's nodes: declared, so that a later test can type it
    for o in pg.outputs.iter().filter(|o| opaque.contains(&names.rename(o))) {
        if let Some(t) = out_types.get(o) {
            edits.push(Edit::Declare { name: names.rename(o), ty: t.clone().into(), defined: false });
        }
    }
    // the pattern's own declared types of its inner values (what ops the catalog does not know, such as
    // Dropout or MatMulInteger, are typed by): they hold unless abstract reuse changed its shapes
    if fed.abstract_types.is_empty() {
        for (n, t) in pg.types.iter().filter(|(n, _)| !pg.inputs.contains(n) && !pg.outputs.contains(n)) {
            edits.push(Edit::Declare { name: names.rename(n), ty: t.clone(), defined: true });
        }
    }
    let out = apply(g, &order, k, edits)?;
    // (and so are a base's own older-form nodes, from an earlier test at this opset)
    let typed = crate::ops::since::opaque_where(&out, |n| {
        n.outputs.iter().any(|o| opaque.contains(o)) || crate::ops::since::older_by_declarations(&out, n, opset)
    })
    .map_err(|e| Refused(e.to_string()))?;
    check_graph(typed.as_ref(), false).map_err(|e| Refused(format!("spliced graph is invalid: {e}")))?;
    Ok((model_of(out, seed, p), info))
}

/// The preceding context of point `k`: graph inputs, and outputs of the nodes before the point, that depend on
/// the graph's inputs (values computed from constants alone are left out, or constant folding would erase the
/// pattern before its pass), with a known non-empty shape.
fn preceding(
    g: &Graph,
    order: &[crate::graph::NodeId],
    k: usize,
    types: &HashMap<String, TensorType>,
) -> Vec<(String, TensorType)> {
    let mut variable: HashSet<&str> =
        g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)).map(String::as_str).collect();
    for &id in order {
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
    preceding
}

/// How the pattern's open inputs are fed.
struct Fed {
    /// Pattern input name -> the value that feeds it.
    by_port: HashMap<String, String>,
    /// Ports fed a value of another shape (abstract reuse, an edge shape): their types.
    abstract_types: HashMap<String, TensorType>,
}

/// Feeds each open input of the pattern (see [`Feed`]), in the pattern's order, pushing the constants, fresh
/// inputs and bridge nodes that takes. `may_abstract`: abstract reuse is allowed (no older-form nodes).
#[allow(clippy::too_many_arguments)]
fn feed_ports(
    p: &Pattern,
    preceding: &[(String, TensorType)],
    may_abstract: bool,
    opset: i64,
    rng: &mut Rng,
    names: &mut Names,
    info: &mut SpliceInfo,
    edits: &mut Vec<Edit>,
) -> Result<Fed, Refused> {
    let pg = &p.model.graph;
    let mut fed = Fed { by_port: HashMap::new(), abstract_types: HashMap::new() };
    let share = match info.variations.contains(&Variation::Broadcast) {
        true => super::BROADCAST_EDGE_SHARE,
        false => super::EDGE_SHARE,
    };
    let edge = edge_port(p, preceding, names.tag, share);
    let bridge = |nodes: Vec<Node>, consts: Vec<(String, Tensor)>, info: &mut SpliceInfo, edits: &mut Vec<Edit>| {
        info.bridge_ops.extend(nodes.iter().map(|n| n.op.name.clone()));
        edits.extend(nodes.into_iter().map(Edit::Node));
        edits.extend(consts.into_iter().map(|(n, t)| Edit::Constant(n, t)));
    };
    for port in p.meta.inputs.iter().filter(|port| pg.inputs.contains(&port.name)) {
        if let Some(v) = shape_value(pg, port) {
            let c = names.rename(&port.name);
            edits.push(Edit::Constant(c.clone(), Tensor::from_i64(&[v.len()], &v)));
            fed.by_port.insert(port.name.clone(), c);
            info.feeds.push(Feed::Constant);
            continue;
        }
        if let Some((name, src, src_ty, want, mut erng)) = edge.as_ref().map(|e| e.clone()).filter(|e| e.0 == port.name)
        {
            let planned = bridges::plan(&src, &src_ty, &want, opset, &mut erng, &mut |s| names.fresh(s));
            if let Some((nodes, consts, out)) = planned {
                bridge(nodes, consts, info, edits);
                fed.by_port.insert(name, out);
                fed.abstract_types.insert(port.name.clone(), want);
                info.feeds.push(Feed::Edge);
                continue;
            }
        }
        if range_sensitive(pg, port) {
            edits.push(Edit::Input(names.rename(&port.name), port.ty.clone()));
            info.feeds.push(Feed::Fresh);
            continue;
        }
        let exact: Vec<&(String, TensorType)> = preceding.iter().filter(|(_, t)| *t == port.ty).collect();
        if !exact.is_empty() && rng.random_bool(0.9) {
            fed.by_port.insert(port.name.clone(), exact[rng.random_range(0..exact.len())].0.clone());
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
        if may_abstract && !abstract_ok.is_empty() && rng.random_bool(0.3) {
            let (n, t) = abstract_ok[rng.random_range(0..abstract_ok.len())];
            fed.by_port.insert(port.name.clone(), n.clone());
            fed.abstract_types.insert(port.name.clone(), t.clone());
            info.feeds.push(Feed::Abstract);
            continue;
        }
        if preceding.is_empty() {
            return Err("no value precedes the synthesis point".into());
        }
        let same: Vec<&(String, TensorType)> = preceding.iter().filter(|(_, t)| t.dtype == port.ty.dtype).collect();
        let pool = if same.is_empty() || rng.random_bool(0.2) { preceding.iter().collect::<Vec<_>>() } else { same };
        let (src, src_ty) = pool[rng.random_range(0..pool.len())];
        let Some((nodes, consts, out)) = bridges::plan(src, src_ty, &port.ty, opset, rng, &mut |s| names.fresh(s))
        else {
            // below opset 11 the generic path (reshape, slice or pad, reshape) does not exist: a fresh input
            if opset < bridges::GENERIC_SINCE {
                edits.push(Edit::Input(names.rename(&port.name), port.ty.clone()));
                info.feeds.push(Feed::Fresh);
                continue;
            }
            return Err(Refused(format!("no bridge from {src_ty} to {}", port.ty)));
        };
        bridge(nodes, consts, info, edits);
        fed.by_port.insert(port.name.clone(), out);
        info.feeds.push(Feed::Bridge);
    }
    Ok(fed)
}

/// The pattern's initializers and nodes, renamed, its open inputs reading what feeds them.
fn pattern_edits(
    pg: &Graph,
    fed: &HashMap<String, String>,
    names: &Names,
    edits: &mut Vec<Edit>,
) -> Result<(), Refused> {
    for (n, t) in &pg.initializers {
        edits.push(Edit::Constant(names.rename(n), t.clone()));
    }
    let map_in = |i: &String| -> String {
        if i.is_empty() {
            return String::new();
        }
        fed.get(i).cloned().unwrap_or_else(|| names.rename(i))
    };
    for node in pg.nodes_in_order().map_err(|e| Refused(e.to_string()))? {
        let mut n = node.clone();
        n.name = names.rename(&n.name);
        n.inputs = n.inputs.iter().map(map_in).collect();
        n.outputs = n.outputs.iter().map(|o| names.rename(o)).collect();
        edits.push(Edit::Node(n));
    }
    Ok(())
}

/// Each open output of the pattern read, in most splices, by one input of a seed node after the point that
/// takes its type (the succeeding context), else made a graph output.
#[allow(clippy::too_many_arguments)]
fn connect_outputs(
    g: &Graph,
    order: &[crate::graph::NodeId],
    k: usize,
    types: &HashMap<String, TensorType>,
    pg: &Graph,
    out_types: &HashMap<String, TensorType>,
    names: &Names,
    rng: &mut Rng,
    info: &mut SpliceInfo,
    edits: &mut Vec<Edit>,
) -> Result<(), Refused> {
    let mut taken: HashSet<(usize, usize)> = HashSet::new();
    for o in &pg.outputs {
        let t = out_types.get(o).cloned().ok_or_else(|| Refused(format!("pattern output '{o}' has no type")))?;
        let name = names.rename(o);
        let slots = free_slots(g, order, k, types, &t, &taken);
        if !slots.is_empty() && rng.random_bool(0.8) {
            let (at, slot) = slots[rng.random_range(0..slots.len())];
            taken.insert((at, slot));
            edits.push(Edit::Rewire { at, slot, value: name });
            info.connected += 1;
        } else {
            edits.push(Edit::Output(name, t));
        }
    }
    Ok(())
}

/// The inputs (node position in `order`, input slot) of the seed's nodes after point `k` that read a value of type
/// `t` (no initializer) and that no edit rewired yet (`taken`).
fn free_slots(
    g: &Graph,
    order: &[crate::graph::NodeId],
    k: usize,
    types: &HashMap<String, TensorType>,
    t: &TensorType,
    taken: &HashSet<(usize, usize)>,
) -> Vec<(usize, usize)> {
    order[k..]
        .iter()
        .enumerate()
        .flat_map(|(j, &id)| g.node(id).inputs.iter().enumerate().map(move |(s, i)| (k + j, s, i)))
        .filter(|(_, _, i)| !i.is_empty() && types.get(*i) == Some(t) && !g.initializers.contains_key(*i))
        .filter(|(j, s, _)| !taken.contains(&(*j, *s)))
        .map(|(j, s, _)| (j, s))
        .collect()
}

/// The variation's extra reader of an inner pattern value ([`super::vary::extra_reader`]): a later seed node's
/// free input of its type reads it, or, when it is to be returned or no such input is free, a new graph output.
fn read_again(
    g: &Graph,
    order: &[crate::graph::NodeId],
    k: usize,
    types: &HashMap<String, TensorType>,
    reader: super::vary::Reader,
    names: &Names,
    edits: &mut Vec<Edit>,
) {
    let taken: HashSet<(usize, usize)> = edits
        .iter()
        .filter_map(|e| match e {
            Edit::Rewire { at, slot, .. } => Some((*at, *slot)),
            _ => None,
        })
        .collect();
    let slots = free_slots(g, order, k, types, &reader.ty, &taken);
    let value = names.rename(&reader.value);
    match (reader.by_node, slots.len()) {
        (true, n) if n > 0 => {
            let (at, slot) = slots[reader.pick % n];
            edits.push(Edit::Rewire { at, slot, value });
        }
        _ => edits.push(Edit::Output(value, reader.ty)),
    }
}

/// The seed graph with `edits` made: inputs, initializers, the nodes before point `k`, the inserted nodes, the
/// nodes after the point (rewired), outputs, then types, each kind in the order the edits give.
fn apply(g: &Graph, order: &[crate::graph::NodeId], k: usize, edits: Vec<Edit>) -> Result<Graph, Refused> {
    let mut out = Graph::new(g.name.clone());
    for i in &g.inputs {
        out.add_input(i, g.types[i].clone());
    }
    let (mut constants, mut nodes, mut outputs, mut declared) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut rewired: HashMap<(usize, usize), String> = HashMap::new();
    for e in edits {
        match e {
            Edit::Input(n, t) => out.add_input(&n, t),
            Edit::Constant(n, t) => constants.push((n, t)),
            Edit::Node(n) => nodes.push(n),
            Edit::Rewire { at, slot, value } => {
                rewired.insert((at, slot), value);
            }
            Edit::Output(n, t) => outputs.push((n, t)),
            Edit::Declare { name, ty, defined } => declared.push((name, ty, defined)),
        }
    }
    for (n, t) in g.initializers.iter().map(|(n, t)| (n.clone(), t.clone())).chain(constants) {
        out.add_initializer(&n, t);
    }
    let bad = |e: crate::graph::GraphError| Refused(e.to_string());
    for &id in &order[..k] {
        out.add_node(g.node(id).clone()).map_err(bad)?;
    }
    for n in nodes {
        out.add_node(n).map_err(bad)?;
    }
    for (j, &id) in order.iter().enumerate().skip(k) {
        let mut n = g.node(id).clone();
        for (s, inp) in n.inputs.iter_mut().enumerate() {
            if let Some(v) = rewired.get(&(j, s)) {
                *inp = v.clone();
            }
        }
        out.add_node(n).map_err(bad)?;
    }
    for o in &g.outputs {
        out.add_output(o, g.types[o].clone());
    }
    for (n, t) in outputs {
        out.add_output(&n, t);
    }
    let declare = |out: &mut Graph, name: String, ty: ValueType, defined: bool| {
        if !out.types.contains_key(&name) && (!defined || out.is_defined(&name)) {
            out.types.insert(name, ty);
        }
    };
    for (name, ty, _) in declared.iter().filter(|d| !d.2).cloned() {
        declare(&mut out, name, ty, false);
    }
    for (n, t) in &g.types {
        declare(&mut out, n.clone(), t.clone(), true);
    }
    for (name, ty, _) in declared.into_iter().filter(|d| d.2) {
        declare(&mut out, name, ty, true);
    }
    Ok(out)
}

/// The spliced graph as a model: the newer IR version, every opset import at its newer version, both models'
/// local functions.
fn model_of(out: Graph, seed: &Model, p: &Pattern) -> Model {
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
    m
}
