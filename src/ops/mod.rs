//! The operator catalog: one spec per op (dtype/rank constraints, shape+dtype inference, attribute sampling).
//! Adding an op is adding one spec to [`registry`].

mod attention;
mod contrib;
mod control;
pub mod conv;
mod draft;
mod elementwise;
mod linalg;
mod norm;
mod qcontrib;
mod quant;
mod reduce;
mod shape;
pub mod since;
#[cfg(test)]
pub(crate) mod testutil;

pub use control::{infer_control, is_control};
pub use draft::{random_dims, random_tensor, random_type, Draft, Limits, Proposal, Value};

use crate::graph::{Attr, Attrs, DType, Graph, Node, Tensor, TensorType};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The random number generator every sampler uses (portable and stable across platforms).
pub type Rng = ChaCha8Rng;

/// A constraint an op's inputs or attributes do not meet. In generation this means "roll back and retry";
/// on an imported graph it is a validation error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Reject(pub String);

/// What inference knows about one input: its type and, for constants, its value.
#[derive(Clone, Debug)]
pub struct Fact<'a> {
    pub ty: TensorType,
    pub value: Option<&'a Tensor>,
}

/// How many inputs and outputs an op takes.
#[derive(Clone, Copy, Debug)]
pub struct Arity {
    pub inputs: (usize, usize),
    pub outputs: (usize, usize),
}

impl Arity {
    pub const fn fixed(inputs: usize, outputs: usize) -> Arity {
        Arity { inputs: (inputs, inputs), outputs: (outputs, outputs) }
    }
}

/// One operator's specification.
pub trait OpSpec: Send + Sync {
    /// The op type (`Conv`, `Add`, ...).
    fn name(&self) -> &'static str;
    /// Its domain (`""` = ai.onnx).
    fn domain(&self) -> &'static str {
        ""
    }
    fn arity(&self) -> Arity;
    /// Whether only ONNX Runtime's seeds draw it ([`crate::seedgen::SeedConfig::contrib`]): its own domain's ops,
    /// and the quantized ai.onnx ops the other targets' frontends do not take.
    fn contrib(&self) -> bool {
        !self.domain().is_empty()
    }
    /// Output types from input facts (`None` = omitted optional input) and attributes. Called through
    /// [`infer_node`], which has already checked the input and output counts.
    fn infer(&self, inputs: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject>;
    /// Chooses inputs (from the draft's values, or new constants/inputs) and attributes for a new node.
    fn sample(&self, draft: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject>;
}

/// All specs, in a fixed order (generation depends on it).
pub fn registry() -> &'static [Box<dyn OpSpec>] {
    static REG: OnceLock<Vec<Box<dyn OpSpec>>> = OnceLock::new();
    REG.get_or_init(|| {
        let mut v: Vec<Box<dyn OpSpec>> = Vec::new();
        elementwise::register(&mut v);
        linalg::register(&mut v);
        conv::register(&mut v);
        norm::register(&mut v);
        shape::register(&mut v);
        reduce::register(&mut v);
        quant::register(&mut v);
        // last: seeds without contrib ops pick among the ONNX ops exactly as before they existed
        contrib::register(&mut v);
        qcontrib::register(&mut v);
        attention::register(&mut v);
        v
    })
}

/// The spec for an op, if the catalog has it.
pub fn lookup(domain: &str, name: &str) -> Option<&'static dyn OpSpec> {
    static INDEX: OnceLock<HashMap<(String, String), usize>> = OnceLock::new();
    let idx = INDEX.get_or_init(|| {
        registry().iter().enumerate().map(|(i, s)| ((s.domain().to_string(), s.name().to_string()), i)).collect()
    });
    let key = (if domain == "ai.onnx" { "" } else { domain }.to_string(), name.to_string());
    idx.get(&key).map(|&i| registry()[i].as_ref())
}

/// Infers a node's output types with its spec, checking input/output counts first.
pub fn infer_node(
    spec: &dyn OpSpec,
    inputs: &[Option<Fact>],
    attrs: &Attrs,
    n_outputs: usize,
) -> Result<Vec<TensorType>, Reject> {
    let a = spec.arity();
    if inputs.len() < a.inputs.0 || inputs.len() > a.inputs.1 {
        reject!("{} takes {}..={} inputs, got {}", spec.name(), a.inputs.0, a.inputs.1, inputs.len());
    }
    if n_outputs < a.outputs.0 || n_outputs > a.outputs.1 {
        reject!("{} makes {}..={} outputs, got {}", spec.name(), a.outputs.0, a.outputs.1, n_outputs);
    }
    for (i, f) in inputs.iter().enumerate().take(a.inputs.0) {
        if f.is_none() {
            reject!("{}: input {i} is required", spec.name());
        }
    }
    let mut out = spec.infer(inputs, attrs)?;
    if out.len() < n_outputs {
        reject!("{}: inference gave {} outputs for {} wanted", spec.name(), out.len(), n_outputs);
    }
    out.truncate(n_outputs);
    Ok(out)
}

