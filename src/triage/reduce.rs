//! Graph reduction: shrink a model and its inputs while a check still reproduces the finding. Every edit is a
//! value (`Edit`) applied in one place (`apply`); each candidate is tidied (dead nodes, unused inputs and
//! constants dropped) and type-checked before the check sees it; greedy rounds repeat to a fixpoint, and the
//! result loses the local functions and opset imports it no longer uses when the check allows.

use crate::compiler::named::at_override_sizes;
use crate::compiler::{inputs, NamedTensor};
use crate::graph::{DType, Dim, Model, NodeId, Tensor, TensorData, TensorType, ValueType};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// A model with the inputs that make it show the finding.
#[derive(Clone, Debug)]
pub struct Case {
    pub model: Model,
    pub feeds: Vec<NamedTensor>,
}

/// One reduction step.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// Keep only what this value needs: it becomes the only graph output.
    KeepOnly(String),
    /// Drop one of several graph outputs.
    DropOutput(String),
    /// Remove a node; its readers read one of its inputs of the same type instead.
    Bypass(NodeId),
    /// A node's output becomes a new graph input fed with its reference value (`constant`: an initializer).
    Cut { value: String, constant: bool },
    /// Remove an attribute (the op's default applies).
    DropAttr { node: NodeId, key: String },
    /// Halve one dimension of a graph input (types re-inferred, the feed sliced).
    Shrink { input: String, axis: usize },
    /// Replace a control-flow node by one pass over one of its bodies (`reduce_cf.rs`).
    Inline { node: NodeId, body: String },
    /// Remove a node inside a body of a control-flow node, as `Bypass` does at the top level.
    BypassInBody { node: NodeId, body: String, inner: NodeId },
}

/// When to stop even if the fixpoint is not reached.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_checks: usize,
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_checks: 2000, time: Duration::from_secs(120) }
    }
}

/// What the reduction ended with.
#[derive(Clone, Debug)]
pub struct Reduced {
    pub case: Case,
    /// Candidates the check ran on.
    pub checks: usize,
    /// Edits kept.
    pub accepted: usize,
    /// Whether a full round found nothing more to remove (false: a limit stopped it).
    pub fixpoint: bool,
}

/// Reduces `case` while `check` holds. `values` gives the reference value of intermediate values of a case
/// (for cuts); values it does not give are generated from their type.
pub fn reduce(
    case: Case,
    check: &mut dyn FnMut(&Case) -> bool,
    values: &mut dyn FnMut(&Case) -> HashMap<String, Tensor>,
    limits: Limits,
) -> Reduced {
    let start = Instant::now();
    let mut current = case;
    let mut seen: HashSet<String> = HashSet::new();
    let (mut checks, mut accepted) = (0usize, 0usize);
    let mut known: Option<HashMap<String, Tensor>> = None;
    'rounds: loop {
        for edit in candidates(&current) {
            if checks >= limits.max_checks || start.elapsed() >= limits.time {
                return pruned(Reduced { case: current, checks, accepted, fixpoint: false }, check);
            }
            if matches!(edit, Edit::Cut { .. }) && known.is_none() {
                known = Some(values(&current));
            }
            let Some(next) = apply(&current, &edit, known.as_ref().unwrap_or(&HashMap::new())) else { continue };
            if size(&next) >= size(&current) || !seen.insert(fingerprint(&next)) {
                continue;
            }
            checks += 1;
            if check(&next) {
                // a cut keeps every remaining value as it was; other edits may change them
                if !matches!(edit, Edit::Cut { .. } | Edit::DropOutput(_) | Edit::KeepOnly(_)) {
                    known = None;
                }
                current = next;
                accepted += 1;
                continue 'rounds;
            }
        }
        return pruned(Reduced { case: current, checks, accepted, fixpoint: true }, check);
    }
}

