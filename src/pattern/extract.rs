//! Extraction: pair each captured graph with the passes that really modified it (pass-call instrumentation),
//! isolate each pass's rewrite (every other fired pass disabled, the optimized graph saved), diff before/after to
//! find the rewritten region, cut block- and subgraph-level patterns, and keep those that, closed with fresh
//! graph inputs, still fire their pass.

use super::{abstract_type, structural_key, Granularity, Pattern, PatternMeta, Port, Provenance, FORMAT};
pub use crate::compiler::rules::container_of;
use crate::compiler::rules::RULE_CONTAINERS;
use crate::compiler::worker::Worker;
use crate::compiler::{inputs, Config, Level, NamedTensor, Status};
use crate::graph::{onnx, DType, Graph, Model, Node, NodeId, OpId, TensorType, ValueType};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Which granularities to cut for a pass (data; passes not listed get both).
pub const GRANULARITY: &[(&str, &[Granularity])] = &[
    // these need a duplicate or a neighbour outside the rewritten nodes to fire
    ("CommonSubexpressionElimination", &[Granularity::Subgraph]),
    ("ConstantSharing", &[Granularity::Subgraph]),
];

pub fn granularities(pass: &str) -> &'static [Granularity] {
    GRANULARITY
        .iter()
        .find(|(p, _)| *p == pass)
        .map(|(_, g)| *g)
        .unwrap_or(&[Granularity::Block, Granularity::Subgraph])
}

fn is_container(pass: &str) -> bool {
    RULE_CONTAINERS.iter().any(|(c, _)| *c == pass)
}

/// Original nodes the optimized graph no longer has unchanged (same op, inputs and outputs): the region the
/// optimization rewrote.
pub fn diff_region(original: &Graph, optimized: &Graph) -> Vec<NodeId> {
    let key = |g: &Graph, id: NodeId| {
        let n = g.node(id);
        (n.op.clone(), n.inputs.clone(), n.outputs.clone())
    };
    let kept: HashSet<_> = optimized.node_ids().map(|id| key(optimized, id)).collect();
    let mut region: Vec<NodeId> = original.node_ids().filter(|&id| !kept.contains(&key(original, id))).collect();
    region.sort();
    region
}

/// The nodes a pattern of granularity `g` keeps around `region`.
pub fn expand(original: &Graph, region: &[NodeId], g: Granularity) -> BTreeSet<NodeId> {
    let mut set: BTreeSet<NodeId> = region.iter().copied().collect();
    if g == Granularity::Context {
        let sub = expand(original, region, Granularity::Subgraph);
        let producers: Vec<NodeId> = sub.iter().copied().filter(|id| !region.contains(id)).collect();
        set.extend(&sub);
        for id in producers {
            for o in &original.node(id).outputs {
                set.extend(original.consumers(o).into_iter().map(|(c, _)| c));
            }
        }
    } else if g == Granularity::Subgraph {
        for &id in region {
            let n = original.node(id);
            set.extend(n.inputs.iter().filter_map(|i| original.producer(i)).map(|o| o.node));
            for o in &n.outputs {
                set.extend(original.consumers(o).into_iter().map(|(c, _)| c));
            }
        }
    }
    set
}

/// A closed graph of `nodes`: their constants, open inputs as graph inputs, open outputs (values read outside
/// the set, or the original graph's outputs; else the set's leaves) as graph outputs. `None` when a port's type
/// is unknown.
pub fn cut(original: &Graph, nodes: &BTreeSet<NodeId>, types: &HashMap<String, TensorType>) -> Option<Graph> {
    let mut g = Graph::new("oatest_pattern");
    let order: Vec<NodeId> = original.topo_order().ok()?.into_iter().filter(|id| nodes.contains(id)).collect();
    let produced: HashSet<&str> =
        order.iter().flat_map(|&id| original.node(id).outputs.iter().map(String::as_str)).collect();
    let mut seen = HashSet::new();
    for &id in &order {
        for i in original.node(id).inputs.iter().filter(|i| !i.is_empty() && !produced.contains(i.as_str())) {
            if !seen.insert(i.clone()) {
                continue;
            }
            match original.initializers.get(i) {
                Some(t) if !original.inputs.contains(i) => g.add_initializer(i, t.clone()),
                _ => g.add_input(i, types.get(i)?.clone()),
            }
        }
    }
    for &id in &order {
        let node = original.node(id);
        // values of ops the catalog does not know keep their run types (splicing types every value)
        if crate::ops::lookup(&node.op.domain, &node.op.name).is_none() {
            for o in node.outputs.iter().filter_map(|o| Some((o, types.get(o)?))) {
                g.types.insert(o.0.clone(), o.1.clone().into());
            }
        }
        g.add_node(node.clone()).ok()?;
    }
    let read_outside = |v: &str| {
        original.outputs.iter().any(|o| o == v) || original.consumers(v).iter().any(|(c, _)| !nodes.contains(c))
    };
    let mut outs: Vec<&str> = produced.iter().copied().filter(|v| read_outside(v)).collect();
    if outs.is_empty() {
        let read_inside: HashSet<&str> =
            order.iter().flat_map(|&id| original.node(id).inputs.iter().map(String::as_str)).collect();
        outs = produced.iter().copied().filter(|v| !read_inside.contains(v)).collect();
    }
    outs.sort_by_key(|v| order.iter().position(|&id| original.node(id).outputs.iter().any(|o| o == v)));
    for v in outs {
        g.add_output(v, types.get(v)?.clone());
    }
    g.validate().ok()?;
    Some(g)
}

