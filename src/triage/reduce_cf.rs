//! Reduction of control flow: a control-flow node replaced by one pass over one of its bodies (an If by a
//! branch; a Loop or Scan by its body run once on its first values), nodes removed inside a body, and dead nodes
//! of bodies dropped. Used by `reduce.rs` through its `Edit` values; a bug that needs no control flow ends as a
//! flat graph, one that needs it keeps the smallest body that shows it.

use crate::graph::{Attr, DType, Graph, Node, NodeId, OpId, Tensor, TensorType};
use std::collections::{HashMap, HashSet};

/// Control-flow nodes of `g` and their bodies' attribute names, in order.
pub(super) fn hosts(g: &Graph, order: &[NodeId]) -> Vec<(NodeId, Vec<String>)> {
    order
        .iter()
        .filter(|&&id| crate::ops::is_control(&g.node(id).op))
        .map(|&id| (id, g.node(id).subgraphs().map(|(k, _)| k.clone()).collect()))
        .collect()
}

/// A name defined nowhere in `g` (nor in its bodies) starting with `base`.
fn fresh(g: &Graph, taken: &HashSet<String>, base: &str) -> String {
    let mut name = base.to_string();
    let mut k = 1;
    while g.is_defined(&name) || g.types.contains_key(&name) || taken.contains(&name) {
        name = format!("{base}{k}");
        k += 1;
    }
    name
}

/// Every value name defined in `g`'s bodies (recursively).
fn body_names(g: &Graph, out: &mut HashSet<String>) {
    for id in g.node_ids() {
        for (_, b) in g.node(id).subgraphs() {
            out.extend(b.inputs.iter().chain(b.initializers.keys()).cloned());
            out.extend(b.node_ids().flat_map(|i| b.node(i).outputs.clone()));
            body_names(b, out);
        }
    }
}

/// `g` with control-flow node `id` replaced by one pass over its body `key`; None when the body holds control
/// flow of its own or its inputs cannot be bound.
pub(super) fn inline(g: &Graph, id: NodeId, key: &str) -> Option<Graph> {
    let node = g.node(id).clone();
    let Some(Attr::Graph(body)) = node.attrs.get(key) else { return None };
    if body.has_subgraphs() {
        return None;
    }
    let mut taken = HashSet::new();
    body_names(g, &mut taken);
    // constants the inlined body needs in the enclosing graph
    let mut consts: Vec<(String, Tensor)> = Vec::new();
    let pre = format!("{}_{key}_", node.name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    let mut rename: HashMap<String, String> = HashMap::new();
    let name = |v: &str, gr: &Graph, taken: &mut HashSet<String>| -> String {
        let n = fresh(gr, taken, &format!("{pre}{v}"));
        taken.insert(n.clone());
        n
    };
    let mut new_nodes: Vec<Node> = Vec::new();
    // bind the body's inputs
    let n_scan = node.attr_int("num_scan_inputs").unwrap_or(0) as usize;
    let n_state = node.inputs.len().saturating_sub(n_scan);
    for (i, input) in body.inputs.iter().enumerate() {
        let bound = name(input, g, &mut taken);
        match node.op.name.as_str() {
            "Loop" if i == 0 => consts.push((bound.clone(), Tensor::from_f64s(DType::I64, &[], &[0.0]))),
            "Loop" if i == 1 => consts.push((bound.clone(), Tensor::from_f64s(DType::Bool, &[], &[1.0]))),
            "Loop" => new_nodes.push(identity(&bound, node.inputs.get(i).filter(|s| !s.is_empty())?)),
            "Scan" if i < n_state => new_nodes.push(identity(&bound, &node.inputs[i])),
            "Scan" => {
                let axis = match node.attrs.get("scan_input_axes") {
                    Some(Attr::Ints(v)) => *v.get(i - n_state)?,
                    _ => 0,
                };
                let first = name("first", g, &mut taken);
                consts.push((first.clone(), Tensor::from_f64s(DType::I64, &[], &[0.0])));
                let gather = Node::new(
                    format!("{bound}_gather"),
                    OpId::onnx("Gather"),
                    vec![node.inputs[i].clone(), first],
                    vec![bound.clone()],
                )
                .with_attr("axis", Attr::Int(axis));
                new_nodes.push(gather);
            }
            _ => return None,
        }
        rename.insert(input.clone(), bound);
    }
    for (n, t) in &body.initializers {
        let r = name(n, g, &mut taken);
        consts.push((r.clone(), t.clone()));
        rename.insert(n.clone(), r);
    }
    let inner = body.nodes_in_order().ok()?;
    for n in &inner {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            let r = name(o, g, &mut taken);
            rename.insert(o.clone(), r);
        }
    }
    let mapped = |v: &String| rename.get(v).cloned().unwrap_or_else(|| v.clone());
    for n in inner {
        let mut n = n.clone();
        n.name = format!("{pre}{}", n.name);
        n.inputs = n.inputs.iter().map(|i| if i.is_empty() { i.clone() } else { mapped(i) }).collect();
        n.outputs = n.outputs.iter().map(|o| if o.is_empty() { o.clone() } else { mapped(o) }).collect();
        new_nodes.push(n);
    }
    // the node's outputs from the body's: If one to one; Loop after its condition, scan outputs one iteration
    let skip = usize::from(node.op.name == "Loop");
    let carried = match node.op.name.as_str() {
        "Loop" => node.inputs.len().saturating_sub(2),
        "Scan" => n_state,
        _ => node.outputs.len(),
    };
    for (j, o) in node.outputs.iter().enumerate() {
        if o.is_empty() {
            continue;
        }
        let src = mapped(body.outputs.get(skip + j)?);
        if j < carried {
            new_nodes.push(identity(o, &src));
        } else {
            let axis = match node.attrs.get("scan_output_axes") {
                Some(Attr::Ints(v)) => *v.get(j - carried)?,
                _ => 0,
            };
            let axes = name("axes", g, &mut taken);
            consts.push((axes.clone(), Tensor::from_f64s(DType::I64, &[1], &[axis as f64])));
            new_nodes.push(Node::new(
                format!("{o}_unsqueeze"),
                OpId::onnx("Unsqueeze"),
                vec![src, axes],
                vec![o.clone()],
            ));
        }
    }
    // rebuilt in order, the body's nodes where the control-flow node was
    let order = g.topo_order().ok()?;
    let mut inlined = Some(new_nodes);
    let nodes = order.into_iter().flat_map(|nid| match nid == id {
        true => inlined.take().unwrap_or_default(),
        false => vec![g.node(nid).clone()],
    });
    let mut rebuilt = g.with_nodes(nodes).ok()?;
    for (n, t) in consts {
        rebuilt.add_initializer(&n, t);
    }
    retype(&mut rebuilt)?;
    Some(rebuilt)
}

