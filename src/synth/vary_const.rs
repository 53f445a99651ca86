//! The `constant` variation: one constant of a pattern takes another form than its own test wrote. Either a float
//! initializer read only where any value is valid (a data operand of Add, Mul, MatMul, a Conv's weights, ...)
//! becomes an open input of the pattern, which the splice feeds from the seed like its other inputs: a pass that
//! needs a constant there must leave the pattern alone, and one that reads a value anyway is wrong (a fusion that
//! takes a computed bias for an initializer). Or an initializer becomes a Constant node: ONNX Runtime makes those
//! initializers when it loads a model, while TVM's importer and the Python optimizer read them their own way. Or
//! the indices a Gather reads from constants are written negative, which Gather reads as the same elements: its
//! own indices initializer, or the start and limit of the Range that computes them (directly or through the
//! `Clip(p, c, c)` extraction's `unfold` repair hides them in): a pass that turns a Range into a Slice reads
//! `-3..0` as an empty slice.

use crate::graph::{Attr, Graph, Node, OpId};
use crate::ops::Rng;
use crate::pattern::{abstract_type, Pattern, Port};
use rand::seq::IndexedRandom as _;
use rand::{Rng as _, SeedableRng as _};

/// The share of splices whose pattern gets one constant in another form.
pub const CONSTANT_SHARE: f64 = 0.25;

/// Constants larger than this many elements stay initializers (a fed input of that size is a large test).
const MAX_ELEMENTS: usize = 1 << 16;

/// (ai.onnx op, input slot) where any finite float of the slot's type is a valid value.
const ANY_VALUE: &[(&str, &[usize])] = &[
    ("Add", &[0, 1]),
    ("Sub", &[0, 1]),
    ("Mul", &[0, 1]),
    ("Div", &[0]),
    ("MatMul", &[0, 1]),
    ("Gemm", &[0, 1, 2]),
    ("Conv", &[1, 2]),
    ("ConvTranspose", &[1, 2]),
    ("LayerNormalization", &[1, 2]),
    ("InstanceNormalization", &[1, 2]),
    ("BatchNormalization", &[1, 2]),
    ("PRelu", &[1]),
    ("Where", &[1, 2]),
    ("Concat", &[0, 1, 2, 3, 4, 5, 6, 7]),
    ("Max", &[0, 1]),
    ("Min", &[0, 1]),
    ("Sum", &[0, 1, 2]),
    ("Relu", &[0]),
    ("Sigmoid", &[0]),
    ("Tanh", &[0]),
];

/// How the varied constant is written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Form {
    /// An open input of the pattern (fed by the splice).
    Input,
    /// A Constant node.
    Node,
}

/// The integer constant a value is, by initializer name: an initializer, or `Clip(p, c, c)` of one (`c` whatever
/// `p` holds).
fn constant_of<'a>(g: &'a Graph, value: &'a str) -> Option<&'a str> {
    if g.initializers.contains_key(value) && !g.inputs.iter().any(|i| i == value) {
        return Some(value);
    }
    let n = g.node(g.producer(value)?.node);
    let clip = n.op.name == "Clip" && matches!(n.op.domain.as_str(), "" | "ai.onnx") && n.inputs.len() == 3;
    (clip && n.inputs[1] == n.inputs[2] && g.initializers.contains_key(&n.inputs[1])).then_some(n.inputs[1].as_str())
}

/// The scalar value of integer initializer `name`, when every reader of it is among `readers`.
fn scalar_read_by(g: &Graph, name: &str, readers: &[crate::graph::NodeId]) -> Option<i64> {
    let t = g.initializers.get(name)?;
    let only = g.consumers(name).iter().all(|(id, _)| readers.contains(id));
    (only && t.numel() == 1 && t.dtype.is_signed() && t.dtype.is_int()).then(|| t.to_i64s()?.first().copied())?
}

/// Where a pattern's Gather reads constant indices that may be written negative (the same elements): per Gather,
/// the initializers to shift and the size of the dimension they index. Its own indices initializer (every index
/// in range, one at least not negative), or a Range's start and limit (delta > 0, `0 <= start < limit <= dim`)
/// when the Range feeds only that Gather.
pub(super) fn negative_sites(g: &Graph) -> Vec<Vec<(String, i64)>> {
    let mut out = Vec::new();
    for id in g.node_ids() {
        let n = g.node(id);
        if n.op.name != "Gather" || !matches!(n.op.domain.as_str(), "" | "ai.onnx") || n.inputs.len() != 2 {
            continue;
        }
        let Some(shape) = g.tensor_type(&n.inputs[0]).and_then(|t| t.shape) else { continue };
        let rank = shape.len() as i64;
        let axis = n.attr_int("axis").unwrap_or(0);
        let axis = if axis < 0 { axis + rank } else { axis };
        let Some(crate::graph::Dim::Fixed(dim)) = usize::try_from(axis).ok().and_then(|a| shape.get(a)).cloned() else {
            continue;
        };
        let indices = &n.inputs[1];
        if let Some(t) = g.initializers.get(indices).filter(|_| !g.inputs.contains(indices)) {
            let Some(v) = t.to_i64s().filter(|_| t.dtype.is_signed()) else { continue };
            let in_range = v.iter().all(|&i| (-dim..dim).contains(&i)) && v.iter().any(|&i| i >= 0);
            if in_range && g.consumers(indices).len() == 1 {
                out.push(vec![(indices.clone(), dim)]);
            }
            continue;
        }
        let Some(range) = g.producer(indices).map(|o| o.node) else { continue };
        let r = g.node(range);
        if r.op.name != "Range" || r.inputs.len() != 3 || g.consumers(indices).len() != 1 {
            continue;
        }
        let Some(c) = r.inputs.iter().map(|v| constant_of(g, v)).collect::<Option<Vec<&str>>>() else { continue };
        // readers: the Range and the Clips that hide its constants
        let readers: Vec<crate::graph::NodeId> =
            std::iter::once(range).chain(r.inputs.iter().filter_map(|v| Some(g.producer(v)?.node))).collect();
        let Some(v) = c.iter().map(|name| scalar_read_by(g, name, &readers)).collect::<Option<Vec<i64>>>() else {
            continue;
        };
        let distinct = c[0] != c[1] && c[0] != c[2] && c[1] != c[2];
        if distinct && v[2] > 0 && 0 <= v[0] && v[0] < v[1] && v[1] <= dim {
            out.push(vec![(c[0].to_string(), dim), (c[1].to_string(), dim)]);
        }
    }
    out
}

