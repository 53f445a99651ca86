//! Control flow (ONNX If, Loop, Scan): type inference of a node whose bodies are subgraphs that may read the
//! enclosing graphs' values. Not specs of the registry: inference recurses into each body with the types of
//! the scope it sits in ([`super::infer_scoped`]), and the seed generator builds these nodes itself.

use super::{CheckError, Fact, Reject};
use crate::graph::{DType, Dim, Graph, Node, OpId, TensorType};
use std::collections::HashMap;

/// Whether a node is one of the control-flow ops this module types.
pub fn is_control(op: &OpId) -> bool {
    (op.domain.is_empty() || op.domain == "ai.onnx") && matches!(op.name.as_str(), "If" | "Loop" | "Scan")
}

/// Output types of a control-flow node from its input facts, its bodies and the types in scope (every value
/// of the enclosing graphs defined before the node).
pub fn infer_control(
    node: &Node,
    facts: &[Option<Fact>],
    scope: &HashMap<String, TensorType>,
    strict: bool,
) -> Result<Vec<TensorType>, CheckError> {
    let bad = |why: String| CheckError::Invalid { node: node.name.clone(), op: node.op.to_string(), why };
    let body = |key: &str| match node.attrs.get(key) {
        Some(crate::graph::Attr::Graph(g)) => Ok(g.as_ref()),
        _ => Err(bad(format!("attribute '{key}' must be a graph"))),
    };
    let out = match node.op.name.as_str() {
        "If" => {
            let cond = one_fact(facts, 0).map_err(|r| bad(r.0))?;
            scalar_of(cond, DType::Bool, "If's condition").map_err(|r| bad(r.0))?;
            if facts.len() != 1 {
                return Err(bad(format!("If takes 1 input, got {}", facts.len())));
            }
            let (t, e) = (body("then_branch")?, body("else_branch")?);
            if !t.inputs.is_empty() || !e.inputs.is_empty() {
                return Err(bad("If's branches take no inputs".into()));
            }
            let (tt, et) = (outputs_of(t, scope, strict)?, outputs_of(e, scope, strict)?);
            if tt.len() != et.len() {
                return Err(bad(format!("then_branch has {} outputs, else_branch {}", tt.len(), et.len())));
            }
            tt.iter().zip(&et).map(|(a, b)| merge(a, b)).collect::<Result<Vec<_>, _>>().map_err(|r| bad(r.0))?
        }
        "Loop" => loop_types(facts, body("body")?, scope, strict).map_err(|e| e.or(&bad))?,
        "Scan" => scan_types(node, facts, body("body")?, scope, strict).map_err(|e| e.or(&bad))?,
        other => return Err(bad(format!("{other} is not a control-flow op"))),
    };
    if out.len() != node.outputs.len() {
        return Err(bad(format!("{} outputs for {} inferred", node.outputs.len(), out.len())));
    }
    Ok(out)
}

/// A failure inside a body (already a [`CheckError`]) or of the node itself (a reason).
enum Fail {
    Body(CheckError),
    Node(String),
}

impl Fail {
    fn or(self, bad: &impl Fn(String) -> CheckError) -> CheckError {
        match self {
            Fail::Body(e) => e,
            Fail::Node(why) => bad(why),
        }
    }
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Node(s)
    }
}

impl From<Reject> for Fail {
    fn from(r: Reject) -> Fail {
        Fail::Node(r.0)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail::Node(s.to_string())
    }
}

impl From<CheckError> for Fail {
    fn from(e: CheckError) -> Fail {
        Fail::Body(e)
    }
}

