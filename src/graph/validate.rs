//! Structural validation of a graph: every wire defined once and used after definition, outputs typed, no cycle.

use super::Graph;
use std::collections::HashSet;

/// What is wrong with a graph's structure. Each variant names the value and node concerned.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GraphError {
    #[error("value '{value}' is defined twice (again by node '{node}')")]
    Redefined { value: String, node: String },
    #[error("node '{node}' reads '{value}', which no graph input, initializer or node defines")]
    Undefined { value: String, node: String },
    #[error("graph output '{value}' is not defined")]
    OutputUndefined { value: String },
    #[error("graph {role} '{value}' has no type")]
    MissingType { value: String, role: &'static str },
    #[error("graph input '{value}' is listed twice")]
    DuplicateInput { value: String },
    #[error("the graph has a cycle through node '{node}'")]
    Cycle { node: String },
    #[error("the graph has no outputs")]
    NoOutputs,
    #[error("subgraph '{graph}' lists output '{value}' twice")]
    DuplicateOutput { value: String, graph: String },
    #[error("subgraph '{graph}' defines '{value}', which its enclosing graph already defines (ONNX wants SSA)")]
    Shadowed { value: String, graph: String },
}

impl Graph {
    /// Checks the structure, subgraphs included; the first problem found is returned.
    pub fn validate(&self) -> Result<(), GraphError> {
        self.validate_in(&HashSet::new(), true)
    }