/// The ports of `names` (graph inputs or outputs) that have a tensor type, abstract by their readers' ops.
pub(crate) fn ports(g: &Graph, names: &[String], consumers_of: impl Fn(&str) -> Vec<String>) -> Vec<Port> {
    names
        .iter()
        .filter_map(|n| {
            let ty = g.tensor_type(n)?;
            let cons = consumers_of(n);
            let cons: Vec<&str> = cons.iter().map(String::as_str).collect();
            Some(Port { name: n.clone(), abstract_ty: abstract_type(&ty, &cons), ty })
        })
        .collect()
}

/// Builds the pattern (metadata included) from a cut graph.
pub fn make_pattern(
    original: &Model,
    g: Graph,
    pass: &str,
    gran: Granularity,
    version: &str,
    provenance: Provenance,
) -> Pattern {
    let consumers_in = |n: &str| g.consumers(n).into_iter().map(|(id, _)| g.node(id).op.name.clone()).collect();
    let inputs = ports(&g, &g.inputs.clone(), consumers_in);
    let outputs = ports(&g, &g.outputs.clone(), |_| Vec::new());
    let key = structural_key(pass, &g);
    let mut model = Model::new(g);
    model.ir_version = original.ir_version.min(10);
    model.opsets = original.opsets.clone();
    model.functions = original.functions.clone();
    model.producer_name = "oatest extract".into();
    // the settings a compiler's test optimized the model with (ort-transformers: `oatest.model_type`, ...)
    model.metadata = original.metadata.iter().filter(|(k, _)| super::is_setting(k)).cloned().collect();
    let meta = PatternMeta {
        format: FORMAT,
        compiler: "ort".into(),
        compiler_version: version.into(),
        pass: pass.into(),
        granularity: gran,
        inputs,
        outputs,
        provenance: vec![provenance],
        key,
    };
    Pattern { model, meta }
}

/// Concrete types of every value, from declarations and from one unoptimized run with every node output
/// exposed as a graph output (from the catalog's inference when that run fails).
pub fn value_types(w: &mut Worker, m: &Model, feeds: &[NamedTensor]) -> HashMap<String, TensorType> {
    let g = &m.graph;
    let mut types: HashMap<String, TensorType> = HashMap::new();
    for (n, vt) in &g.types {
        if let ValueType::Tensor(t) = vt {
            if t.dims().is_some() {
                types.insert(n.clone(), t.clone());
            }
        }
    }
    for (n, t) in &g.initializers {
        types.insert(n.clone(), t.ty());
    }
    for f in feeds {
        types.insert(f.name.clone(), f.tensor.ty());
    }
    let mut exposed = m.clone();
    let outs: Vec<String> = g
        .node_ids()
        .flat_map(|id| g.node(id).outputs.clone())
        .filter(|o| !o.is_empty() && !g.outputs.contains(o))
        .collect();
    for o in outs {
        exposed.graph.outputs.push(o.clone());
        exposed.graph.types.entry(o).or_insert(ValueType::Opaque(Vec::new()));
    }
    let o = w.run(&onnx::encode_model(&exposed), feeds, &Config::level(Level::Disable));
    if o.status == Status::Ok {
        for t in o.outputs {
            types.insert(t.name, t.tensor.ty());
        }
        return types;
    }
    // a model whose run fails on these inputs (an integer Div by a zero its Cast made: fusion/div_mul.onnx) is
    // typed by the catalog, its inputs taking the fed shapes; ops the catalog does not know keep declared types
    let mut fed = g.clone();
    for f in feeds {
        fed.types.insert(f.name.clone(), ValueType::Tensor(f.tensor.ty()));
    }
    if let Ok(inferred) = crate::ops::infer_types(&fed, false) {
        for (n, t) in inferred.into_iter().filter(|(_, t)| t.dims().is_some()) {
            types.entry(n).or_insert(t);
        }
    }
    types
}