/// The reduced case with what its model carries but no longer uses pruned ([`crate::graph::prune`]: local
/// functions no node calls, opset imports of unused domains), when the check still holds on it.
fn pruned(mut r: Reduced, check: &mut dyn FnMut(&Case) -> bool) -> Reduced {
    let mut next = r.case.clone();
    if crate::graph::prune(&mut next.model) {
        r.checks += 1;
        if check(&next) {
            (r.case, r.accepted) = (next, r.accepted + 1);
        }
    }
    r
}

/// What reduction minimizes, most significant first: nodes, input elements, attributes, constant elements.
fn size(c: &Case) -> (usize, usize, usize, usize) {
    let g = &c.model.graph;
    let attrs = g.node_ids().map(|id| g.node(id).attrs.len()).sum();
    let feed_elems = c.feeds.iter().map(|f| f.tensor.numel()).sum();
    let const_elems = g.initializers.values().map(|t| t.numel()).sum();
    (g.node_count_deep(), feed_elems, attrs, const_elems)
}

fn fingerprint(c: &Case) -> String {
    let mut s = String::from_utf8_lossy(&crate::graph::onnx::encode_model(&c.model)).into_owned();
    for f in &c.feeds {
        s.push_str(&format!("|{}{:?}", f.name, f.tensor.dims));
    }
    crate::util::stable_hash(&s)
}

/// The edits worth trying on a case, most promising (largest) first.
pub fn candidates(c: &Case) -> Vec<Edit> {
    let g = &c.model.graph;
    let Ok(order) = g.topo_order() else { return Vec::new() };
    let mut out = Vec::new();
    if g.outputs.len() > 1 {
        out.extend(g.outputs.iter().map(|o| Edit::DropOutput(o.clone())));
    }
    // keep-only: values with the fewest ancestors first
    let mut keep: Vec<(usize, String)> = Vec::new();
    for &id in &order {
        for o in g.node(id).outputs.iter().filter(|o| !o.is_empty()) {
            if g.outputs.len() == 1 && g.outputs[0] == *o {
                continue;
            }
            keep.push((ancestors(c, id), o.clone()));
        }
    }
    keep.sort();
    out.extend(keep.into_iter().map(|(_, v)| Edit::KeepOnly(v)));
    let hosts = super::reduce_cf::hosts(g, &order);
    for (id, bodies) in &hosts {
        out.extend(bodies.iter().map(|b| Edit::Inline { node: *id, body: b.clone() }));
    }
    out.extend(order.iter().rev().map(|&id| Edit::Bypass(id)));
    for (id, bodies) in &hosts {
        for (key, b) in g.node(*id).subgraphs().filter(|(k, _)| bodies.contains(k)) {
            let inner = b.topo_order().unwrap_or_default().into_iter().rev();
            out.extend(inner.map(|i| Edit::BypassInBody { node: *id, body: key.clone(), inner: i }));
        }
    }
    for &id in &order {
        for o in g.node(id).outputs.iter().filter(|o| !o.is_empty() && !g.consumers(o).is_empty()) {
            out.push(Edit::Cut { value: o.clone(), constant: false });
            out.push(Edit::Cut { value: o.clone(), constant: true });
        }
    }
    for &id in &order {
        out.extend(g.node(id).attrs.keys().map(|k| Edit::DropAttr { node: id, key: k.clone() }));
    }
    for f in &c.feeds {
        for (axis, &d) in f.tensor.dims.iter().enumerate() {
            if d > 1 {
                out.push(Edit::Shrink { input: f.name.clone(), axis });
            }
        }
    }
    out
}

fn ancestors(c: &Case, id: NodeId) -> usize {
    let g = &c.model.graph;
    let mut seen = HashSet::from([id]);
    let mut stack = vec![id];
    while let Some(n) = stack.pop() {
        for i in &g.node(n).inputs {
            if let Some(p) = g.producer(i) {
                if seen.insert(p.node) {
                    stack.push(p.node);
                }
            }
        }
    }
    seen.len()
}

