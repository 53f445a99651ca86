//! Cutting, abstraction, dedup keys and the file format, on small hand-built graphs.

use super::extract::{cut, diff_region, expand, make_pattern, regions};
use super::*;
use crate::graph::{Node, NodeId, OpId, Tensor};
use std::collections::HashMap;

fn t(d: &[usize]) -> TensorType {
    TensorType::new(DType::F32, d)
}

/// x -> Relu(a) -> Identity(b) -> Conv(c, with weight w) -> Abs(d) -> y
fn chain(prefix: &str) -> (Graph, HashMap<String, TensorType>) {
    let v = |s: &str| format!("{prefix}{s}");
    let mut g = Graph::new("g");
    g.add_input(&v("x"), t(&[1, 2, 4, 4]));
    g.add_initializer(&v("w"), Tensor::from_f32(&[3, 2, 1, 1], &[0.5; 6]));
    let node = |name: &str, op: &str, ins: Vec<String>, out: String| Node::new(v(name), OpId::onnx(op), ins, vec![out]);
    g.add_node(node("a", "Relu", vec![v("x")], v("r"))).unwrap();
    g.add_node(node("b", "Identity", vec![v("r")], v("i"))).unwrap();
    g.add_node(node("c", "Conv", vec![v("i"), v("w")], v("k"))).unwrap();
    g.add_node(node("d", "Abs", vec![v("k")], v("y"))).unwrap();
    g.add_output(&v("y"), t(&[1, 3, 4, 4]));
    let mut types = HashMap::new();
    for (n, ty) in [
        ("x", t(&[1, 2, 4, 4])),
        ("r", t(&[1, 2, 4, 4])),
        ("i", t(&[1, 2, 4, 4])),
        ("k", t(&[1, 3, 4, 4])),
        ("y", t(&[1, 3, 4, 4])),
    ] {
        types.insert(v(n), ty);
    }
    (g, types)
}

/// The chain after an EliminateIdentity-like rewrite: Conv reads r directly.
fn rewritten() -> Graph {
    let (mut g, _) = chain("");
    let ids: Vec<_> = g.node_ids().collect();
    g.remove_node(ids[1]).unwrap();
    g.set_input(ids[2], 0, "r");
    g
}

#[test]
fn the_diff_finds_exactly_the_rewritten_nodes() {
    let (g, _) = chain("");
    let region = diff_region(&g, &rewritten());
    let names: Vec<&str> = region.iter().map(|&id| g.node(id).name.as_str()).collect();
    assert_eq!(names, ["b", "c"], "Identity removed and Conv rewired");
    assert!(diff_region(&g, &g).is_empty());
}

#[test]
fn block_and_subgraph_cuts_have_the_right_boundaries() {
    let (g, types) = chain("");
    let region = diff_region(&g, &rewritten());
    let block = cut(&g, &expand(&g, &region, Granularity::Block), &types).unwrap();
    assert_eq!(block.node_count(), 2);
    assert_eq!(block.inputs, ["r"], "the open input is the region's input");
    assert_eq!(block.outputs, ["k"], "the open output is what the outside reads");
    assert!(block.initializers.contains_key("w"), "constants come along");
    let sub = cut(&g, &expand(&g, &region, Granularity::Subgraph), &types).unwrap();
    assert_eq!(sub.node_count(), 4, "producer Relu and consumer Abs join");
    assert_eq!(sub.inputs, ["x"]);
    assert_eq!(sub.outputs, ["y"]);
    sub.validate().unwrap();
    // a port of unknown type cannot be cut
    let mut partial = types.clone();
    partial.remove("r");
    assert!(cut(&g, &expand(&g, &region, Granularity::Block), &partial).is_none());
}

