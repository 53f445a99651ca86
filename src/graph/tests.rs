//! Round-trip tests of the ONNX import/export on graphs built here and on generated seeds.

use super::onnx::{decode_model, decode_tensor, encode_model, encode_tensor};
use super::*;

#[test]
fn generated_seeds_round_trip_to_identical_bytes() {
    for i in 0..200 {
        let m = crate::seedgen::generate(9, i, &Default::default());
        let bytes = encode_model(&m);
        let back = decode_model(&bytes).unwrap();
        assert_eq!(encode_model(&back), bytes, "seed {i}");
        assert_eq!(back.graph.node_count(), m.graph.node_count());
        assert_eq!(back.graph.initializers, m.graph.initializers);
        assert_eq!(back.graph.types, m.graph.types);
        back.graph.validate().unwrap();
    }
}

#[test]
fn attributes_symbolic_dims_and_opaque_types_survive() {
    let mut g = Graph::new("g");
    g.add_input(
        "x",
        TensorType {
            dtype: DType::F32,
            shape: Some(vec![Dim::Sym("N".into()), Dim::Fixed(3), Dim::Sym(String::new())]),
        },
    );
    g.add_input("u", TensorType { dtype: DType::BF16, shape: None });
    let n = Node::new(
        "n",
        OpId { domain: "com.example".into(), name: "Custom".into() },
        vec!["x".into(), "".into()],
        vec!["y".into()],
    )
    .with_attr("i", Attr::Int(-3))
    .with_attr("f", Attr::Float(0.25))
    .with_attr("s", Attr::str("hello"))
    .with_attr("is", Attr::Ints(vec![1, 2]))
    .with_attr("fs", Attr::Floats(vec![1.5]))
    .with_attr("ss", Attr::Strings(vec![b"a".to_vec()]))
    .with_attr("t", Attr::Tensor(Tensor::from_i64(&[2], &[7, 8])));
    g.add_node(n).unwrap();
    g.add_output("y", TensorType::new(DType::F64, &[]));
    g.add_initializer(
        "w",
        Tensor { dtype: DType::Str, dims: vec![2], data: TensorData::Strings(vec![b"p".to_vec(), b"q".to_vec()]) },
    );
    let mut m = Model::new(g);
    m.opsets.insert("com.example".into(), 1);
    m.metadata.push(("k".into(), "v".into()));
    let back = decode_model(&encode_model(&m)).unwrap();
    assert_eq!(back.graph.types, m.graph.types);
    assert_eq!(back.graph.initializers, m.graph.initializers);
    assert_eq!(back.opsets, m.opsets);
    assert_eq!(back.metadata, m.metadata);
    let (a, b) = (m.graph.nodes_in_order().unwrap(), back.graph.nodes_in_order().unwrap());
    assert_eq!(a, b);
}

#[test]
fn standalone_tensors_round_trip() {
    let t = Tensor::from_f64s(DType::F16, &[3], &[0.5, -1.0, 2.0]);
    let (name, back) = decode_tensor(&encode_tensor("input_0", &t)).unwrap();
    assert_eq!((name.as_str(), back), ("input_0", t));
}

#[test]
fn corrupt_tensors_are_rejected_with_their_name() {
    let t = Tensor { dtype: DType::F32, dims: vec![4], data: TensorData::Raw(vec![0; 5]) };
    let err = decode_tensor(&encode_tensor("w", &t)).unwrap_err().to_string();
    assert!(err.contains("'w'") && err.contains("5 bytes"), "{err}");
}

