//! Control flow in seeds: one If, Loop or Scan node whose bodies are generated like small seeds that read values
//! of the enclosing graph (outer scope). Body names carry a prefix of their own, bodies never add graph inputs,
//! and the node is typed by the catalog's control-flow inference before it is kept.

use super::{Builder, SeedConfig};
use crate::graph::{Attr, DType, Graph, Node, OpId, Tensor, TensorType};
use crate::ops::{infer_control, random_tensor, Fact, OpSpec, Rng, Value};
use rand::Rng as _;
use std::collections::HashMap;

/// Tries to add one control-flow node to `b`; false (and `b` unchanged but for its name counter) if it failed.
pub(super) fn add(b: &mut Builder, rng: &mut Rng, cfg: &SeedConfig, reg: &[&Box<dyn OpSpec>]) -> bool {
    let k = b.nodes.len();
    let made = match rng.random_range(0..3) {
        0 => make_if(b, rng, cfg, reg, k),
        1 => make_loop(b, rng, cfg, reg, k),
        _ => make_scan(b, rng, cfg, reg, k),
    };
    let Some(Made { node, new_consts, new_inputs }) = made else {
        return false;
    };
    // type the node as the checker will, in the scope of everything defined so far
    let mut scope: HashMap<String, TensorType> = b.values.iter().map(|v| (v.name.clone(), v.ty.clone())).collect();
    scope.extend(new_inputs.iter().map(|v| (v.name.clone(), v.ty.clone())));
    scope.extend(new_consts.iter().map(|(n, t)| (n.clone(), t.ty())));
    let consts: HashMap<&str, &Tensor> =
        b.consts.iter().map(|(n, t)| (n.as_str(), t)).chain(new_consts.iter().map(|(n, t)| (n.as_str(), t))).collect();
    let facts: Option<Vec<Option<Fact>>> = node
        .inputs
        .iter()
        .map(|i| {
            if i.is_empty() {
                return Some(None);
            }
            scope.get(i).map(|ty| Some(Fact { ty: ty.clone(), value: consts.get(i.as_str()).copied() }))
        })
        .collect();
    let Some(facts) = facts else { return false };
    let Ok(out) = infer_control(&node, &facts, &scope, true) else {
        return false;
    };
    if out.iter().any(|t| t.numel().is_none_or(|n| n == 0 || n > b.limits.max_elems)) {
        return false;
    }
    b.consts.extend(new_consts.iter().cloned());
    b.values.extend(new_consts.into_iter().map(|(name, t)| Value { name, ty: t.ty() }));
    b.values.extend(new_inputs.iter().cloned());
    b.inputs.extend(new_inputs);
    let outs: Vec<Value> = node.outputs.iter().cloned().zip(out).map(|(name, ty)| Value { name, ty }).collect();
    b.nodes.push(node);
    b.values.extend(outs.iter().cloned());
    b.produced.extend(outs);
    true
}

/// A control-flow node with the constants and graph inputs of the enclosing graph it needs.
struct Made {
    node: Node,
    new_consts: Vec<(String, Tensor)>,
    new_inputs: Vec<Value>,
}

/// A generated body: `inputs` typed, reading `scope` values, with 1..=4 nodes of the catalog.
fn body(
    b: &mut Builder,
    rng: &mut Rng,
    cfg: &SeedConfig,
    reg: &[&Box<dyn OpSpec>],
    prefix: String,
    inputs: &[Value],
) -> Option<Builder> {
    let mut sub = Builder::new(crate::ops::Limits { fresh_input: 0.0, ..b.limits });
    (sub.prefix, sub.closed, sub.counter) = (prefix, true, b.counter);
    // the enclosing graph's most recent values (what a branch of real code reads) and the body's own inputs
    let recent = b.values.len().saturating_sub(6);
    sub.values.extend(b.values[recent..].iter().cloned());
    sub.values.extend(inputs.iter().cloned());
    let target = rng.random_range(1..=4);
    let mut tries = 0;
    while sub.nodes.len() < target && tries < 60 {
        tries += 1;
        let spec = reg[rng.random_range(0..reg.len())].as_ref();
        sub.try_add(spec, rng, &cfg.avoid);
    }
    b.counter = sub.counter;
    (!sub.nodes.is_empty()).then_some(sub)
}