#[test]
fn the_context_cut_adds_the_other_readers_of_the_producers_outputs() {
    let (mut g, mut types) = chain("");
    g.add_node(Node::new("e", OpId::onnx("Neg"), vec!["r".into()], vec!["z".into()])).unwrap();
    g.add_output("z", t(&[1, 2, 4, 4]));
    types.insert("z".into(), t(&[1, 2, 4, 4]));
    // the Identity removed and the Conv rewired, as in `rewritten`
    let region: Vec<_> = g.node_ids().filter(|&id| ["b", "c"].contains(&g.node(id).name.as_str())).collect();
    let names = |gran| {
        let set = expand(&g, &region, gran);
        set.iter().map(|&id| g.node(id).name.clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(Granularity::Subgraph), ["a", "b", "c", "d"], "the sibling reader of r is not a neighbour");
    assert_eq!(names(Granularity::Context), ["a", "b", "c", "d", "e"], "the producer Relu's other reader joins");
    let ctx = cut(&g, &expand(&g, &region, Granularity::Context), &types).unwrap();
    assert_eq!(
        (ctx.inputs.clone(), ctx.outputs.clone()),
        (vec!["x".to_string()], vec!["y".to_string(), "z".to_string()])
    );
    ctx.validate().unwrap();
}

#[test]
fn regions_split_where_only_rewired_or_unrewritten_nodes_connect_them() {
    // x -> Div(1, x) -> Mul(y) -> Cast -> Div(1, .) -> Mul(z) -> Relu -> Abs, as div_mul.onnx chains its pairs
    let mut g = Graph::new("g");
    for v in ["x", "y", "z"] {
        g.add_input(v, t(&[2]));
    }
    g.add_initializer("one", Tensor::from_f32(&[1], &[1.0]));
    let node = |name: &str, op: &str, ins: &[&str]| {
        Node::new(name, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![format!("{name}_out")])
    };
    for n in [
        node("d1", "Div", &["one", "x"]),
        node("m1", "Mul", &["d1_out", "y"]),
        node("c", "Cast", &["m1_out"]),
        node("d2", "Div", &["one", "c_out"]),
        node("m2", "Mul", &["z", "d2_out"]),
        node("r", "Relu", &["m2_out"]),
        node("a", "Abs", &["r_out"]),
    ] {
        g.add_node(n).unwrap();
    }
    let id = |name: &str| g.node_ids().find(|&i| g.node(i).name == name).unwrap();
    let ids = |names: &[&str]| names.iter().map(|n| id(n)).collect::<Vec<_>>();
    let names = |parts: Vec<Vec<NodeId>>| -> Vec<Vec<String>> {
        parts.into_iter().map(|p| p.into_iter().map(|i| g.node(i).name.clone()).collect()).collect()
    };
    // the fused pairs, the Cast between them rewired (its input renamed) and the Relu after the second one too
    let region = ids(&["d1", "m1", "c", "d2", "m2", "r"]);
    let rewired = ids(&["c", "r"]).into_iter().collect();
    assert_eq!(
        names(regions(&g, &region, &rewired)),
        [vec!["d1", "m1"], vec!["d2", "m2", "r"]],
        "one region per pair; the Cast touching both joins neither, the Relu joins the pair it reads"
    );
    // a Cast the pass rewrote connects the pairs: one region, the whole of it
    let rewired = ids(&["r"]).into_iter().collect();
    assert_eq!(names(regions(&g, &region, &rewired)), [vec!["d1", "m1", "c", "d2", "m2", "r"]]);
    // pairs not rewritten in between (the Cast outside the region) are two regions
    let region = ids(&["d1", "m1", "d2", "m2"]);
    assert_eq!(names(regions(&g, &region, &Default::default())), [vec!["d1", "m1"], vec!["d2", "m2"]]);
}

#[test]
fn abstraction_pins_rank_only_where_an_op_needs_it() {
    let ty = t(&[1, 2, 4, 4]);
    assert_eq!(abstract_type(&ty, &["Conv"]), AbstractType { dtype_class: "float".into(), rank: Some(4) });
    assert_eq!(abstract_type(&ty, &["Add", "Relu"]), AbstractType { dtype_class: "float".into(), rank: None });
    let p = {
        let (g, types) = chain("");
        let region = diff_region(&g, &rewritten());
        let block = cut(&g, &expand(&g, &region, Granularity::Block), &types).unwrap();
        make_pattern(
            &Model::new(g.clone()),
            block,
            "EliminateIdentity",
            Granularity::Block,
            "1.31.1",
            Provenance { source: "m.onnx".into(), test: None },
        )
    };
    assert_eq!(p.meta.inputs[0].abstract_ty.rank, None, "Identity does not care about rank");
}

#[test]
fn one_structure_from_two_models_gets_one_key() {
    let (a, ta) = chain("");
    let (b, tb) = chain("other_");
    let cut_of = |g: &Graph, types: &HashMap<String, TensorType>| {
        let all: Vec<_> = g.node_ids().collect();
        cut(g, &all.into_iter().collect(), types).unwrap()
    };
    let (ka, kb) = (structural_key("P", &cut_of(&a, &ta)), structural_key("P", &cut_of(&b, &tb)));
    assert_eq!(ka, kb);
    assert_ne!(ka, structural_key("Q", &cut_of(&a, &ta)), "the pass is part of the key");
    let (mut c, tc) = chain("");
    let ids: Vec<_> = c.node_ids().collect();
    c.node_attrs_mut(ids[2]).insert("group".into(), crate::graph::Attr::Int(1));
    assert_ne!(ka, structural_key("P", &cut_of(&c, &tc)), "attributes are part of the key");
}

#[test]
fn pattern_files_round_trip_and_bad_files_are_named() {
    let (g, types) = chain("");
    let all: Vec<_> = g.node_ids().collect();
    let closed = cut(&g, &all.into_iter().collect(), &types).unwrap();
    let p = make_pattern(
        &Model::new(g.clone()),
        closed,
        "EliminateIdentity",
        Granularity::Subgraph,
        "1.31.1",
        Provenance { source: "m.onnx".into(), test: Some("T".into()) },
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(p.file_name());
    crate::util::write_atomic(&path, &p.encode().unwrap()).unwrap();
    let back = Pattern::load(&path).unwrap();
    assert_eq!(back.meta, p.meta);
    assert_eq!(back.model.graph.node_count(), 4);
    let s = library_stats(dir.path()).unwrap();
    assert_eq!((s.total, s.passes_covered), (1, 1));
    assert_eq!(s.per_granularity["subgraph"], 1);
    // a plain model is not a pattern; the error names the file
    let plain = dir.path().join("plain.onnx");
    onnx::save(&Model::new(g), &plain).unwrap();
    let err = format!("{:#}", Pattern::load(&plain).unwrap_err());
    assert!(err.contains("plain.onnx") && err.contains("not an oatest pattern"), "{err}");
    assert_eq!(library_stats(dir.path()).unwrap().unreadable.len(), 1);
    // a pattern asking for a named configuration oatest does not know is refused, naming the file and the name
    let mut asks = p.clone();
    asks.model.metadata.push((crate::compiler::named::SETTING.into(), "no_such".into()));
    let odd = dir.path().join("odd.onnx");
    crate::util::write_atomic(&odd, &asks.encode().unwrap()).unwrap();
    let err = format!("{:#}", Pattern::load(&odd).unwrap_err());
    assert!(err.contains("odd.onnx") && err.contains("unknown named configuration 'no_such'"), "{err}");
}