    /// Checks a graph whose nodes may also read `outer` (the values of its enclosing graphs). A subgraph's
    /// outputs may be untyped (inference gives them their type).
    fn validate_in(&self, outer: &HashSet<String>, top: bool) -> Result<(), GraphError> {
        let defined = self.node_ids().flat_map(|id| self.node(id).outputs.iter());
        if let Some(v) = self.inputs.iter().chain(self.initializers.keys()).chain(defined).find(|v| outer.contains(*v))
        {
            return Err(GraphError::Shadowed { value: v.clone(), graph: self.name.clone() });
        }
        if !top {
            let mut outs = HashSet::new();
            if let Some(o) = self.outputs.iter().find(|o| !outs.insert(o.as_str())) {
                return Err(GraphError::DuplicateOutput { value: o.clone(), graph: self.name.clone() });
            }
        }
        let mut seen = HashSet::new();
        for i in &self.inputs {
            if !seen.insert(i.as_str()) {
                return Err(GraphError::DuplicateInput { value: i.clone() });
            }
            if !self.types.contains_key(i) {
                return Err(GraphError::MissingType { value: i.clone(), role: "input" });
            }
        }
        if self.outputs.is_empty() {
            return Err(GraphError::NoOutputs);
        }
        let order = self.topo_order()?;
        let mut inner: Option<HashSet<String>> = None;
        for id in order {
            let node = self.node(id);
            for inp in node.reads() {
                if !self.is_defined(&inp) && !outer.contains(&inp) {
                    return Err(GraphError::Undefined { value: inp, node: node.name.clone() });
                }
            }
            for (_, sub) in node.subgraphs() {
                let scope = inner.get_or_insert_with(|| {
                    let mut s = outer.clone();
                    s.extend(self.inputs.iter().chain(self.initializers.keys()).cloned());
                    s.extend(self.node_ids().flat_map(|i| self.node(i).outputs.clone()).filter(|o| !o.is_empty()));
                    s
                });
                sub.validate_in(scope, false)?;
            }
        }
        for o in &self.outputs {
            if !self.is_defined(o) && !(!top && outer.contains(o)) {
                return Err(GraphError::OutputUndefined { value: o.clone() });
            }
            if top && !self.types.contains_key(o) {
                return Err(GraphError::MissingType { value: o.clone(), role: "output" });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, Node, OpId, TensorType};

    fn relu(name: &str, x: &str, y: &str) -> Node {
        Node::new(name, OpId::onnx("Relu"), vec![x.into()], vec![y.into()])
    }

    fn base() -> Graph {
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        g
    }

    #[test]
    fn a_valid_chain_passes() {
        let mut g = base();
        g.add_node(relu("a", "x", "y")).unwrap();
        g.add_node(relu("b", "y", "z")).unwrap();
        g.add_output("z", TensorType::new(DType::F32, &[2]));
        assert_eq!(g.validate(), Ok(()));
        let names: Vec<_> = g.nodes_in_order().unwrap().iter().map(|n| n.name.clone()).collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn undefined_input_names_the_node() {
        let mut g = base();
        g.add_node(relu("a", "nope", "y")).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[2]));
        assert_eq!(g.validate(), Err(GraphError::Undefined { value: "nope".into(), node: "a".into() }));
    }

    #[test]
    fn redefinition_is_refused() {
        let mut g = base();
        g.add_node(relu("a", "x", "y")).unwrap();
        let err = g.add_node(relu("b", "x", "y")).unwrap_err();
        assert_eq!(err, GraphError::Redefined { value: "y".into(), node: "b".into() });
        assert!(g.add_node(relu("c", "x", "x")).is_err(), "a graph input cannot be redefined");
    }

    #[test]
    fn missing_output_and_types_are_reported() {
        let mut g = base();
        g.add_output("q", TensorType::new(DType::F32, &[2]));
        assert_eq!(g.validate(), Err(GraphError::OutputUndefined { value: "q".into() }));
        let mut g = base();
        g.add_node(relu("a", "x", "y")).unwrap();
        g.outputs.push("y".into());
        assert_eq!(g.validate(), Err(GraphError::MissingType { value: "y".into(), role: "output" }));
        assert_eq!(Graph::new("e").validate(), Err(GraphError::NoOutputs));
    }

    #[test]
    fn a_cycle_made_by_rewiring_is_detected() {
        let mut g = base();
        let a = g.add_node(relu("a", "x", "y")).unwrap();
        g.add_node(relu("b", "y", "z")).unwrap();
        g.add_output("z", TensorType::new(DType::F32, &[2]));
        g.set_input(a, 0, "z");
        assert!(matches!(g.validate(), Err(GraphError::Cycle { .. })));
    }

    #[test]
    fn removing_a_node_leaves_its_readers_undefined() {
        let mut g = base();
        let a = g.add_node(relu("a", "x", "y")).unwrap();
        g.add_node(relu("b", "y", "z")).unwrap();
        g.add_output("z", TensorType::new(DType::F32, &[2]));
        g.remove_node(a).unwrap();
        assert_eq!(g.validate(), Err(GraphError::Undefined { value: "y".into(), node: "b".into() }));
        assert_eq!(g.consumers("y").len(), 1);
    }

    #[test]
    fn a_subgraph_may_read_but_not_redefine_an_outer_value() {
        let mut g = base();
        g.add_node(relu("a", "x", "y")).unwrap();
        let mut body = Graph::new("b");
        body.add_node(relu("in", "x", "z")).unwrap();
        body.add_output("z", TensorType::new(DType::F32, &[2]));
        let mut bad = Graph::new("b");
        bad.add_node(relu("in", "x", "y")).unwrap();
        bad.add_output("y", TensorType::new(DType::F32, &[2]));
        let mut h = g.clone();
        g.add_node(
            Node::new("if", OpId::onnx("If"), vec!["y".into()], vec!["o".into()])
                .with_attr("then_branch", crate::graph::Attr::Graph(Box::new(body))),
        )
        .unwrap();
        g.add_output("o", TensorType::new(DType::F32, &[2]));
        assert_eq!(g.validate(), Ok(()));
        h.add_node(
            Node::new("if", OpId::onnx("If"), vec!["y".into()], vec!["o".into()])
                .with_attr("then_branch", crate::graph::Attr::Graph(Box::new(bad))),
        )
        .unwrap();
        h.add_output("o", TensorType::new(DType::F32, &[2]));
        assert_eq!(h.validate(), Err(GraphError::Shadowed { value: "y".into(), graph: "b".into() }));
        // a body listing one value twice (ORT then returns uninitialized memory for one of them)
        let id = g.node_ids().find(|&id| g.node(id).op.name == "If").unwrap();
        g.edit_bodies(id, |b| b.outputs.push("z".into()));
        assert_eq!(g.validate(), Err(GraphError::DuplicateOutput { value: "z".into(), graph: "b".into() }));
    }

    #[test]
    fn topo_order_follows_dependencies_not_insertion() {
        let mut g = base();
        let a = g.add_node(relu("a", "x", "y")).unwrap();
        g.add_node(relu("b", "x", "w")).unwrap();
        // rewire a to read b's output: a must now come after b
        g.set_input(a, 0, "w");
        g.add_output("y", TensorType::new(DType::F32, &[2]));
        let names: Vec<_> = g.nodes_in_order().unwrap().iter().map(|n| n.name.clone()).collect();
        assert_eq!(names, ["b", "a"]);
    }
}
