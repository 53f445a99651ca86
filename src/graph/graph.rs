//! The computational graph: nodes in a petgraph DAG, wires named by the values they carry, plus the model wrapper.

use super::{GraphError, Node, Tensor, TensorType, ValueType};
use indexmap::IndexMap;
use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::{EdgeRef, IntoEdgeReferences};
use petgraph::Direction;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// A node's id. Stable while the node lives; node *names* are what survives export and import.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub NodeIndex);

/// A wire's source: output `slot` of `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outlet {
    pub node: NodeId,
    pub slot: usize,
}

/// A dataflow edge: producer output slot to consumer input slot ([`Wire::IMPLICIT`]: read by a subgraph of the
/// consumer, outer scope).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wire {
    pub from_slot: usize,
    pub to_slot: usize,
}

impl Wire {
    /// The `to_slot` of an edge to a node whose subgraph reads the value (If, Loop, Scan bodies).
    pub const IMPLICIT: usize = usize::MAX;
}

/// A graph. Values are named (ONNX style); a value is a graph input, an initializer, or a node output.
/// Nodes are added producers first, so the DAG edges always mirror the names.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub name: String,
    dag: StableDiGraph<Node, Wire>,
    producers: HashMap<String, Outlet>,
    /// Graph inputs, in order (names; their types are in `types`).
    pub inputs: Vec<String>,
    /// Graph outputs, in order (names; their types are in `types`).
    pub outputs: Vec<String>,
    pub initializers: IndexMap<String, Tensor>,
    /// Declared types: every graph input and output, and any intermediate value with known type.
    pub types: IndexMap<String, ValueType>,
}

impl Graph {
    pub fn new(name: impl Into<String>) -> Graph {
        Graph { name: name.into(), ..Default::default() }
    }

    pub fn add_input(&mut self, name: &str, ty: impl Into<ValueType>) {
        self.inputs.push(name.to_string());
        self.types.insert(name.to_string(), ty.into());
    }

    pub fn add_output(&mut self, name: &str, ty: impl Into<ValueType>) {
        self.outputs.push(name.to_string());
        self.types.insert(name.to_string(), ty.into());
    }

    pub fn add_initializer(&mut self, name: &str, t: Tensor) {
        self.initializers.insert(name.to_string(), t);
    }