fn identity(out: &str, from: &str) -> Node {
    Node::new(format!("{out}_id"), OpId::onnx("Identity"), vec![from.to_string()], vec![out.to_string()])
}

/// Declared types recomputed after shapes changed: inputs and outputs of ops the catalog does not know keep
/// theirs, every other value gets what inference says.
fn retype(g: &mut Graph) -> Option<()> {
    let mut keep: HashSet<String> = g.inputs.iter().cloned().collect();
    for id in g.node_ids() {
        let n = g.node(id);
        if crate::ops::lookup(&n.op.domain, &n.op.name).is_none() && !crate::ops::is_control(&n.op) {
            keep.extend(n.outputs.iter().cloned());
        }
    }
    let declared: Vec<String> = g.types.keys().cloned().collect();
    g.types.retain(|k, _| keep.contains(k));
    // inputs keep their declared types (symbolic dims freed for a free-dimension override stay symbolic)
    let inferred = crate::ops::infer_types(&crate::compiler::named::at_override_sizes(g), false).ok()?;
    let retyped: Vec<String> = declared.iter().chain(&g.outputs).filter(|v| !g.inputs.contains(v)).cloned().collect();
    for v in &retyped {
        if let Some(t) = inferred.get(v) {
            g.types.insert(v.clone(), t.clone().into());
        }
    }
    Some(())
}

/// Node `inner` of body `key` of node `id` removed, its readers in the body reading a same-typed input of it
/// (a value of the body or of its scope); a body output it made is then that value, if the body makes it.
pub(super) fn bypass_in_body(
    g: &mut Graph,
    id: NodeId,
    key: &str,
    inner: NodeId,
    scope: &HashMap<String, TensorType>,
) -> Option<()> {
    let Some(Attr::Graph(body)) = g.node(id).attrs.get(key) else { return None };
    let mut body = (**body).clone();
    let types = crate::ops::infer_scoped(&body, false, scope).ok()?;
    let node = body.node(inner).clone();
    let mut rewires = Vec::new();
    for o in node.outputs.iter().filter(|o| !o.is_empty()) {
        let want = types.get(o)?;
        let from = node.inputs.iter().find(|i| !i.is_empty() && types.get(*i) == Some(want))?;
        // a body output must stay produced in the body, and each output its own value
        if body.outputs.contains(o) && (body.producer(from).is_none() || body.outputs.contains(from)) {
            return None;
        }
        rewires.push((o.clone(), from.clone()));
    }
    body.remove_node(inner)?;
    for (o, from) in rewires {
        for (reader, slot) in body.consumers(&o) {
            body.set_input(reader, slot, &from);
        }
        for x in body.outputs.iter_mut().filter(|x| **x == o) {
            *x = from.clone();
        }
        if let Some(t) = types.get(&from) {
            if body.outputs.contains(&from) {
                body.types.insert(from.clone(), t.clone().into());
            }
        }
    }
    g.node_attrs_mut(id).insert(key.to_string(), Attr::Graph(Box::new(body)));
    Some(())
}

