//! Nodes: an operator of some dialect (ONNX domain, or later a Relax op), its attributes and named wires.

use super::{Graph, Tensor};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fmt;

/// Which operator a node applies. `domain` is the ONNX domain (`""` = ai.onnx) or another dialect's namespace
/// (e.g. `relax`), so nothing in the core assumes ONNX.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId {
    pub domain: String,
    pub name: String,
}

impl OpId {
    pub fn onnx(name: &str) -> OpId {
        OpId { domain: String::new(), name: name.to_string() }
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.domain.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}::{}", self.domain, self.name)
        }
    }
}

/// An attribute value. A subgraph (the bodies of If, Loop, Scan) is a [`Graph`] of its own whose nodes may read
/// values of the enclosing graphs (outer scope). Kinds oatest does not interpret (lists of graphs, type protos,
/// sparse tensors, attribute references) are kept as the encoded `AttributeProto` so they round-trip unchanged.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f32),
    String(Vec<u8>),
    Tensor(Tensor),
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Strings(Vec<Vec<u8>>),
    Graph(Box<Graph>),
    Opaque(Vec<u8>),
}

impl Attr {
    pub fn str(s: &str) -> Attr {
        Attr::String(s.as_bytes().to_vec())
    }
}

pub type Attrs = BTreeMap<String, Attr>;

/// One operator application. `inputs` may hold `""` for an omitted optional input (ONNX convention).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub op: OpId,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attrs: Attrs,
}

impl Node {
    pub fn new(name: impl Into<String>, op: OpId, inputs: Vec<String>, outputs: Vec<String>) -> Node {
        Node { name: name.into(), op, inputs, outputs, attrs: Attrs::new() }
    }

    pub fn with_attr(mut self, key: &str, value: Attr) -> Node {
        self.attrs.insert(key.to_string(), value);
        self
    }

    /// The subgraphs among its attributes, by attribute name (in name order).
    pub fn subgraphs(&self) -> impl Iterator<Item = (&String, &Graph)> {
        self.attrs.iter().filter_map(|(k, a)| match a {
            Attr::Graph(g) => Some((k, g.as_ref())),
            _ => None,
        })
    }

    /// Values of the enclosing graph that its subgraphs read (outer scope), beside its explicit inputs.
    pub fn implicit_inputs(&self) -> BTreeSet<String> {
        self.subgraphs().flat_map(|(_, g)| g.outer_reads()).collect()
    }

    /// Which body output gives output `slot` of a control-flow node: the same index for If and Scan, the one after
    /// the condition for Loop; None for other ops.
    pub fn body_output(&self, slot: usize) -> Option<usize> {
        match (self.op.domain.as_str(), self.op.name.as_str()) {
            ("", "If" | "Scan") => Some(slot),
            ("", "Loop") => Some(slot + 1),
            _ => None,
        }
    }

    /// Every value the node reads: its explicit inputs (without omitted ones), then its implicit inputs.
    pub fn reads(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inputs.iter().filter(|i| !i.is_empty()).cloned().collect();
        v.extend(self.implicit_inputs());
        v
    }

    pub fn attr_int(&self, key: &str) -> Option<i64> {
        match self.attrs.get(key)? {
            Attr::Int(v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}({})", self.outputs.join(", "), self.op, self.inputs.join(", "))?;
        if !self.name.is_empty() {
            write!(f, "  # {}", self.name)?;
        }
        Ok(())
    }
}