/// What extraction found in one model.
#[derive(Default)]
pub struct ModelResult {
    /// Passes that modified the graph (optimizing passes only).
    pub pairs: Vec<String>,
    pub patterns: Vec<Pattern>,
    /// Candidates cut but not verified.
    pub rejected: usize,
    pub notes: Vec<String>,
}

/// Extracts patterns from one captured model.
pub fn extract_model(
    w: &mut Worker,
    bytes: &[u8],
    provenance: &Provenance,
    tmp: &std::path::Path,
) -> anyhow::Result<ModelResult> {
    let model = onnx::decode_model(bytes)?;
    let feeds = inputs::generate(&model.graph, 0).unwrap_or_default();
    let mut res = ModelResult::default();
    // pairing: passes that fired at `all` but not in the unoptimized (always-on) configuration
    let base: HashSet<String> = w.run(bytes, &feeds, &Config::level(Level::Disable)).passes_fired.into_iter().collect();
    // `all`, or `all+NAME` for a model of an opt-in pass that asks for its named configuration
    let mut all = crate::compiler::named::all_for(&model.metadata)?;
    all.attribute_rules = true;
    let fired: Vec<String> =
        w.run(bytes, &feeds, &all).passes_fired.into_iter().filter(|p| !base.contains(p)).collect();
    let passes: Vec<&String> = fired.iter().filter(|p| !is_container(p)).collect();
    if passes.is_empty() {
        return Ok(res);
    }
    let types = value_types(w, &model, &feeds);
    for pass in passes {
        res.pairs.push(pass.clone());
        let Some(optimized) = isolate(w, bytes, &all, &fired, pass, tmp) else {
            res.notes.push(format!("{pass}: no isolated rewrite"));
            continue;
        };
        let region = diff_region(&model.graph, &optimized.graph);
        if region.is_empty() {
            res.notes.push(format!("{pass}: rewrite left every node unchanged"));
            continue;
        }
        // a pass call that rewrote several unconnected regions (DivMulFusion on div_mul.onnx's float and int64
        // Div -> Mul pairs) gives one pattern per region; the whole rewrite is cut only when none of them fires
        let rewired = rewired(&model.graph, &optimized.graph, &region);
        let parts = regions(&model.graph, &region, &rewired);
        let mut fired_alone = false;
        if parts.len() > 1 {
            for part in &parts {
                let sub_rewired = rewired.iter().copied().filter(|id| part.contains(id)).collect();
                fired_alone |= cut_region(w, &model, &types, pass, provenance, part, &sub_rewired, &mut res) > 0;
            }
        }
        if !fired_alone {
            cut_region(w, &model, &types, pass, provenance, &region, &rewired, &mut res);
        }
    }
    Ok(res)
}

/// Cuts the patterns of one rewritten region (block and subgraph, the context cut when neither fires) into `res`;
/// returns how many were verified.
#[allow(clippy::too_many_arguments)]
fn cut_region(
    w: &mut Worker,
    model: &Model,
    types: &HashMap<String, TensorType>,
    pass: &str,
    provenance: &Provenance,
    region: &[NodeId],
    rewired: &BTreeSet<NodeId>,
    res: &mut ModelResult,
) -> usize {
    let before = res.patterns.len();
    for &gran in granularities(pass).iter().chain([Granularity::Context].iter()) {
        // the context cut only when no smaller one still fires
        if gran == Granularity::Context && res.patterns.len() > before {
            break;
        }
        let nodes = expand(&model.graph, region, gran);
        if let Some(p) = cut_verified(w, model, &nodes, types, pass, gran, provenance) {
            res.patterns.push(p);
            continue;
        }
        // a block holding readers the pass only rewired (EliminateSlice's next Slice, whose ends a graph input
        // gives) is cut again without them, with the rewritten nodes' producers (a removal needs its input
        // produced by a node): a subgraph pattern without the rewired readers
        let core = core_subgraph(&model.graph, region, rewired);
        match (gran == Granularity::Block && core.iter().any(|id| !nodes.contains(id)))
            .then(|| cut_verified(w, model, &core, types, pass, Granularity::Subgraph, provenance))
            .flatten()
        {
            Some(p) => res.patterns.push(p),
            None => res.rejected += 1,
        }
    }
    res.patterns.len() - before
}