/// Whether every reader of initializer `name` of `g` takes any value in that slot ([`ANY_VALUE`]).
fn any_value(g: &Graph, name: &str) -> bool {
    let readers = g.consumers(name);
    !readers.is_empty()
        && readers.iter().all(|&(id, slot)| {
            let n = g.node(id);
            matches!(n.op.domain.as_str(), "" | "ai.onnx")
                && ANY_VALUE.iter().any(|(op, slots)| *op == n.op.name && slots.contains(&slot))
        })
}

/// For [`CONSTANT_SHARE`] of the tags: pattern `p` with the constant indices of one Gather written negative (half
/// of the time, when it has [`negative_sites`]), else with one initializer as an open input (two thirds of the
/// time, when one may be; always for ONNX Runtime's patterns) or as a Constant node (not for ONNX Runtime's); None
/// for the other tags, or when the pattern has no initializer read by a node (one that is also a pattern input
/// stays: it is open already).
pub(super) fn reformed(p: &Pattern, tag: u64) -> Option<Pattern> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x0c05_7a07_0000_0006);
    if !vrng.random_bool(CONSTANT_SHARE) {
        return None;
    }
    let g = &p.model.graph;
    let mut read: Vec<&String> = g
        .initializers
        .keys()
        .filter(|v| !g.inputs.contains(v) && !g.outputs.contains(v) && !g.consumers(v).is_empty())
        .collect();
    read.sort();
    let open: Vec<&String> = read
        .iter()
        .copied()
        .filter(|v| g.initializers[*v].dtype.is_float() && g.initializers[*v].numel() <= MAX_ELEMENTS)
        .filter(|v| any_value(g, v))
        .collect();
    // half of the patterns with negative sites take one (not counting as another form)
    let negative = negative_sites(g);
    if !negative.is_empty() && vrng.random_bool(0.5) {
        let mut q = p.clone();
        for (name, dim) in negative.choose(&mut vrng)? {
            let t = q.model.graph.initializers.get_mut(name.as_str())?;
            let v: Vec<f64> = t.to_i64s()?.into_iter().map(|i| if i >= 0 { i - dim } else { i } as f64).collect();
            let dims: Vec<usize> = t.dims.iter().map(|&d| d.max(0) as usize).collect();
            *t = crate::graph::Tensor::from_f64s(t.dtype, &dims, &v);
        }
        return Some(q);
    }
    // ONNX Runtime makes every Constant node an initializer when it loads a model: for its patterns that form
    // would only repeat the pattern's own test
    let node_form = p.meta.compiler != "ort";
    let form = if !open.is_empty() && (!node_form || vrng.random_bool(2.0 / 3.0)) { Form::Input } else { Form::Node };
    if form == Form::Node && !node_form {
        return None;
    }
    let name = match form {
        Form::Input => open.choose(&mut vrng)?,
        Form::Node => read.choose(&mut vrng)?,
    };
    let mut q = p.clone();
    let t = q.model.graph.initializers.shift_remove(name.as_str())?;
    match form {
        Form::Input => {
            let ty = t.ty();
            let readers: Vec<String> = g.consumers(name).iter().map(|(id, _)| g.node(*id).op.name.clone()).collect();
            let readers: Vec<&str> = readers.iter().map(String::as_str).collect();
            q.model.graph.add_input(name, ty.clone());
            q.meta.inputs.push(Port { name: name.to_string(), abstract_ty: abstract_type(&ty, &readers), ty });
        }
        Form::Node => {
            let mut node =
                Node::new(format!("{name}_constant"), OpId::onnx("Constant"), vec![], vec![name.to_string()]);
            node.attrs.insert("value".to_string(), Attr::Tensor(t.clone()));
            // producers first: the Constant node before every node of the pattern
            let g = &q.model.graph;
            let nodes: Vec<Node> = g.nodes_in_order().ok()?.into_iter().cloned().collect();
            q.model.graph = g.with_nodes(std::iter::once(node).chain(nodes)).ok()?;
            q.model.graph.types.insert(name.to_string(), t.ty().into());
        }
    }
    Some(q)
}