/// The type of every value of `model`'s graph: freed input dims at their override sizes, and in a test written at
/// an older opset its ops of older forms typed by their declarations.
pub fn types_of(model: &crate::graph::Model) -> Option<HashMap<String, crate::graph::TensorType>> {
    let sized = at_override_sizes(&model.graph);
    crate::ops::infer_types(&crate::ops::since::typed_at(&sized, model.opset()), false).ok()
}

/// Applies an edit; `None` when it does not apply or leaves an invalid graph.
pub fn apply(c: &Case, edit: &Edit, values: &HashMap<String, Tensor>) -> Option<Case> {
    let mut next = c.clone();
    // a test written at an older opset: its ops of older forms are typed by their declarations
    let opset = c.model.opset();
    let types = types_of(&c.model)?;
    let g = &mut next.model.graph;
    match edit {
        Edit::KeepOnly(v) => {
            let ty = types.get(v)?.clone();
            g.outputs = vec![v.clone()];
            g.types.insert(v.clone(), ty.into());
        }
        Edit::DropOutput(v) => {
            if g.outputs.len() < 2 {
                return None;
            }
            g.outputs.retain(|o| o != v);
        }
        Edit::Bypass(id) => {
            let node = g.node(*id).clone();
            let mut rewires = Vec::new();
            for o in node.outputs.iter().filter(|o| !o.is_empty()) {
                let implicit = g.node_ids().any(|r| g.node(r).implicit_inputs().contains(o));
                let used = !g.consumers(o).is_empty() || g.outputs.contains(o) || implicit;
                if !used {
                    continue;
                }
                let want = types.get(o)?;
                let from = node.inputs.iter().find(|i| !i.is_empty() && types.get(*i) == Some(want))?;
                rewires.push((o.clone(), from.clone()));
            }
            g.remove_node(*id)?;
            for (o, from) in rewires {
                for (reader, slot) in g.consumers(&o) {
                    g.set_input(reader, slot, &from);
                }
                super::reduce_cf::rewire_implicit(g, &o, &from)?;
                if g.outputs.contains(&o) {
                    if g.outputs.contains(&from) || g.inputs.contains(&from) {
                        g.outputs.retain(|x| *x != o);
                    } else {
                        for x in g.outputs.iter_mut().filter(|x| **x == o) {
                            *x = from.clone();
                        }
                        g.types.insert(from.clone(), types.get(&from)?.clone().into());
                    }
                }
            }
            if g.outputs.is_empty() {
                return None;
            }
        }
        Edit::Cut { value, constant } => {
            let ty = types.get(value)?;
            let name = fresh(g, &format!("{value}_cut"));
            let t = match values.get(value) {
                // a NaN or infinite intermediate value is no input a user would feed: no cut there
                Some(t) if t.to_f64s().is_some_and(|v| v.iter().any(|x| !x.is_finite())) => return None,
                Some(t) if t.ty() == *ty => t.clone(),
                _ => generated(ty)?,
            };
            for (reader, slot) in g.consumers(value) {
                g.set_input(reader, slot, &name);
            }
            if *constant {
                g.add_initializer(&name, t);
            } else {
                g.add_input(&name, ty.clone());
                next.feeds.push(NamedTensor { name, tensor: t });
            }
        }
        Edit::DropAttr { node, key } => {
            // an older form typed by its declarations keeps its attributes (ReduceMean-12 without `axes`: all)
            (!crate::ops::since::older_by_declarations(g, g.node(*node), opset)).then_some(())?;
            g.node_attrs_mut(*node).remove(key)?;
        }
        Edit::Shrink { input, axis } => {
            let at = next.feeds.iter().position(|f| f.name == *input)?;
            let smaller = halve(&next.feeds[at].tensor, *axis)?;
            let ValueType::Tensor(old) = g.types.get(input)?.clone() else { return None };
            let mut shape = old.shape.clone()?;
            shape[*axis] = Dim::Fixed(smaller.dims[*axis]);
            // every op must be known for the new types to be inferred
            if g.node_ids().any(|id| crate::ops::lookup(&g.node(id).op.domain, &g.node(id).op.name).is_none()) {
                return None;
            }
            g.types.insert(input.clone(), TensorType { dtype: old.dtype, shape: Some(shape) }.into());
            let keep: HashSet<String> = g.inputs.iter().cloned().collect();
            g.types.retain(|k, _| keep.contains(k));
            let inferred = crate::ops::infer_types(&at_override_sizes(g), true).ok()?;
            for o in g.outputs.clone() {
                g.types.insert(o.clone(), inferred.get(&o)?.clone().into());
            }
            next.feeds[at].tensor = smaller;
        }
        Edit::Inline { node, body } => *g = super::reduce_cf::inline(g, *node, body)?,
        Edit::BypassInBody { node, body, inner } => super::reduce_cf::bypass_in_body(g, *node, body, *inner, &types)?,
    }
    tidy(&mut next);
    crate::ops::check_graph(&crate::ops::since::typed_at(&at_override_sizes(&next.model.graph), opset), false).ok()?;
    Some(next)
}

