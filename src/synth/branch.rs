//! Splicing a pattern into the body of a control-flow node (an If branch, a Loop or Scan body). The body is
//! opened into a graph of its own whose extra inputs are the enclosing graph's values in scope (outer scope is
//! legal input there), the ordinary splice runs on it, and the result is closed again: opened inputs become
//! outer reads, fresh inputs become inputs of the enclosing graph, and pattern outputs left open become new
//! outputs of the body and of the node (If: the other branch yields a constant of the same type; Loop, Scan:
//! one more scan output).

use super::{Refused, SpliceInfo};
use crate::graph::{Attr, Graph, Model, Node, NodeId, OpId, TensorType};
use crate::ops::{check_graph, is_control, random_tensor, Rng};
use crate::pattern::Pattern;
use rand::Rng as _;

/// Splices `p` into one body of one control-flow node of `seed`'s graph; Err when the graph has none or the
/// splice is impossible there.
pub fn splice_into_body(
    seed: &Model,
    p: &Pattern,
    rng: &mut Rng,
    tag: u64,
    vary: &[super::vary::Variation],
) -> Result<(Model, SpliceInfo), Refused> {
    let g = &seed.graph;
    let types = check_graph(g, false).map_err(|e| format!("seed does not type-check: {e}"))?;
    let order = g.topo_order().map_err(|e| e.to_string())?;
    let hosts: Vec<(usize, NodeId)> =
        order.iter().enumerate().filter(|(_, &id)| is_control(&g.node(id).op)).map(|(i, &id)| (i, id)).collect();
    if hosts.is_empty() {
        return Err("no control-flow node to splice into".into());
    }
    let (pos, host) = hosts[rng.random_range(0..hosts.len())];
    let node = g.node(host).clone();
    let bodies: Vec<String> = node.subgraphs().map(|(k, _)| k.clone()).collect();
    let key = bodies[rng.random_range(0..bodies.len())].clone();
    let Some(Attr::Graph(body)) = node.attrs.get(&key) else { unreachable!("a listed subgraph") };

    // the body opened: the enclosing graph's values before the node (and what the body reads) become inputs
    let mut opened = (**body).clone();
    let mut scope: Vec<String> = g.inputs.clone();
    scope.extend(order[..pos].iter().flat_map(|&id| g.node(id).outputs.clone()).filter(|o| !o.is_empty()));
    let reads: Vec<String> = body.outer_reads().into_iter().filter(|r| !scope.contains(r)).collect();
    scope.extend(reads);
    let mut outer_inputs = Vec::new();
    for v in scope {
        let Some(t) = types.get(&v) else { continue };
        if !opened.is_defined(&v) && t.numel().is_some_and(|n| n > 0) {
            opened.add_input(&v, t.clone());
            outer_inputs.push(v);
        }
    }
    if opened.inputs.is_empty() {
        return Err("nothing in scope to feed a pattern in the body".into());
    }
    // a body's outputs may be typed by inference only: the splice wants them declared
    let untyped: Vec<String> = opened.outputs.iter().filter(|o| !opened.types.contains_key(*o)).cloned().collect();
    if !untyped.is_empty() {
        let inferred = crate::ops::infer_types(&opened, false).map_err(|e| format!("body does not type-check: {e}"))?;
        for o in untyped {
            let t = inferred.get(&o).cloned().ok_or_else(|| format!("body output '{o}' has no type"))?;
            opened.types.insert(o, t.into());
        }
    }
    let mut shell = Model::new(opened);
    (shell.ir_version, shell.opsets, shell.functions) = (seed.ir_version, seed.opsets.clone(), seed.functions.clone());
    let (spliced, info) = super::splice_varied(&shell, p, rng, tag, None, vary)?;
    let mut inner = spliced.graph;

    // closed again: opened inputs are outer reads, fresh ones are the enclosing graph's
    let fresh: Vec<(String, TensorType)> = inner
        .inputs
        .iter()
        .filter(|i| !body.inputs.contains(i) && !outer_inputs.contains(i))
        .filter_map(|i| inner.tensor_type(i).map(|t| (i.clone(), t)))
        .collect();
    inner.inputs.retain(|i| body.inputs.contains(i));
    for v in outer_inputs.iter().chain(fresh.iter().map(|(n, _)| n)) {
        inner.types.shift_remove(v);
    }
    let added: Vec<(String, TensorType)> = inner.outputs[body.outputs.len()..]
        .iter()
        .map(|o| inner.tensor_type(o).map(|t| (o.clone(), t)).ok_or_else(|| format!("output '{o}' has no type")))
        .collect::<Result<_, _>>()?;

    // the node: the new body, the other branch's matching outputs, one node output per added body output
    let mut node = node;
    if node.op.name == "If" {
        let other = if key == "then_branch" { "else_branch" } else { "then_branch" };
        let Some(Attr::Graph(sibling)) = node.attrs.get(other) else { return Err("If without two branches".into()) };
        let mut sibling = (**sibling).clone();
        for (i, (_, t)) in added.iter().enumerate() {
            yield_constant(&mut sibling, t, &format!("s{tag}_{other}_{i}"), rng)?;
        }
        node.attrs.insert(other.to_string(), Attr::Graph(Box::new(sibling)));
    }
    node.attrs.insert(key, Attr::Graph(Box::new(inner)));
    let new_outputs: Vec<String> = (0..added.len()).map(|i| format!("s{tag}_cf{i}")).collect();
    node.outputs.extend(new_outputs.iter().cloned());
    if let Some(Attr::Ints(axes)) = node.attrs.get_mut("scan_output_axes") {
        axes.extend(std::iter::repeat_n(0, added.len()));
    }

    let nodes = order.iter().map(|&id| if id == host { node.clone() } else { g.node(id).clone() });
    let mut out = g.with_nodes(nodes).map_err(|e| e.to_string())?;
    for (n, t) in &fresh {
        out.add_input(n, t.clone());
    }
    let inferred = crate::ops::infer_types(&out, false).map_err(|e| format!("spliced body is invalid: {e}"))?;
    for n in &new_outputs {
        let t = inferred.get(n).cloned().ok_or_else(|| format!("no type for '{n}'"))?;
        out.add_output(n, t);
    }
    check_graph(&out, false).map_err(|e| format!("spliced body is invalid: {e}"))?;
    let mut m = Model { graph: out, ..spliced };
    m.producer_name = "oatest synth".into();
    Ok((m, info))
}

/// Adds an output of type `t` to a branch: a constant passed through Identity.
fn yield_constant(branch: &mut Graph, t: &TensorType, name: &str, rng: &mut Rng) -> Result<(), Refused> {
    let dims = t.dims().ok_or_else(|| format!("output type {t} is not static"))?;
    if t.dtype.size().is_none() && t.dtype != crate::graph::DType::Str {
        return Err(Refused(format!("no constant of type {t} for the other branch")));
    }
    let c = format!("{name}_c");
    branch.add_initializer(&c, random_tensor(rng, t.dtype, &dims));
    let id = Node::new(format!("{name}_id"), OpId::onnx("Identity"), vec![c], vec![name.to_string()]);
    branch.add_node(id).map_err(|e| e.to_string())?;
    branch.add_output(name, t.clone());
    Ok(())
}

/// The share of synthesized tests whose base graph has a control-flow node that splice into one of its bodies.
pub const BODY_SHARE: f64 = 0.5;

/// Whether a model's top-level graph has a control-flow node to splice into.
pub fn has_body(m: &Model) -> bool {
    m.graph.node_ids().any(|id| is_control(&m.graph.node(id).op))
}
