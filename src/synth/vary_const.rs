//! The `constant` variation: one constant of a pattern takes another form than its own test wrote. Either a float
//! initializer read only where any value is valid (a data operand of Add, Mul, MatMul, a Conv's weights, ...)
//! becomes an open input of the pattern, which the splice feeds from the seed like its other inputs: a pass that
//! needs a constant there must leave the pattern alone, and one that reads a value anyway is wrong (a fusion that
//! takes a computed bias for an initializer). Or an initializer becomes a Constant node: ONNX Runtime makes those
//! initializers when it loads a model, while TVM's importer and the Python optimizer read them their own way. Or
//! integer constants counting positions or dimensions are written negative ([`super::vary_negative`]).

use super::vary_negative::{negated, negative_sites};
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

/// For [`CONSTANT_SHARE`] of the tags: pattern `p` with the constants of one node written negative (half of the
/// time, when it has [`negative_sites`]), else with one initializer as an open input (two thirds of the
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
    // half of the patterns with constants that may be written negative are (not counting as another form)
    let negative = negative_sites(g);
    if !negative.is_empty() && vrng.random_bool(0.5) {
        return negated(p, &negative, &mut vrng);
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