    /// Adds a node; its inputs produced by earlier nodes are wired. A value produced twice is an error.
    pub fn add_node(&mut self, node: Node) -> Result<NodeId, GraphError> {
        for out in node.outputs.iter().filter(|o| !o.is_empty()) {
            if self.producers.contains_key(out) || self.inputs.contains(out) || self.initializers.contains_key(out) {
                return Err(GraphError::Redefined { value: out.clone(), node: node.name.clone() });
            }
        }
        let mut ins: Vec<(usize, Outlet)> = node
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(slot, name)| self.producers.get(name).map(|&o| (slot, o)))
            .collect();
        ins.extend(
            node.implicit_inputs().iter().filter_map(|name| self.producers.get(name).map(|&o| (Wire::IMPLICIT, o))),
        );
        let outs: Vec<String> = node.outputs.clone();
        let id = NodeId(self.dag.add_node(node));
        for (to_slot, from) in ins {
            self.dag.add_edge(from.node.0, id.0, Wire { from_slot: from.slot, to_slot });
        }
        for (slot, out) in outs.into_iter().enumerate().filter(|(_, o)| !o.is_empty()) {
            self.producers.insert(out, Outlet { node: id, slot });
        }
        Ok(id)
    }

    /// Removes a node and returns it; its outputs become undefined (validation will say where they were used).
    pub fn remove_node(&mut self, id: NodeId) -> Option<Node> {
        let node = self.dag.remove_node(id.0)?;
        for out in &node.outputs {
            if self.producers.get(out).map(|o| o.node) == Some(id) {
                self.producers.remove(out);
            }
        }
        Some(node)
    }

    /// Points input `slot` of node `id` at value `value`, rewiring the DAG edge.
    pub fn set_input(&mut self, id: NodeId, slot: usize, value: &str) {
        let stale: Vec<_> = self
            .dag
            .edges_directed(id.0, Direction::Incoming)
            .filter(|e| e.weight().to_slot == slot)
            .map(|e| e.id())
            .collect();
        for e in stale {
            self.dag.remove_edge(e);
        }
        self.dag[id.0].inputs[slot] = value.to_string();
        if let Some(&from) = self.producers.get(value) {
            self.dag.add_edge(from.node.0, id.0, Wire { from_slot: from.slot, to_slot: slot });
        }
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.dag[id.0]
    }

    /// Mutable access for attribute edits. Rewire inputs with `set_input`, never through this.
    pub fn node_attrs_mut(&mut self, id: NodeId) -> &mut super::Attrs {
        &mut self.dag[id.0].attrs
    }

    pub fn node_count(&self) -> usize {
        self.dag.node_count()
    }

    /// Nodes of this graph and of every body of its If, Loop and Scan nodes, however deep.
    pub fn node_count_deep(&self) -> usize {
        self.dag.node_weights().map(|n| 1 + n.subgraphs().map(|(_, g)| g.node_count_deep()).sum::<usize>()).sum()
    }

    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.dag.node_indices().map(NodeId)
    }

    pub fn producer(&self, value: &str) -> Option<Outlet> {
        self.producers.get(value).copied()
    }

    /// Nodes (and input slots) that read `value`.
    pub fn consumers(&self, value: &str) -> Vec<(NodeId, usize)> {
        let mut v: Vec<(NodeId, usize)> = self
            .dag
            .node_indices()
            .flat_map(|n| {
                self.dag[n].inputs.iter().enumerate().filter(|(_, i)| *i == value).map(move |(s, _)| (NodeId(n), s))
            })
            .collect();
        v.sort();
        v
    }

    /// Whether `value` is a graph input, an initializer or a node output.
    pub fn is_defined(&self, value: &str) -> bool {
        self.producers.contains_key(value)
            || self.inputs.iter().any(|i| i == value)
            || self.initializers.contains_key(value)
    }

    /// The declared tensor type of a value, or an initializer's own type.
    pub fn tensor_type(&self, value: &str) -> Option<TensorType> {
        match self.types.get(value) {
            Some(ValueType::Tensor(t)) => Some(t.clone()),
            Some(ValueType::Opaque(_)) => None,
            None => self.initializers.get(value).map(|t| t.ty()),
        }
    }

    /// Frees fixed dims of the graph inputs (initializers aside): a dim whose size one of `names` gives, as
    /// (dim_param, size), becomes that symbolic dim; what the graph computes on inputs of those sizes is
    /// unchanged. Returns how many dims it freed.
    pub fn free_input_dims(&mut self, names: &[(String, i64)]) -> usize {
        let mut freed = 0;
        for input in self.inputs.iter().filter(|i| !self.initializers.contains_key(*i)) {
            let Some(ValueType::Tensor(TensorType { shape: Some(dims), .. })) = self.types.get_mut(input) else {
                continue;
            };
            for d in dims.iter_mut() {
                if let super::Dim::Fixed(n) = d {
                    if let Some((name, _)) = names.iter().find(|(_, size)| size == n) {
                        *d = super::Dim::Sym(name.clone());
                        freed += 1;
                    }
                }
            }
        }
        freed
    }

    /// Whether a graph input (initializers aside) has a named symbolic dim.
    pub fn has_symbolic_inputs(&self) -> bool {
        self.inputs.iter().filter(|i| !self.initializers.contains_key(*i)).any(|i| {
            self.tensor_type(i)
                .and_then(|t| t.shape)
                .is_some_and(|s| s.iter().any(|d| matches!(d, super::Dim::Sym(n) if !n.is_empty())))
        })
    }

    /// Values its nodes read (subgraphs included) that it does not define itself: what a subgraph takes from
    /// its enclosing graphs. Empty for a closed graph.
    pub fn outer_reads(&self) -> std::collections::BTreeSet<String> {
        let mut defined: std::collections::HashSet<&str> =
            self.inputs.iter().chain(self.initializers.keys()).map(|s| s.as_str()).collect();
        for id in self.node_ids() {
            defined.extend(self.node(id).outputs.iter().map(|s| s.as_str()));
        }
        self.node_ids().flat_map(|id| self.node(id).reads()).filter(|v| !defined.contains(v.as_str())).collect()
    }

    /// A graph with this one's name, interface, constants and declared types, and `nodes` (producers first).
    pub fn with_nodes(&self, nodes: impl IntoIterator<Item = Node>) -> Result<Graph, GraphError> {
        let mut g = Graph::new(self.name.clone());
        (g.inputs, g.outputs) = (self.inputs.clone(), self.outputs.clone());
        (g.initializers, g.types) = (self.initializers.clone(), self.types.clone());
        for n in nodes {
            g.add_node(n)?;
        }
        Ok(g)
    }

    /// Applies `f` to every subgraph of node `id` (its implicit-input edges are not recomputed: rebuild the graph
    /// when `f` changes what a body reads from this one).
    pub fn edit_bodies(&mut self, id: NodeId, mut f: impl FnMut(&mut Graph)) {
        for a in self.dag[id.0].attrs.values_mut() {
            if let super::Attr::Graph(g) = a {
                f(g);
            }
        }
    }

    /// Whether any node holds a subgraph (control flow).
    pub fn has_subgraphs(&self) -> bool {
        self.node_ids().any(|id| self.node(id).subgraphs().next().is_some())
    }

    /// A topological order that keeps insertion order wherever the dependencies allow (deterministic).
    /// Err names a node on a cycle.
    pub fn topo_order(&self) -> Result<Vec<NodeId>, GraphError> {
        let mut indeg: BTreeMap<NodeIndex, usize> = self.dag.node_indices().map(|n| (n, 0)).collect();
        for e in self.dag.edge_references() {
            *indeg.get_mut(&e.target()).unwrap() += 1;
        }
        let mut ready: BinaryHeap<Reverse<NodeIndex>> =
            indeg.iter().filter(|(_, &d)| d == 0).map(|(&n, _)| Reverse(n)).collect();
        let mut order = Vec::with_capacity(indeg.len());
        while let Some(Reverse(n)) = ready.pop() {
            order.push(NodeId(n));
            for e in self.dag.edges_directed(n, Direction::Outgoing) {
                let d = indeg.get_mut(&e.target()).unwrap();
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse(e.target()));
                }
            }
        }
        if order.len() != self.dag.node_count() {
            let stuck = self.dag.node_indices().find(|n| !order.contains(&NodeId(*n))).unwrap();
            return Err(GraphError::Cycle { node: self.dag[stuck].name.clone() });
        }
        Ok(order)
    }

    /// Nodes in topological order.
    pub fn nodes_in_order(&self) -> Result<Vec<&Node>, GraphError> {
        Ok(self.topo_order()?.into_iter().map(|id| self.node(id)).collect())
    }
}