/// The body's graph: its inputs, the constants and nodes it made, `outputs` (values of the body or its scope).
fn graph_of(sub: Builder, name: &str, inputs: &[Value], outputs: &[Value]) -> Option<Graph> {
    let mut g = Graph::new(name);
    for v in inputs {
        g.add_input(&v.name, v.ty.clone());
    }
    let used: std::collections::HashSet<String> =
        sub.nodes.iter().flat_map(|n| n.reads()).chain(outputs.iter().map(|v| v.name.clone())).collect();
    let mut consts: Vec<(&String, &Tensor)> = sub.consts.iter().filter(|(n, _)| used.contains(n.as_str())).collect();
    consts.sort_by(|a, b| a.0.cmp(b.0));
    for (n, t) in consts {
        g.add_initializer(n, t.clone());
    }
    for node in sub.nodes {
        g.add_node(node).ok()?;
    }
    for v in &sub.produced {
        if used.contains(&v.name) && !outputs.iter().any(|o| o.name == v.name) {
            g.types.insert(v.name.clone(), v.ty.clone().into());
        }
    }
    for v in outputs {
        g.add_output(&v.name, v.ty.clone());
    }
    Some(g)
}

/// A value of the body of exactly type `ty`, preferring its last unconsumed one.
fn produced_of(sub: &Builder, ty: &TensorType) -> Option<Value> {
    let read: std::collections::HashSet<String> = sub.nodes.iter().flat_map(|n| n.reads()).collect();
    let fit: Vec<&Value> = sub.produced.iter().filter(|v| &v.ty == ty).collect();
    fit.iter().rev().find(|v| !read.contains(&v.name)).or(fit.last()).map(|v| (*v).clone())
}

/// `Identity(src)` added to the body as a value named `name` (a body output that passes a value through).
fn identity(sub: &mut Builder, src: &Value, name: String) -> Value {
    let node = Node::new(format!("{name}_id"), OpId::onnx("Identity"), vec![src.name.clone()], vec![name.clone()]);
    sub.nodes.push(node);
    let v = Value { name, ty: src.ty.clone() };
    sub.produced.push(v.clone());
    v
}

fn scalar(dtype: DType) -> TensorType {
    TensorType::new(dtype, &[])
}

fn make_if(b: &mut Builder, rng: &mut Rng, cfg: &SeedConfig, reg: &[&Box<dyn OpSpec>], k: usize) -> Option<Made> {
    let (mut new_consts, mut new_inputs) = (Vec::new(), Vec::new());
    b.counter += 1;
    let cond = format!("cond{}", b.counter);
    // a constant condition is what ConstantFolding inlines; an input keeps both branches alive
    if rng.random_bool(0.5) {
        new_consts.push((cond.clone(), Tensor::from_f64s(DType::Bool, &[], &[rng.random_range(0..2) as f64])));
    } else {
        new_inputs.push(Value { name: cond.clone(), ty: scalar(DType::Bool) });
    }
    let then = body(b, rng, cfg, reg, format!("if{k}t_"), &[])?;
    let last = then.produced.last()?.clone();
    let mut outs = vec![last];
    if let Some(v) = then.produced.iter().rev().nth(1).filter(|_| rng.random_bool(0.3)) {
        outs.push(v.clone());
    }
    let mut els = body(b, rng, cfg, reg, format!("if{k}e_"), &[])?;
    let mut else_outs = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        // each output its own value: a body listing one value twice is no valid ONNX graph
        let taken = |v: &Value| else_outs.iter().any(|e: &Value| e.name == v.name);
        let fresh = produced_of(&els, &o.ty).filter(|v| !taken(v));
        let v = match fresh.or_else(|| b.values.iter().rev().find(|v| v.ty == o.ty).cloned()) {
            Some(v) => v,
            None => {
                // a branch that yields a constant of the other branch's type
                let dims = o.ty.dims()?;
                b.counter += 1;
                let c = Value { name: format!("if{k}e_c{}", b.counter), ty: o.ty.clone() };
                els.consts.insert(c.name.clone(), random_tensor(rng, o.ty.dtype, &dims));
                c
            }
        };
        // a body output must be produced in the body (not only read from the scope): pass it through
        let produced_here = els.produced.iter().any(|p| p.name == v.name) && !taken(&v);
        else_outs.push(if produced_here { v } else { identity(&mut els, &v, format!("if{k}e_out{i}")) });
    }
    let then_g = graph_of(then, &format!("if{k}_then"), &[], &outs)?;
    let else_g = graph_of(els, &format!("if{k}_else"), &[], &else_outs)?;
    let outputs = (0..outs.len()).map(|i| format!("t{k}_{i}")).collect();
    let node = Node::new(format!("n{k}_If"), OpId::onnx("If"), vec![cond], outputs)
        .with_attr("then_branch", Attr::Graph(Box::new(then_g)))
        .with_attr("else_branch", Attr::Graph(Box::new(else_g)));
    Some(Made { node, new_consts, new_inputs })
}