/// Bodies that read `old` from the enclosing graph read `new` instead (the graph rebuilt, so its order follows
/// the new reads); nothing happens when no body reads `old`.
pub(super) fn rewire_implicit(g: &mut Graph, old: &str, new: &str) -> Option<()> {
    let readers: Vec<NodeId> = g.node_ids().filter(|&id| g.node(id).implicit_inputs().contains(old)).collect();
    if readers.is_empty() {
        return Some(());
    }
    let order = g.topo_order().ok()?;
    for id in readers {
        g.edit_bodies(id, |b| rename_read(b, old, new));
    }
    *g = g.with_nodes(order.into_iter().map(|id| g.node(id).clone())).ok()?;
    Some(())
}

/// A body (and its bodies) reading `new` where it read the outer value `old`.
fn rename_read(b: &mut Graph, old: &str, new: &str) {
    if b.is_defined(old) {
        return;
    }
    let ids: Vec<NodeId> = b.node_ids().collect();
    for id in ids {
        for slot in 0..b.node(id).inputs.len() {
            if b.node(id).inputs[slot] == old {
                b.set_input(id, slot, new);
            }
        }
        b.edit_bodies(id, |inner| rename_read(inner, old, new));
    }
    for o in b.outputs.iter_mut().filter(|o| **o == old) {
        *o = new.to_string();
    }
}