/// Graphs are equal when their names, interfaces, constants, declared types and nodes in order are.
impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        let nodes = |g: &Graph| g.nodes_in_order().unwrap_or_default().into_iter().cloned().collect::<Vec<Node>>();
        self.name == other.name
            && self.inputs == other.inputs
            && self.outputs == other.outputs
            && self.initializers == other.initializers
            && self.types == other.types
            && nodes(self) == nodes(other)
    }
}

/// A model: a graph plus the versions it is written for and what oatest keeps verbatim.
#[derive(Clone, Debug)]
pub struct Model {
    pub ir_version: i64,
    /// Operator set version per domain (`""` = ai.onnx).
    pub opsets: BTreeMap<String, i64>,
    pub producer_name: String,
    pub producer_version: String,
    pub doc_string: String,
    pub metadata: Vec<(String, String)>,
    /// Model-local functions, as encoded `FunctionProto`s.
    pub functions: Vec<Vec<u8>>,
    pub graph: Graph,
}

/// IR version oatest writes unless told otherwise: every ONNX Runtime from 1.17 on loads it.
pub const DEFAULT_IR_VERSION: i64 = 9;
/// ai.onnx opset oatest writes unless told otherwise.
pub const DEFAULT_OPSET: i64 = 20;

impl Model {
    pub fn new(graph: Graph) -> Model {
        Model {
            ir_version: DEFAULT_IR_VERSION,
            opsets: BTreeMap::from([(String::new(), DEFAULT_OPSET)]),
            producer_name: "oatest".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            doc_string: String::new(),
            metadata: Vec::new(),
            functions: Vec::new(),
            graph,
        }
    }

    pub fn opset(&self) -> i64 {
        self.opsets.get("").copied().unwrap_or(0)
    }
}
