//! What a model carries but does not use: local functions no node calls (in the graph, in a subgraph or in a
//! function that is called), and opset imports of domains nothing uses. Pruning drops them and adds the
//! import of ONNX Runtime's contrib domain when its ops are used without one (ORT assumes it; onnx's checker
//! does not).

use super::onnx::pb;
use super::{Attr, Model};
use prost::Message;
use std::collections::BTreeSet;

/// ONNX Runtime's contrib-op domain; every op in it is version 1.
pub const MS_DOMAIN: &str = "com.microsoft";

/// (domain, op type) of every op a model's graph uses, subgraphs included.
type Ops = BTreeSet<(String, String)>;

fn graph_ops(g: &pb::GraphProto, out: &mut Ops) {
    for n in &g.node {
        node_ops(n, out);
    }
}

fn node_ops(n: &pb::NodeProto, out: &mut Ops) {
    out.insert((n.domain().to_string(), n.op_type().to_string()));
    for a in &n.attribute {
        if let Some(g) = &a.g {
            graph_ops(g, out);
        }
        for g in &a.graphs {
            graph_ops(g, out);
        }
    }
}

/// (domain, op type) of every op of an in-memory graph, subgraphs included.
fn ir_ops(g: &super::Graph, used: &mut Ops) {
    for id in g.node_ids() {
        let n = g.node(id);
        used.insert((n.op.domain.clone(), n.op.name.clone()));
        for a in n.attrs.values() {
            match a {
                Attr::Graph(sub) => ir_ops(sub, used),
                Attr::Opaque(bytes) => {
                    if let Ok(a) = pb::AttributeProto::decode(bytes.as_slice()) {
                        let node = pb::NodeProto { attribute: vec![a], ..Default::default() };
                        node_ops(&node, used);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Drops unused local functions and opset imports, and adds a missing `com.microsoft` import; returns whether
/// the model changed. A function that cannot be decoded is kept (and so are the domains it may use).
pub fn prune(m: &mut Model) -> bool {
    let mut used = Ops::new();
    ir_ops(&m.graph, &mut used);
    let functions: Vec<Option<pb::FunctionProto>> =
        m.functions.iter().map(|f| pb::FunctionProto::decode(f.as_slice()).ok()).collect();
    let mut keep: Vec<bool> = functions.iter().map(|f| f.is_none()).collect();
    let undecodable = keep.iter().any(|k| *k);
    let mut domains: BTreeSet<String> = BTreeSet::new();
    // a called function's body may call other functions: repeat until nothing more is kept
    loop {
        let mut more = false;
        for (i, f) in functions.iter().enumerate() {
            let Some(f) = f.as_ref().filter(|_| !keep[i]) else { continue };
            if used.contains(&(f.domain().to_string(), f.name().to_string())) {
                (keep[i], more) = (true, true);
                for n in &f.node {
                    node_ops(n, &mut used);
                }
                domains.extend(f.opset_import.iter().map(|o| o.domain().to_string()));
            }
        }
        if !more {
            break;
        }
    }
    let before = (m.functions.len(), m.opsets.clone());
    let mut k = keep.iter();
    m.functions.retain(|_| *k.next().unwrap_or(&true));
    domains.extend(used.iter().map(|(d, _)| d.clone()));
    let onnx_domain = |d: &str| d.is_empty() || d == "ai.onnx";
    m.opsets.retain(|d, _| onnx_domain(d) || undecodable || domains.contains(d));
    if domains.contains(MS_DOMAIN) && !m.opsets.contains_key(MS_DOMAIN) {
        m.opsets.insert(MS_DOMAIN.to_string(), 1);
    }
    before != (m.functions.len(), m.opsets.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DType, Graph, Node, OpId, TensorType};

    fn function(domain: &str, name: &str, calls: &[(&str, &str)], imports: &[(&str, i64)]) -> Vec<u8> {
        pb::FunctionProto {
            name: Some(name.into()),
            domain: Some(domain.into()),
            node: calls
                .iter()
                .map(|(d, op)| pb::NodeProto {
                    op_type: Some(op.to_string()),
                    domain: Some(d.to_string()),
                    ..Default::default()
                })
                .collect(),
            opset_import: imports
                .iter()
                .map(|(d, v)| pb::OperatorSetIdProto { domain: Some(d.to_string()), version: Some(*v) })
                .collect(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    fn model(op: OpId) -> Model {
        let mut g = Graph::new("g");
        let ty = TensorType::new(DType::F32, &[2]);
        g.add_input("x", ty.clone());
        g.add_node(Node::new("n", op, vec!["x".into()], vec!["y".into()])).unwrap();
        g.add_output("y", ty);
        Model::new(g)
    }

    #[test]
    fn only_called_functions_and_used_domains_stay() {
        let mut m = model(OpId { domain: "lib".into(), name: "Outer".into() });
        m.functions = vec![
            function("lib", "Outer", &[("lib", "Inner")], &[("", 18), ("lib", 1)]),
            function("lib", "Inner", &[("", "Shape")], &[("", 18)]),
            function("lib", "Unused", &[("other", "Thing")], &[("", 18), ("other", 1)]),
        ];
        m.opsets.extend([("lib".to_string(), 1), ("other".to_string(), 1), ("ai.onnx.ml".to_string(), 3)]);
        assert!(prune(&mut m));
        let names: Vec<String> =
            m.functions.iter().map(|f| pb::FunctionProto::decode(f.as_slice()).unwrap().name().to_string()).collect();
        assert_eq!(names, ["Outer", "Inner"]);
        assert_eq!(m.opsets.keys().cloned().collect::<Vec<_>>(), ["", "lib"]);
        assert!(!prune(&mut m), "a pruned model has nothing more to prune");
    }

    #[test]
    fn a_plain_model_loses_its_functions_and_contrib_ops_get_their_import() {
        let mut m = model(OpId::onnx("Relu"));
        m.functions = vec![function("lib", "F", &[("", "Relu")], &[("", 18)])];
        m.opsets.insert("lib".into(), 1);
        assert!(prune(&mut m));
        assert!(m.functions.is_empty() && m.opsets.len() == 1);
        let mut m = model(OpId { domain: MS_DOMAIN.into(), name: "FusedGelu".into() });
        assert!(prune(&mut m));
        assert_eq!(m.opsets.get(MS_DOMAIN), Some(&1));
    }
}