fn loop_types(
    facts: &[Option<Fact>],
    body: &Graph,
    scope: &HashMap<String, TensorType>,
    strict: bool,
) -> Result<Vec<TensorType>, Fail> {
    if facts.len() < 2 {
        return Err(format!("Loop takes at least 2 inputs (M, cond), got {}", facts.len()).into());
    }
    let trip = match &facts[0] {
        Some(m) => {
            scalar_of(m, DType::I64, "Loop's trip count M")?;
            m.value.and_then(|t| t.to_i64s()).and_then(|v| v.first().copied())
        }
        None => None,
    };
    if let Some(c) = &facts[1] {
        scalar_of(c, DType::Bool, "Loop's condition")?;
    }
    let carried: Vec<TensorType> = facts[2..]
        .iter()
        .map(|f| f.as_ref().map(|f| f.ty.clone()).ok_or_else(|| "Loop's carried values cannot be omitted".to_string()))
        .collect::<Result<_, _>>()?;
    let n = carried.len();
    if body.inputs.len() != 2 + n {
        return Err(format!("Loop's body takes {} inputs for {n} carried values", body.inputs.len()).into());
    }
    let ins = declared_inputs(body)?;
    check_input(&ins[0], &TensorType::new(DType::I64, &[]), "iteration number")?;
    check_input(&ins[1], &TensorType::new(DType::Bool, &[]), "condition")?;
    for (i, ty) in carried.iter().enumerate() {
        check_input(&ins[2 + i], ty, "carried value")?;
    }
    let outs = outputs_of(body, scope, strict)?;
    if outs.len() < 1 + n {
        return Err(format!("Loop's body makes {} outputs for 1 + {n} carried values", outs.len()).into());
    }
    if outs[0].dtype != DType::Bool {
        return Err(format!("Loop's body condition output is {}", outs[0]).into());
    }
    let mut types = Vec::new();
    for (i, ty) in carried.iter().enumerate() {
        types.push(merge(ty, &outs[1 + i])?);
    }
    // a condition input may end the loop early: the number of iterations is then unknown
    let iters = match (trip, &facts[1]) {
        (Some(m), None) if m >= 0 => Dim::Fixed(m),
        _ => Dim::Sym(String::new()),
    };
    for y in &outs[1 + n..] {
        types.push(stacked(y, iters.clone(), 0)?);
    }
    Ok(types)
}

fn scan_types(
    node: &Node,
    facts: &[Option<Fact>],
    body: &Graph,
    scope: &HashMap<String, TensorType>,
    strict: bool,
) -> Result<Vec<TensorType>, Fail> {
    let s = node.attr_int("num_scan_inputs").ok_or("Scan needs the int attribute num_scan_inputs")?;
    let s = usize::try_from(s).ok().filter(|&s| s >= 1 && s <= facts.len()).ok_or("num_scan_inputs out of range")?;
    let ins: Vec<TensorType> = facts
        .iter()
        .map(|f| f.as_ref().map(|f| f.ty.clone()).ok_or_else(|| "Scan's inputs cannot be omitted".to_string()))
        .collect::<Result<_, _>>()?;
    let n = ins.len() - s;
    let axes = |key: &str, count: usize| -> Result<Vec<i64>, Reject> {
        match node.attrs.get(key) {
            None => Ok(vec![0; count]),
            Some(crate::graph::Attr::Ints(v)) if v.len() == count => Ok(v.clone()),
            Some(_) => Err(Reject(format!("attribute '{key}' must list {count} ints"))),
        }
    };
    if body.inputs.len() != ins.len() {
        return Err(format!("Scan's body takes {} inputs for {} node inputs", body.inputs.len(), ins.len()).into());
    }
    let declared = declared_inputs(body)?;
    let mut len: Option<Dim> = None;
    for (i, ty) in ins.iter().enumerate() {
        if i < n {
            check_input(&declared[i], ty, "state")?;
            continue;
        }
        let axis = axes("scan_input_axes", s)?[i - n];
        let shape = ty.shape.as_ref().ok_or("a scan input needs a known rank")?;
        let a = super::norm_axis(axis, shape.len(), "scan_input_axes").map_err(|r| r.0)?;
        if shape.is_empty() {
            return Err("a scan input needs rank >= 1".to_string().into());
        }
        let here = shape[a].clone();
        match &len {
            Some(l) if matches!((l, &here), (Dim::Fixed(p), Dim::Fixed(q)) if p != q) => {
                return Err(format!("scan inputs of different lengths ({l} and {here})").into())
            }
            _ => len = Some(here),
        }
        let mut elem = shape.clone();
        elem.remove(a);
        check_input(&declared[i], &TensorType { dtype: ty.dtype, shape: Some(elem) }, "scan input element")?;
    }
    let outs = outputs_of(body, scope, strict)?;
    if outs.len() < n {
        return Err(format!("Scan's body makes {} outputs for {n} states", outs.len()).into());
    }
    let mut types = Vec::new();
    for (i, ty) in ins.iter().take(n).enumerate() {
        types.push(merge(ty, &outs[i])?);
    }
    let out_axes = axes("scan_output_axes", outs.len() - n)?;
    let len = len.unwrap_or(Dim::Sym(String::new()));
    for (y, &axis) in outs[n..].iter().zip(&out_axes) {
        types.push(stacked(y, len.clone(), axis)?);
    }
    Ok(types)
}