/// Why a graph does not type-check against the catalog.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CheckError {
    #[error("node '{node}': unknown op {op}")]
    UnknownOp { node: String, op: String },
    #[error("node '{node}' ({op}): {why}")]
    Invalid { node: String, op: String, why: String },
    #[error("value '{value}': declared {declared}, inferred {inferred}")]
    Mismatch { value: String, declared: String, inferred: String },
    #[error(transparent)]
    Graph(#[from] crate::graph::GraphError),
}

/// Validates the structure, then infers every node with the catalog and compares with declared types.
/// Returns the type of every value. `strict`: unknown ops are errors (otherwise they are skipped and their
/// outputs keep their declared types).
pub fn check_graph(g: &Graph, strict: bool) -> Result<HashMap<String, TensorType>, CheckError> {
    g.validate()?;
    infer_types(g, strict)
}

/// Infers every value's type with the catalog, checking inferred against declared types, without validating
/// the graph's structure first (outputs may be undeclared, e.g. while synthesis recomputes a pattern).
pub fn infer_types(g: &Graph, strict: bool) -> Result<HashMap<String, TensorType>, CheckError> {
    infer_scoped(g, strict, &HashMap::new())
}

/// [`infer_types`] of a graph whose nodes may also read `outer` (a subgraph: the types of its enclosing graphs'
/// values); the result holds `outer` too.
pub fn infer_scoped(
    g: &Graph,
    strict: bool,
    outer: &HashMap<String, TensorType>,
) -> Result<HashMap<String, TensorType>, CheckError> {
    let mut types: HashMap<String, TensorType> = outer.clone();
    for name in g.inputs.iter().chain(g.initializers.keys()) {
        if let Some(t) = g.tensor_type(name) {
            types.insert(name.clone(), t);
        }
    }
    for node in g.nodes_in_order()? {
        if is_control(&node.op) {
            let invalid = |why: String| CheckError::Invalid { node: node.name.clone(), op: node.op.to_string(), why };
            let facts = node_facts(g, node, &types).map_err(|r| invalid(r.0))?;
            let out = infer_control(node, &facts, &types, strict)?;
            record(g, node, out, &mut types)?;
            continue;
        }
        if let Some(t) = constant_type(node) {
            record(g, node, vec![t], &mut types)?;
            continue;
        }
        let Some(spec) = lookup(&node.op.domain, &node.op.name) else {
            if strict {
                return Err(CheckError::UnknownOp { node: node.name.clone(), op: node.op.to_string() });
            }
            for o in &node.outputs {
                if let Some(t) = g.tensor_type(o) {
                    types.insert(o.clone(), t);
                }
            }
            continue;
        };
        let invalid = |why: String| CheckError::Invalid { node: node.name.clone(), op: node.op.to_string(), why };
        let facts = node_facts(g, node, &types).map_err(|r| invalid(r.0))?;
        let out = infer_node(spec, &facts, &node.attrs, node.outputs.len()).map_err(|r| invalid(r.0))?;
        record(g, node, out, &mut types)?;
    }
    Ok(types)
}

/// The type of an ai.onnx Constant node's value (none for a sparse or string-less form it cannot tell). The
/// catalog has no Constant op to generate; a pattern variant writes its constants as Constant nodes.
fn constant_type(node: &Node) -> Option<TensorType> {
    if node.op.name != "Constant" || !matches!(node.op.domain.as_str(), "" | "ai.onnx") || node.outputs.len() != 1 {
        return None;
    }
    let (name, a) = node.attrs.iter().next().filter(|_| node.attrs.len() == 1)?;
    match (name.as_str(), a) {
        ("value", Attr::Tensor(t)) => Some(t.ty()),
        ("value_float", Attr::Float(_)) => Some(TensorType::new(DType::F32, &[])),
        ("value_floats", Attr::Floats(v)) => Some(TensorType::new(DType::F32, &[v.len()])),
        ("value_int", Attr::Int(_)) => Some(TensorType::new(DType::I64, &[])),
        ("value_ints", Attr::Ints(v)) => Some(TensorType::new(DType::I64, &[v.len()])),
        _ => None,
    }
}

/// Records a node's inferred output types, checking them against declared ones.
fn record(
    g: &Graph,
    node: &Node,
    out: Vec<TensorType>,
    types: &mut HashMap<String, TensorType>,
) -> Result<(), CheckError> {
    for (name, ty) in node.outputs.iter().zip(out) {
        if name.is_empty() {
            continue;
        }
        if let Some(declared) = g.tensor_type(name) {
            if !compatible(&declared, &ty) {
                return Err(CheckError::Mismatch {
                    value: name.clone(),
                    declared: declared.to_string(),
                    inferred: ty.to_string(),
                });
            }
        }
        types.insert(name.clone(), ty);
    }
    Ok(())
}

fn node_facts<'g>(
    g: &'g Graph,
    node: &Node,
    types: &HashMap<String, TensorType>,
) -> Result<Vec<Option<Fact<'g>>>, Reject> {
    node.inputs
        .iter()
        .map(|i| {
            if i.is_empty() {
                return Ok(None);
            }
            let ty = types.get(i).cloned().ok_or_else(|| Reject(format!("type of input '{i}' is unknown")))?;
            Ok(Some(Fact { ty, value: g.initializers.get(i) }))
        })
        .collect()
}