fn make_loop(b: &mut Builder, rng: &mut Rng, cfg: &SeedConfig, reg: &[&Box<dyn OpSpec>], k: usize) -> Option<Made> {
    let mut new_consts = Vec::new();
    b.counter += 1;
    let trip = format!("trip{}", b.counter);
    new_consts.push((trip.clone(), Tensor::from_f64s(DType::I64, &[], &[rng.random_range(1..=3) as f64])));
    let (iter, cond_in) = (
        Value { name: format!("loop{k}_i"), ty: scalar(DType::I64) },
        Value { name: format!("loop{k}_cond"), ty: scalar(DType::Bool) },
    );
    // at most one loop-carried value, taken from the enclosing graph
    let carried =
        if rng.random_bool(0.6) { b.values.iter().rev().take(4).nth(rng.random_range(0..4)).cloned() } else { None };
    let mut inputs = vec![iter, cond_in.clone()];
    let v_in = carried.as_ref().map(|c| Value { name: format!("loop{k}_v"), ty: c.ty.clone() });
    inputs.extend(v_in.clone());
    let mut sub = body(b, rng, cfg, reg, format!("loop{k}_"), &inputs)?;
    let mut outs = vec![identity(&mut sub, &cond_in, format!("loop{k}_cond_out"))];
    if let Some(v) = &v_in {
        let next = produced_of(&sub, &v.ty).filter(|p| !outs.iter().any(|o| o.name == p.name));
        let next = next.unwrap_or_else(|| identity(&mut sub, v, format!("loop{k}_v_out")));
        outs.push(next);
    }
    // one scan output: the last value the body made that is not already carried
    let y = sub.produced.iter().rev().find(|p| !outs.iter().any(|o| o.name == p.name) && p.ty.dtype != DType::Bool);
    outs.extend(y.cloned());
    if outs.len() < 2 {
        return None;
    }
    let n_out = outs.len() - 1;
    let g = graph_of(sub, &format!("loop{k}_body"), &inputs, &outs)?;
    let mut ins = vec![trip, String::new()];
    ins.extend(carried.map(|c| c.name));
    let outputs = (0..n_out).map(|i| format!("t{k}_{i}")).collect();
    let node =
        Node::new(format!("n{k}_Loop"), OpId::onnx("Loop"), ins, outputs).with_attr("body", Attr::Graph(Box::new(g)));
    Some(Made { node, new_consts, new_inputs: Vec::new() })
}

fn make_scan(b: &mut Builder, rng: &mut Rng, cfg: &SeedConfig, reg: &[&Box<dyn OpSpec>], k: usize) -> Option<Made> {
    let seq = b.values.iter().rev().find(|v| v.ty.dims().is_some_and(|d| !d.is_empty() && d[0] >= 1))?.clone();
    let dims = seq.ty.dims()?;
    let elem = Value { name: format!("scan{k}_x"), ty: TensorType::new(seq.ty.dtype, &dims[1..]) };
    let state = if rng.random_bool(0.5) { b.values.iter().rev().find(|v| v.name != seq.name).cloned() } else { None };
    let s_in = state.as_ref().map(|s| Value { name: format!("scan{k}_s"), ty: s.ty.clone() });
    let mut inputs: Vec<Value> = s_in.iter().cloned().collect();
    inputs.push(elem);
    let mut sub = body(b, rng, cfg, reg, format!("scan{k}_"), &inputs)?;
    let mut outs = Vec::new();
    if let Some(s) = &s_in {
        let next = produced_of(&sub, &s.ty).unwrap_or_else(|| identity(&mut sub, s, format!("scan{k}_s_out")));
        outs.push(next);
    }
    let y = sub.produced.iter().rev().find(|p| !outs.iter().any(|o| o.name == p.name))?.clone();
    outs.push(y);
    let g = graph_of(sub, &format!("scan{k}_body"), &inputs, &outs)?;
    let mut ins: Vec<String> = state.map(|s| s.name).into_iter().collect();
    ins.push(seq.name);
    let outputs = (0..outs.len()).map(|i| format!("t{k}_{i}")).collect();
    let node = Node::new(format!("n{k}_Scan"), OpId::onnx("Scan"), ins, outputs)
        .with_attr("num_scan_inputs", Attr::Int(1))
        .with_attr("body", Attr::Graph(Box::new(g)));
    Some(Made { node, new_consts: Vec::new(), new_inputs: Vec::new() })
}