/// The regions of `region` that are not connected to each other through nodes the pass rewrote (a node it only
/// `rewired` connects nothing), each with the rewired nodes next to it alone, in node order; one region (all of
/// `region`) when there are no two.
pub fn regions(original: &Graph, region: &[NodeId], rewired: &BTreeSet<NodeId>) -> Vec<Vec<NodeId>> {
    let rewritten: Vec<NodeId> = region.iter().copied().filter(|id| !rewired.contains(id)).collect();
    let neighbours = |id: NodeId| -> Vec<NodeId> {
        let n = original.node(id);
        let producers = n.inputs.iter().filter_map(|i| original.producer(i)).map(|o| o.node);
        let readers = n.outputs.iter().flat_map(|o| original.consumers(o)).map(|(c, _)| c);
        producers.chain(readers).filter(|c| *c != id).collect()
    };
    // connected components of the rewritten nodes
    let mut part_of: HashMap<NodeId, usize> = HashMap::new();
    let mut parts: Vec<Vec<NodeId>> = Vec::new();
    for &start in &rewritten {
        if part_of.contains_key(&start) {
            continue;
        }
        let (k, mut stack, mut part) = (parts.len(), vec![start], Vec::new());
        part_of.insert(start, k);
        while let Some(id) = stack.pop() {
            part.push(id);
            for c in neighbours(id) {
                if rewritten.contains(&c) && !part_of.contains_key(&c) {
                    part_of.insert(c, k);
                    stack.push(c);
                }
            }
        }
        parts.push(part);
    }
    if parts.len() < 2 {
        return vec![region.to_vec()];
    }
    // a rewired node joins the one region it touches (one touching several, such as the Cast between two fused
    // pairs, joins none)
    for &id in region.iter().filter(|id| rewired.contains(id)) {
        let touched: BTreeSet<usize> = neighbours(id).iter().filter_map(|c| part_of.get(c).copied()).collect();
        if let [k] = touched.into_iter().collect::<Vec<_>>()[..] {
            parts[k].push(id);
        }
    }
    for p in &mut parts {
        p.sort();
    }
    parts
}

/// The pattern cut from `nodes`, if it fires its pass: as cut, else with its outputs read by one more node (a
/// fusion that refuses to rewrite a node producing a graph output fires once the outputs are read).
fn cut_verified(
    w: &mut Worker,
    model: &Model,
    nodes: &BTreeSet<NodeId>,
    types: &HashMap<String, TensorType>,
    pass: &str,
    gran: Granularity,
    provenance: &Provenance,
) -> Option<Pattern> {
    let g = cut(&model.graph, nodes, types)?;
    if divides_by_computed_integer(&g, types) {
        return None;
    }
    let consumed = consume_outputs(&g);
    let (version, compiler) = (w.info.version.clone(), w.info.target.clone());
    let make = |g| {
        let mut p = make_pattern(model, g, pass, gran, &version, provenance.clone());
        p.meta.compiler = compiler.clone();
        p
    };
    let p = make(g);
    if verify(w, &p) {
        return Some(p);
    }
    consumed.map(make).filter(|q| verify(w, q))
}

/// Whether `g` divides integers (Div, Mod) by a value one of its nodes computes (not a constant): that value can be
/// 0 whatever the inputs (div_mul.onnx's int64 Div reads a Cast of a float), and a test's reference run then fails;
/// an open divisor instead becomes a fresh input, kept positive.
pub fn divides_by_computed_integer(g: &Graph, types: &HashMap<String, TensorType>) -> bool {
    g.node_ids().map(|id| g.node(id)).any(|n| {
        matches!(n.op.name.as_str(), "Div" | "Mod")
            && n.inputs.get(1).is_some_and(|d| {
                let computed = g.producer(d).is_some_and(|o| g.node(o.node).op.name != "Constant");
                computed && types.get(d).is_some_and(|t| t.dtype.is_int())
            })
    })
}

/// Nodes of `region` the rewrite only rewired: the optimized graph holds a node of the same op and attributes
/// with the same outputs (a removal makes the removed node's readers read its input instead).
pub fn rewired(original: &Graph, optimized: &Graph, region: &[NodeId]) -> BTreeSet<NodeId> {
    let key = |g: &Graph, id: NodeId| {
        let n = g.node(id);
        (n.op.clone(), n.outputs.clone(), format!("{:?}", n.attrs))
    };
    let kept: HashSet<_> = optimized.node_ids().map(|id| key(optimized, id)).collect();
    region.iter().copied().filter(|&id| kept.contains(&key(original, id))).collect()
}