#[test]
fn out_of_order_nodes_are_sorted_on_import() {
    let mut g = Graph::new("g");
    g.add_input("x", TensorType::new(DType::F32, &[1]));
    g.add_node(Node::new("b", OpId::onnx("Relu"), vec!["y".into()], vec!["z".into()])).unwrap();
    g.add_node(Node::new("a", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()])).unwrap();
    g.add_output("z", TensorType::new(DType::F32, &[1]));
    // b was added before its producer, so the DAG has no edge a->b; export writes insertion order (b, a)
    let back = decode_model(&encode_model(&Model::new(g))).unwrap();
    let names: Vec<_> = back.graph.nodes_in_order().unwrap().iter().map(|n| n.name.clone()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn deep_node_count_counts_bodies_of_bodies() {
    let t = TensorType::new(DType::F32, &[2]);
    let chain = |name: &str, n: usize| {
        let mut g = Graph::new(name);
        for i in 0..n {
            let input = if i == 0 { "x".to_string() } else { format!("{name}{}", i - 1) };
            g.add_node(Node::new(&format!("{name}n{i}"), OpId::onnx("Neg"), vec![input], vec![format!("{name}{i}")]))
                .unwrap();
        }
        g.add_output(&format!("{name}{}", n - 1), t.clone());
        g
    };
    let if_of = |then: Graph, els: Graph, out: &str| {
        Node::new("if", OpId::onnx("If"), vec!["c".into()], vec![out.into()])
            .with_attr("then_branch", Attr::Graph(Box::new(then)))
            .with_attr("else_branch", Attr::Graph(Box::new(els)))
    };
    let mut inner = Graph::new("inner");
    inner.add_node(if_of(chain("a", 3), chain("b", 2), "io")).unwrap();
    inner.add_output("io", t.clone());
    let mut g = Graph::new("g");
    g.add_input("x", t.clone());
    g.add_input("c", TensorType::new(DType::Bool, &[]));
    g.add_node(if_of(inner, chain("e", 4), "y")).unwrap();
    g.add_output("y", t);
    assert_eq!(g.node_count(), 1);
    assert_eq!(g.node_count_deep(), 1 + (1 + 3 + 2) + 4);
}

/// A value two Constant nodes (and an initializer) define is read as ONNX Runtime reads it: the last Constant
/// counts (ORT: "Duplicate initializer ... the model will use the latest encountered initializer"); a value two
/// other nodes define is still an error.
#[test]
fn a_value_several_constants_define_takes_the_last_as_onnx_runtime_does() {
    use super::onnx::pb;
    use prost::Message;
    let scalar =
        |v: f32| pb::TensorProto { dims: vec![], data_type: Some(1), float_data: vec![v], ..Default::default() };
    let constant = |name: &str, v: f32| pb::NodeProto {
        op_type: Some("Constant".into()),
        name: Some(name.into()),
        output: vec!["c".into()],
        attribute: vec![pb::AttributeProto {
            name: Some("value".into()),
            r#type: Some(4),
            t: Some(scalar(v)),
            ..Default::default()
        }],
        ..Default::default()
    };
    let node = |op: &str, ins: &[&str], out: &str| pb::NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        ..Default::default()
    };
    let ty = || pb::TypeProto {
        value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
            elem_type: Some(1),
            shape: Some(pb::TensorShapeProto { dim: vec![] }),
        })),
        ..Default::default()
    };
    let vi = |n: &str| pb::ValueInfoProto { name: Some(n.into()), r#type: Some(ty()), ..Default::default() };
    let model = |nodes: Vec<pb::NodeProto>| {
        let mut init = scalar(1.0);
        init.name = Some("c".into());
        let graph = pb::GraphProto {
            name: Some("g".into()),
            node: nodes,
            initializer: vec![init],
            input: vec![vi("x")],
            output: vec![vi("y")],
            ..Default::default()
        };
        let opset = pb::OperatorSetIdProto { domain: Some(String::new()), version: Some(17) };
        pb::ModelProto { ir_version: Some(8), opset_import: vec![opset], graph: Some(graph), ..Default::default() }
            .encode_to_vec()
    };
    let m = decode_model(&model(vec![constant("first", 2.0), node("Add", &["x", "c"], "y"), constant("last", 3.0)]))
        .unwrap();
    let nodes = m.graph.nodes_in_order().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    assert!(names.contains(&"last") && !names.contains(&"first"), "{names:?}");
    assert!(m.graph.initializers.is_empty());
    let err = decode_model(&model(vec![node("Neg", &["x"], "c"), node("Add", &["x", "c"], "y")])).unwrap_err();
    assert!(err.to_string().contains("defined twice"), "{err}");
}