/// Drops nodes no output needs, graph inputs nothing reads (and their feeds), unused initializers, and type
/// entries of values that no longer exist.
pub fn tidy(c: &mut Case) {
    let g = &mut c.model.graph;
    super::reduce_cf::tidy_bodies(g);
    // what is read: explicit inputs, what bodies read from the enclosing graph, graph outputs
    let reads = |g: &crate::graph::Graph| -> HashSet<String> {
        g.node_ids().flat_map(|id| g.node(id).reads()).chain(g.outputs.iter().cloned()).collect()
    };
    loop {
        let used = reads(g);
        let dead: Vec<NodeId> =
            g.node_ids().filter(|&id| g.node(id).outputs.iter().all(|o| o.is_empty() || !used.contains(o))).collect();
        if dead.is_empty() {
            break;
        }
        for id in dead {
            g.remove_node(id);
        }
    }
    let used = reads(g);
    g.inputs.retain(|i| used.contains(i));
    g.initializers.retain(|k, _| used.contains(k));
    let inputs: HashSet<String> = g.inputs.iter().cloned().collect();
    c.feeds.retain(|f| inputs.contains(&f.name));
    let mut live: HashSet<String> = used;
    for id in g.node_ids() {
        live.extend(g.node(id).outputs.iter().cloned());
    }
    live.extend(g.inputs.iter().cloned());
    g.types.retain(|k, _| live.contains(k));
}

fn fresh(g: &crate::graph::Graph, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while g.is_defined(&name) || g.types.contains_key(&name) {
        name = format!("{base}{k}");
        k += 1;
    }
    name
}

/// A tensor of a fixed-shape type from the generator's default values (a graph input of that type).
pub(super) fn generated(ty: &TensorType) -> Option<Tensor> {
    let mut g = crate::graph::Graph::new("v");
    g.add_input("v", ty.clone());
    inputs::generate(&g, 0).ok()?.pop().map(|t| t.tensor)
}