/// Drops nodes of every body that neither the body's outputs nor its other nodes (or their bodies) read, and
/// initializers of a body nothing reads.
pub(super) fn tidy_bodies(g: &mut Graph) {
    let ids: Vec<NodeId> = g.node_ids().filter(|&id| g.node(id).subgraphs().next().is_some()).collect();
    for id in ids {
        g.edit_bodies(id, |b| {
            tidy_bodies(b);
            loop {
                let read: HashSet<String> =
                    b.node_ids().flat_map(|i| b.node(i).reads()).chain(b.outputs.iter().cloned()).collect();
                let dead: Vec<NodeId> = b
                    .node_ids()
                    .filter(|&i| b.node(i).outputs.iter().all(|o| o.is_empty() || !read.contains(o)))
                    .collect();
                if dead.is_empty() {
                    b.initializers.retain(|k, _| read.contains(k));
                    break;
                }
                for i in dead {
                    b.remove_node(i);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::reduce::{reduce, Case, Limits};
    use super::*;
    use crate::graph::{Model, Node, OpId};

    fn unary(op: &str, x: &str, y: &str) -> Node {
        Node::new(format!("{y}_{op}"), OpId::onnx(op), vec![x.into()], vec![y.into()])
    }

    /// `x -> Abs -> a; If(cond) { then: Relu(a) -> Sigmoid -> Neg, else: Tanh(x) } -> Exp -> y`: the check
    /// wants a Sigmoid fed by something that reads `x`'s descendants, anywhere in the model.
    fn if_case() -> Case {
        let ty = TensorType::new(DType::F32, &[2, 3]);
        let mut then = Graph::new("then");
        then.add_node(unary("Relu", "a", "r")).unwrap();
        then.add_node(unary("Sigmoid", "r", "s")).unwrap();
        then.add_node(unary("Neg", "s", "n")).unwrap();
        then.add_output("n", ty.clone());
        let mut els = Graph::new("else");
        els.add_node(unary("Tanh", "x", "t")).unwrap();
        els.add_output("t", ty.clone());
        let mut g = Graph::new("g");
        g.add_input("x", ty.clone());
        g.add_input("cond", TensorType::new(DType::Bool, &[]));
        g.add_node(unary("Abs", "x", "a")).unwrap();
        let node = Node::new("if", OpId::onnx("If"), vec!["cond".into()], vec!["o".into()])
            .with_attr("then_branch", Attr::Graph(Box::new(then)))
            .with_attr("else_branch", Attr::Graph(Box::new(els)));
        g.add_node(node).unwrap();
        g.add_node(unary("Exp", "o", "y")).unwrap();
        g.add_output("y", ty);
        let feeds = crate::compiler::inputs::generate(&g, 0).unwrap();
        Case { model: Model::new(g), feeds }
    }

    fn ops(g: &Graph, out: &mut Vec<String>) {
        for n in g.nodes_in_order().unwrap() {
            out.push(n.op.name.clone());
            for (_, b) in n.subgraphs() {
                ops(b, out);
            }
        }
    }

    #[test]
    fn a_bug_in_a_branch_that_needs_no_control_flow_ends_flat() {
        let mut check = |c: &Case| {
            let mut v = Vec::new();
            ops(&c.model.graph, &mut v);
            crate::ops::check_graph(&c.model.graph, true).is_ok() && v.contains(&"Sigmoid".to_string())
        };
        let r = reduce(if_case(), &mut check, &mut |_| HashMap::new(), Limits::default());
        let mut v = Vec::new();
        ops(&r.case.model.graph, &mut v);
        assert_eq!(v, ["Sigmoid"], "{:?}", r.case.model.graph);
        assert!(r.fixpoint);
    }

    #[test]
    fn a_bug_that_needs_the_branch_keeps_the_if_and_only_what_the_branch_needs() {
        // the symptom needs a Sigmoid inside an If's branch
        let mut check = |c: &Case| {
            let g = &c.model.graph;
            crate::ops::check_graph(g, true).is_ok()
                && g.node_ids()
                    .any(|id| g.node(id).subgraphs().any(|(_, b)| b.node_ids().any(|i| b.node(i).op.name == "Sigmoid")))
        };
        let before = if_case().model.graph.node_count_deep();
        let r = reduce(if_case(), &mut check, &mut |_| HashMap::new(), Limits::default());
        let mut v = Vec::new();
        ops(&r.case.model.graph, &mut v);
        assert!(v.contains(&"If".to_string()) && v.contains(&"Sigmoid".to_string()), "{v:?}");
        for gone in ["Relu", "Neg", "Exp", "Abs"] {
            assert!(!v.contains(&gone.to_string()), "{gone} is still there: {v:?}");
        }
        assert!(r.case.model.graph.node_count_deep() < before);
        let bytes = crate::graph::onnx::encode_model(&r.case.model);
        crate::graph::onnx::decode_model(&bytes).unwrap().graph.validate().unwrap();
    }

    /// `Loop(M=2, carried x) { v -> Sigmoid -> v', scan Neg(v') }` and `Scan(x) { e -> Tanh }`: both become one
    /// pass over their body that type-checks, with the scan outputs one iteration long.
    #[test]
    fn loops_and_scans_inline_to_one_iteration() {
        let ty = TensorType::new(DType::F32, &[2, 3]);
        let mut body = Graph::new("body");
        body.add_input("i", TensorType::new(DType::I64, &[]));
        body.add_input("c", TensorType::new(DType::Bool, &[]));
        body.add_input("v", ty.clone());
        body.add_node(unary("Identity", "c", "c2")).unwrap();
        body.add_node(unary("Sigmoid", "v", "v2")).unwrap();
        body.add_node(unary("Neg", "v2", "n")).unwrap();
        body.add_output("c2", TensorType::new(DType::Bool, &[]));
        body.add_output("v2", ty.clone());
        body.add_output("n", ty.clone());
        let mut scan_body = Graph::new("scan_body");
        scan_body.add_input("e", TensorType::new(DType::F32, &[3]));
        scan_body.add_node(unary("Tanh", "e", "t")).unwrap();
        scan_body.add_output("t", TensorType::new(DType::F32, &[3]));
        let mut g = Graph::new("g");
        g.add_input("x", ty.clone());
        g.add_initializer("M", Tensor::from_f64s(DType::I64, &[], &[2.0]));
        let lp = Node::new(
            "loop",
            OpId::onnx("Loop"),
            vec!["M".into(), "".into(), "x".into()],
            vec!["vf".into(), "ns".into()],
        )
        .with_attr("body", Attr::Graph(Box::new(body)));
        g.add_node(lp).unwrap();
        let sc = Node::new("scan", OpId::onnx("Scan"), vec!["x".into()], vec!["ts".into()])
            .with_attr("num_scan_inputs", Attr::Int(1))
            .with_attr("body", Attr::Graph(Box::new(scan_body)));
        g.add_node(sc).unwrap();
        g.add_output("vf", ty.clone());
        g.add_output("ns", TensorType::new(DType::F32, &[2, 2, 3]));
        g.add_output("ts", ty.clone());
        crate::ops::check_graph(&g, true).unwrap();
        let order = g.topo_order().unwrap();
        let found = hosts(&g, &order);
        assert_eq!(found.len(), 2);
        let flat = inline(&g, found[0].0, "body").expect("the Loop inlines");
        let flat = inline(&flat, hosts(&flat, &flat.topo_order().unwrap())[0].0, "body").expect("the Scan inlines");
        let types = crate::ops::check_graph(&flat, true).unwrap();
        assert!(!flat.has_subgraphs());
        assert_eq!(types["ns"], TensorType::new(DType::F32, &[1, 2, 3]), "a scan output of one iteration");
        assert_eq!(types["ts"], TensorType::new(DType::F32, &[1, 3]));
        assert_eq!(types["vf"], ty);
    }
}