/// Declared and inferred agree where both are known (a symbolic or missing declared dim matches anything).
fn compatible(declared: &TensorType, inferred: &TensorType) -> bool {
    use crate::graph::Dim;
    if declared.dtype != inferred.dtype {
        return false;
    }
    match (&declared.shape, &inferred.shape) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    matches!((x, y), (Dim::Fixed(p), Dim::Fixed(q)) if p == q)
                        || !matches!((x, y), (Dim::Fixed(_), Dim::Fixed(_)))
                })
        }
        _ => true,
    }
}

// ---- helpers shared by the specs ----

/// The static dims of an input, or a rejection naming it.
pub(crate) fn dims_of(f: &Fact, what: &str) -> Result<Vec<usize>, Reject> {
    f.ty.dims().ok_or_else(|| Reject(format!("{what} needs a static shape, got {}", f.ty)))
}

/// The input fact at `i` (already checked present when required).
pub(crate) fn input<'a, 'b>(ins: &'a [Option<Fact<'b>>], i: usize) -> Result<&'a Fact<'b>, Reject> {
    ins.get(i).and_then(|f| f.as_ref()).ok_or_else(|| Reject(format!("input {i} is missing")))
}

/// The integer values of a constant input (e.g. a shape or axes), or a rejection.
pub(crate) fn const_ints(f: &Fact, what: &str) -> Result<Vec<i64>, Reject> {
    f.value.and_then(|t| t.to_i64s()).ok_or_else(|| Reject(format!("{what} must be a constant integer tensor")))
}

pub(crate) fn check_dtype(op: &str, f: &Fact, allowed: &[DType]) -> Result<(), Reject> {
    if allowed.contains(&f.ty.dtype) {
        Ok(())
    } else {
        Err(Reject(format!("{op} does not take {} (allowed: {})", f.ty.dtype, names(allowed))))
    }
}

pub(crate) fn names(d: &[DType]) -> String {
    d.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}

pub(crate) fn attr_int(attrs: &Attrs, key: &str, default: i64) -> Result<i64, Reject> {
    match attrs.get(key) {
        None => Ok(default),
        Some(Attr::Int(v)) => Ok(*v),
        Some(_) => Err(Reject(format!("attribute '{key}' must be an int"))),
    }
}

pub(crate) fn attr_float(attrs: &Attrs, key: &str, default: f32) -> Result<f32, Reject> {
    match attrs.get(key) {
        None => Ok(default),
        Some(Attr::Float(v)) => Ok(*v),
        Some(_) => Err(Reject(format!("attribute '{key}' must be a float"))),
    }
}

pub(crate) fn attr_ints(attrs: &Attrs, key: &str) -> Result<Option<Vec<i64>>, Reject> {
    match attrs.get(key) {
        None => Ok(None),
        Some(Attr::Ints(v)) => Ok(Some(v.clone())),
        Some(_) => Err(Reject(format!("attribute '{key}' must be a list of ints"))),
    }
}

pub(crate) fn attr_string(attrs: &Attrs, key: &str, default: &str) -> Result<String, Reject> {
    match attrs.get(key) {
        None => Ok(default.to_string()),
        Some(Attr::String(v)) => Ok(String::from_utf8_lossy(v).into_owned()),
        Some(_) => Err(Reject(format!("attribute '{key}' must be a string"))),
    }
}

/// Normalizes a possibly negative axis for a tensor of `rank` (rejects out-of-range).
pub(crate) fn norm_axis(axis: i64, rank: usize, what: &str) -> Result<usize, Reject> {
    let r = rank as i64;
    if axis < -r || axis >= r.max(1) || (rank == 0 && axis != 0 && axis != -1) {
        reject!("{what} {axis} is out of range for rank {rank}");
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Numpy-style multidirectional broadcast of static shapes.
pub(crate) fn broadcast(shapes: &[Vec<usize>]) -> Result<Vec<usize>, Reject> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                reject!("shapes {:?} do not broadcast", shapes);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_has_at_least_forty_ops_with_unique_names() {
        let reg = registry();
        assert!(reg.len() >= 40, "only {} ops", reg.len());
        let mut names: Vec<_> = reg.iter().map(|s| (s.domain(), s.name())).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), reg.len(), "duplicate op names in the registry");
        assert!(lookup("", "Conv").is_some() && lookup("ai.onnx", "Conv").is_some());
        assert!(lookup("", "NoSuchOp").is_none());
    }

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[vec![2, 1, 3], vec![4, 1]]).unwrap(), vec![2, 4, 3]);
        assert_eq!(broadcast(&[vec![], vec![5]]).unwrap(), vec![5]);
        assert!(broadcast(&[vec![2], vec![3]]).is_err());
    }

    #[test]
    fn axes_normalize_and_reject() {
        assert_eq!(norm_axis(-1, 3, "axis").unwrap(), 2);
        assert!(norm_axis(3, 3, "axis").is_err());
        assert!(norm_axis(-4, 3, "axis").is_err());
    }
}