/// The nodes of `region` the pass rewrote (not only `rewired`), with their producers.
pub fn core_subgraph(original: &Graph, region: &[NodeId], rewired: &BTreeSet<NodeId>) -> BTreeSet<NodeId> {
    let core: Vec<NodeId> = region.iter().copied().filter(|id| !rewired.contains(id)).collect();
    if core.is_empty() {
        return BTreeSet::new();
    }
    let mut set: BTreeSet<NodeId> = core.iter().copied().collect();
    for &id in &core {
        set.extend(original.node(id).inputs.iter().filter_map(|i| original.producer(i)).map(|o| o.node));
    }
    set
}

/// The graph with every output a node produces read by one more node (`Abs`, `Not` for bool), the output keeping
/// its name; `None` when no output is produced by a node. Some fusions (FastGeluFusion) refuse to rewrite a node
/// whose output is a graph output, which the outputs of a pattern spliced into a seed never are.
pub fn consume_outputs(g: &Graph) -> Option<Graph> {
    let produced: Vec<String> = g.outputs.iter().filter(|o| g.producer(o).is_some()).cloned().collect();
    if produced.is_empty() {
        return None;
    }
    let pre = |n: &str| format!("{n}__consumed");
    let rename = |n: &String| if produced.contains(n) { pre(n) } else { n.clone() };
    let mut out = Graph::new(g.name.clone());
    (out.inputs, out.outputs) = (g.inputs.clone(), g.outputs.clone());
    (out.initializers, out.types) = (g.initializers.clone(), g.types.clone());
    for node in g.nodes_in_order().ok()? {
        let mut n = node.clone();
        n.inputs = n.inputs.iter().map(rename).collect();
        n.outputs = n.outputs.iter().map(rename).collect();
        out.add_node(n).ok()?;
    }
    for o in &produced {
        let ty = g.tensor_type(o)?;
        out.types.insert(pre(o), ValueType::Tensor(ty.clone()));
        let op = OpId::onnx(if ty.dtype == DType::Bool { "Not" } else { "Abs" });
        out.add_node(Node::new(format!("{o}__consumer"), op, vec![pre(o)], vec![o.clone()])).ok()?;
    }
    Some(out)
}

/// The graph after `pass` alone (other fired passes of configuration `all` disabled); `None` if the pass does not
/// fire alone.
fn isolate(
    w: &mut Worker,
    bytes: &[u8],
    all: &Config,
    fired: &[String],
    pass: &str,
    tmp: &std::path::Path,
) -> Option<Model> {
    let container = container_of(pass);
    let siblings: Vec<String> = container
        .and_then(|c| RULE_CONTAINERS.iter().find(|(n, _)| *n == c))
        .map(|(_, rules)| rules.iter().filter(|r| **r != pass).map(|r| r.to_string()).collect())
        .unwrap_or_default();
    let others: Vec<String> = fired
        .iter()
        .filter(|p| p.as_str() != pass && Some(p.as_str()) != container && !siblings.contains(p))
        .cloned()
        .collect();
    let marker = container.unwrap_or(pass);
    // first with every other fired pass disabled; if the pass then does not fire, it needed them: allow them
    for disabled in [[siblings.clone(), others].concat(), siblings] {
        // unique per call: several worker threads of one process isolate at once
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = tmp.join(format!("opt-{}-{n}.onnx", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut c = all.clone();
        c.attribute_rules = false;
        c.disabled = disabled;
        c.save_optimized = Some(path.clone());
        let o = w.run(bytes, &[], &c);
        if o.passes_fired.iter().any(|p| p == marker) {
            let m = onnx::load(&path).ok();
            let _ = std::fs::remove_file(&path);
            return m;
        }
    }
    None
}

/// A pattern is kept only if, closed with fresh graph inputs, it still fires its pass (at `all`, or the named
/// configuration its model asks for).
pub fn verify(w: &mut Worker, p: &Pattern) -> bool {
    let Ok(bytes) = p.encode() else { return false };
    let Ok(mut c) = crate::compiler::named::all_for(&p.model.metadata) else { return false };
    let feeds = inputs::generate(&p.model.graph, 0).unwrap_or_default();
    c.attribute_rules = container_of(&p.meta.pass).is_some();
    w.run(&bytes, &feeds, &c).passes_fired.iter().any(|f| *f == p.meta.pass)
}