/// The first half (rounded up) of a tensor along `axis`.
fn halve(t: &Tensor, axis: usize) -> Option<Tensor> {
    let TensorData::Raw(bytes) = &t.data else { return None };
    if t.dtype == DType::Str || axis >= t.dims.len() {
        return None;
    }
    let size = t.dtype.size()?;
    let d = t.dims[axis] as usize;
    let keep = d.div_ceil(2);
    let outer: usize = t.dims[..axis].iter().map(|&x| x as usize).product();
    let inner: usize = t.dims[axis + 1..].iter().map(|&x| x as usize).product::<usize>() * size;
    let mut out = Vec::with_capacity(outer * keep * inner);
    for o in 0..outer {
        let base = o * d * inner;
        out.extend_from_slice(bytes.get(base..base + keep * inner)?);
    }
    let mut dims = t.dims.clone();
    dims[axis] = keep as i64;
    Some(Tensor { dtype: t.dtype, dims, data: TensorData::Raw(out) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Graph, Node, OpId};

    /// x -> Relu -> Sigmoid -> Neg -> Abs -> Tanh -> y, all f32 [4, 6].
    fn chain(ops: &[&str]) -> Case {
        let ty = TensorType::new(DType::F32, &[4, 6]);
        let mut g = Graph::new("chain");
        g.add_input("x", ty.clone());
        let mut prev = "x".to_string();
        for (i, op) in ops.iter().enumerate() {
            let out = format!("v{i}");
            g.add_node(Node::new(format!("n{i}"), OpId::onnx(op), vec![prev.clone()], vec![out.clone()])).unwrap();
            prev = out;
        }
        g.add_output(&prev, ty);
        let model = Model::new(g);
        Case { feeds: inputs::generate(&model.graph, 1).unwrap(), model }
    }

    fn ops_of(c: &Case) -> Vec<String> {
        c.model.graph.nodes_in_order().unwrap().iter().map(|n| n.op.name.clone()).collect()
    }

    /// Whether `to` reads (transitively) what `from` computes.
    fn has_path(c: &Case, from: &str, to: &str) -> bool {
        let g = &c.model.graph;
        let mut stack: Vec<NodeId> = g.node_ids().filter(|&id| g.node(id).op.name == from).take(1).collect();
        while let Some(n) = stack.pop() {
            if g.node(n).op.name == to {
                return true;
            }
            stack.extend(g.node(n).outputs.iter().flat_map(|o| g.consumers(o)).map(|(id, _)| id));
        }
        false
    }

    #[test]
    fn interior_nodes_are_removed_while_the_symptom_needs_a_path() {
        let case = chain(&["Relu", "Sigmoid", "Neg", "Abs", "Exp", "Tanh", "Sign"]);
        let mut check = |c: &Case| has_path(c, "Sigmoid", "Exp");
        let r = reduce(case, &mut check, &mut |_| HashMap::new(), Limits::default());
        assert!(r.fixpoint);
        assert_eq!(ops_of(&r.case), ["Sigmoid", "Exp"], "interior Neg and Abs bypassed, both ends cut");
        assert!(crate::ops::check_graph(&r.case.model.graph, true).is_ok());
        // feeds follow the graph inputs
        let ins: Vec<&String> = r.case.feeds.iter().map(|f| &f.name).collect();
        assert_eq!(ins, r.case.model.graph.inputs.iter().collect::<Vec<_>>());
    }

    #[test]
    fn dimensions_shrink_and_attributes_go_when_the_check_allows() {
        let mut case = chain(&["Relu", "Softmax"]);
        let g = &mut case.model.graph;
        let sm = g.node_ids().find(|&id| g.node(id).op.name == "Softmax").unwrap();
        g.node_attrs_mut(sm).insert("axis".into(), crate::graph::Attr::Int(0));
        let mut check = |c: &Case| ops_of(c).contains(&"Softmax".to_string());
        let r = reduce(case, &mut check, &mut |_| HashMap::new(), Limits::default());
        assert_eq!(ops_of(&r.case), ["Softmax"]);
        let n = r.case.model.graph.nodes_in_order().unwrap()[0].clone();
        assert!(n.attrs.is_empty(), "the axis attribute is dropped");
        assert_eq!(r.case.feeds[0].tensor.dims, [1, 1], "both dims halved down to 1");
        let out = &r.case.model.graph.outputs[0];
        assert_eq!(r.case.model.graph.tensor_type(out).unwrap().dims(), Some(vec![1, 1]));
    }

    /// A review found ReduceMean-12 reduced without its `axes` beside a declared `[4, 1]`: types contradicted.
    #[test]
    fn an_older_form_typed_by_its_declarations_keeps_its_attributes() {
        let mut case = chain(&["Relu", "ReduceMean"]);
        case.model.opsets.insert(String::new(), 12);
        let g = &mut case.model.graph;
        let rm = g.node_ids().find(|&id| g.node(id).op.name == "ReduceMean").unwrap();
        g.node_attrs_mut(rm).insert("axes".into(), crate::graph::Attr::Ints(vec![-1]));
        g.types.insert("v1".into(), TensorType::new(DType::F32, &[4, 1]).into());
        let mut check = |c: &Case| ops_of(c).contains(&"ReduceMean".to_string());
        let r = reduce(case, &mut check, &mut |_| HashMap::new(), Limits::default());
        let g = &r.case.model.graph;
        assert!(g.node_ids().any(|id| g.node(id).attrs.contains_key("axes")), "an older form keeps its attributes");
    }

    #[test]
    fn cuts_feed_the_reference_value() {
        let case = chain(&["Relu", "Neg"]);
        let marker = Tensor::from_f32(&[4, 6], &[7.0; 24]);
        let m2 = marker.clone();
        let mut values = move |_: &Case| HashMap::from([("v0".to_string(), m2.clone())]);
        // the symptom needs Neg to read exactly the marker value
        let mut check =
            |c: &Case| ops_of(c) == ["Neg"] && c.feeds.iter().any(|f| f.tensor == marker) || ops_of(c).len() == 2;
        let r = reduce(case, &mut check, &mut values, Limits::default());
        assert_eq!(ops_of(&r.case), ["Neg"]);
    }

    #[test]
    fn a_nan_intermediate_value_is_never_cut_into_an_input() {
        let case = chain(&["Relu", "Neg"]);
        let nan = Tensor::from_f32(&[4, 6], &[f32::NAN; 24]);
        let mut values = move |_: &Case| HashMap::from([("v0".to_string(), nan.clone())]);
        // Neg alone would do, but only with v0 cut into an input (NaN here): the cut is refused, Relu stays
        let mut check = |c: &Case| {
            let g = &c.model.graph;
            let neg_reads_x = g.nodes_in_order().unwrap().iter().any(|n| n.op.name == "Neg" && n.inputs[0] == "x");
            ops_of(c).len() == 2 || (ops_of(c) == ["Neg"] && !neg_reads_x)
        };
        let r = reduce(case, &mut check, &mut values, Limits::default());
        assert_eq!(ops_of(&r.case), ["Relu", "Neg"]);
        assert!(r.case.feeds.iter().all(|f| f.tensor.to_f64s().unwrap().iter().all(|x| x.is_finite())));
    }

    #[test]
    fn unused_functions_go_when_the_check_allows() {
        let mut case = chain(&["Relu", "Neg"]);
        let f = crate::graph::onnx::pb::FunctionProto { name: Some("F".into()), ..Default::default() };
        case.model.functions = vec![prost::Message::encode_to_vec(&f)];
        let is_neg = |c: &Case| ops_of(c) == ["Neg"];
        let r = reduce(case.clone(), &mut |c: &Case| is_neg(c), &mut |_| HashMap::new(), Limits::default());
        assert!(r.case.model.functions.is_empty());
        // a check that needs them keeps them
        let mut keeps = |c: &Case| is_neg(c) && !c.model.functions.is_empty();
        let r = reduce(case, &mut keeps, &mut |_| HashMap::new(), Limits::default());
        assert_eq!((ops_of(&r.case), r.case.model.functions.len()), (vec!["Neg".to_string()], 1));
    }

    #[test]
    fn a_limit_stops_the_reduction_early() {
        let case = chain(&["Relu", "Sigmoid", "Neg", "Abs"]);
        let r = reduce(
            case,
            &mut |c: &Case| !ops_of(c).is_empty(),
            &mut |_| HashMap::new(),
            Limits { max_checks: 1, time: Duration::from_secs(60) },
        );
        assert!(!r.fixpoint);
        assert_eq!(r.checks, 1);
    }
}