/// The output types of a body, inferred in `scope` (declared types where inference has none).
fn outputs_of(body: &Graph, scope: &HashMap<String, TensorType>, strict: bool) -> Result<Vec<TensorType>, CheckError> {
    let types = super::infer_scoped(body, strict, scope)?;
    body.outputs
        .iter()
        .map(|o| {
            types.get(o).cloned().or_else(|| body.tensor_type(o)).or_else(|| scope.get(o).cloned()).ok_or_else(|| {
                CheckError::Invalid {
                    node: body.name.clone(),
                    op: "subgraph".into(),
                    why: format!("type of output '{o}' is unknown"),
                }
            })
        })
        .collect()
}

fn declared_inputs(body: &Graph) -> Result<Vec<TensorType>, Reject> {
    body.inputs
        .iter()
        .map(|i| body.tensor_type(i).ok_or_else(|| Reject(format!("body input '{i}' has no tensor type"))))
        .collect()
}

/// A body input declared with a type the node does not feed it.
fn check_input(declared: &TensorType, fed: &TensorType, what: &str) -> Result<(), Reject> {
    let same_rank = match (&declared.shape, &fed.shape) {
        (Some(a), Some(b)) => a.len() == b.len(),
        _ => true,
    };
    if declared.dtype != fed.dtype || !same_rank {
        return Err(Reject(format!("body {what} is declared {declared} but fed {fed}")));
    }
    Ok(())
}

fn one_fact<'a, 'b>(facts: &'a [Option<Fact<'b>>], i: usize) -> Result<&'a Fact<'b>, Reject> {
    facts.get(i).and_then(|f| f.as_ref()).ok_or_else(|| Reject(format!("input {i} is required")))
}

/// A one-element tensor of `dtype` (rank 0 or all dims 1).
fn scalar_of(f: &Fact, dtype: DType, what: &str) -> Result<(), Reject> {
    if f.ty.dtype != dtype || f.ty.numel().is_some_and(|n| n != 1) {
        return Err(Reject(format!("{what} must be one {}, got {}", dtype.name(), f.ty)));
    }
    Ok(())
}

/// Two types of one value (the branches of an If, a loop-carried value before and after): the same dtype; the
/// dims they agree on, others unknown.
fn merge(a: &TensorType, b: &TensorType) -> Result<TensorType, Reject> {
    if a.dtype != b.dtype {
        return Err(Reject(format!("{a} and {b} differ in dtype")));
    }
    let shape = match (&a.shape, &b.shape) {
        (Some(x), Some(y)) if x.len() == y.len() => {
            Some(x.iter().zip(y).map(|(p, q)| if p == q { p.clone() } else { Dim::Sym(String::new()) }).collect())
        }
        _ => None,
    };
    Ok(TensorType { dtype: a.dtype, shape })
}

/// The type of a scan output: the body's per-iteration type with the iteration axis inserted at `axis`.
fn stacked(y: &TensorType, iters: Dim, axis: i64) -> Result<TensorType, Reject> {
    let shape = match &y.shape {
        Some(s) => {
            let a = super::norm_axis(axis, s.len() + 1, "scan_output_axes")?;
            let mut s = s.clone();
            s.insert(a, iters);
            Some(s)
        }
        None => None,
    };
    Ok(TensorType { dtype: y.dtype, shape })
}
