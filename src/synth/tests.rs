//! Each fixing strategy on small graphs: exact and abstract reuse, every bridge kind (dtype and rank changes
//! included), and output connection.

use super::bridges::plan;
use super::*;
use crate::case::Payload;
use crate::graph::{DType, Graph, Model, Node, OpId, TensorType};
use crate::ops::{check_graph, Rng};
use crate::pattern::Pattern;
use crate::pattern::{abstract_type, Granularity, PatternMeta, Port, Provenance};
use rand::SeedableRng;

pub(super) fn t(d: DType, s: &[usize]) -> TensorType {
    TensorType::new(d, s)
}

/// Bridges from `from` to `want` type-check through the op catalog and end at exactly `want`.
fn bridged(from: TensorType, want: TensorType) -> Vec<String> {
    let what = format!("{from} -> {want}");
    bridged_at(crate::graph::DEFAULT_OPSET, from, want).unwrap_or_else(|| panic!("no bridge {what}"))
}

/// The same in a model of ai.onnx `opset`; None when no bridge of that opset's forms reaches `want`.
fn bridged_at(opset: i64, from: TensorType, want: TensorType) -> Option<Vec<String>> {
    let mut rng = Rng::seed_from_u64(1);
    let mut n = 0;
    let mut names = |p: &str| {
        n += 1;
        format!("{p}{n}")
    };
    let (nodes, consts, out) = plan("x", &from, &want, opset, &mut rng, &mut names)?;
    let mut g = Graph::new("b");
    g.add_input("x", from);
    for (c, v) in consts {
        g.add_initializer(&c, v);
    }
    let ops: Vec<String> = nodes.iter().map(|n| n.op.name.clone()).collect();
    for node in nodes {
        g.add_node(node).unwrap();
    }
    if out == "x" {
        return Some(ops);
    }
    g.add_output(&out, want.clone());
    let types = check_graph(&g, true).unwrap_or_else(|e| panic!("bridge {ops:?} invalid: {e}"));
    assert_eq!(types[&out], want);
    Some(ops)
}

#[test]
fn bridges_take_only_the_forms_an_older_opset_has() {
    use DType::*;
    // Squeeze and Unsqueeze take their axes as an input from 13 on: before, Expand or Reshape does their work
    assert_eq!(bridged_at(12, t(F32, &[3]), t(F32, &[1, 3])).unwrap(), ["Expand"]);
    assert_eq!(bridged_at(12, t(F32, &[1, 3, 1]), t(F32, &[3])).unwrap(), ["Reshape"]);
    assert_eq!(bridged_at(12, t(F32, &[9]), t(F32, &[4])).unwrap(), ["Slice"]);
    // Slice's inputs form is 10's, Pad's 11's, Expand is 8's: at 7 a size change has no bridge
    assert_eq!(bridged_at(7, t(F32, &[9]), t(F32, &[4])), None);
    assert_eq!(bridged_at(9, t(F32, &[4]), t(F32, &[7])), None);
    assert_eq!(bridged_at(7, t(F32, &[1, 3]), t(F32, &[4, 3])), None);
    assert_eq!(bridged_at(8, t(F32, &[1, 3]), t(F32, &[4, 3])).unwrap(), ["Expand"]);
    // Cast to bfloat16 from 13, to a string from 9
    assert_eq!(bridged_at(12, t(F32, &[2]), t(BF16, &[2])), None);
    assert_eq!(bridged_at(7, t(F32, &[2]), t(Str, &[2])), None);
    assert_eq!(bridged_at(7, t(F32, &[2, 3]), t(F64, &[3, 2])).unwrap(), ["Cast", "Transpose"]);
}

#[test]
fn every_bridge_kind_reaches_the_wanted_type() {
    use DType::*;
    assert_eq!(bridged(t(F32, &[2, 3]), t(F64, &[2, 3])), ["Cast"]);
    assert_eq!(bridged(t(F32, &[2, 3]), t(F32, &[3, 2])), ["Transpose"]);
    assert_eq!(bridged(t(F32, &[3]), t(F32, &[1, 3])), ["Unsqueeze"]);
    assert_eq!(bridged(t(F32, &[1, 3, 1]), t(F32, &[3])), ["Squeeze"]);
    assert_eq!(bridged(t(F32, &[1, 3]), t(F32, &[4, 3])), ["Expand"]);
    assert_eq!(bridged(t(F32, &[4]), t(F32, &[7])), ["Pad"]);
    assert_eq!(bridged(t(F32, &[9]), t(F32, &[4])), ["Slice"]);
    assert_eq!(bridged(t(F32, &[6]), t(F32, &[2, 3])), ["Reshape"]);
    assert_eq!(bridged(t(F32, &[2, 3]), t(F32, &[5, 2])), ["Reshape", "Pad", "Reshape"]);
    assert_eq!(bridged(t(F32, &[4, 4]), t(I8, &[2, 3])), ["Cast", "Reshape", "Slice", "Reshape"]);
    assert!(bridged(t(F32, &[2, 3]), t(F16, &[2, 3])).contains(&"Cast".to_string()));
    // rank 0, both ways
    assert_eq!(bridged(t(F32, &[]), t(F32, &[2, 3])), ["Expand"]);
    assert_eq!(bridged(t(F32, &[2, 3]), t(F32, &[])), ["Reshape", "Slice", "Squeeze"]);
    assert_eq!(bridged(t(I64, &[]), t(F64, &[1])), ["Cast", "Unsqueeze"]);
    assert!(bridged(t(F32, &[2]), t(F32, &[2])).is_empty());
}

/// A pattern: Identity(in) -> Relu -> out, with ports of type `ty`.
pub(super) fn pattern(ty: TensorType) -> Pattern {
    let mut g = Graph::new("p");
    g.add_input("in", ty.clone());
    g.add_node(Node::new("id", OpId::onnx("Identity"), vec!["in".into()], vec!["mid".into()])).unwrap();
    g.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["mid".into()], vec!["out".into()])).unwrap();
    g.add_output("out", ty.clone());
    let port = |n: &str| Port { name: n.into(), ty: ty.clone(), abstract_ty: abstract_type(&ty, &["Identity"]) };
    let meta = PatternMeta {
        format: 1,
        compiler: "ort".into(),
        compiler_version: "t".into(),
        pass: "EliminateIdentity".into(),
        granularity: Granularity::Block,
        inputs: vec![port("in")],
        outputs: vec![port("out")],
        provenance: vec![Provenance { source: "t".into(), test: None }],
        key: String::new(),
    };
    Pattern { model: Model::new(g), meta }
}

/// x:f32[2,3] -> Abs -> a -> Neg -> y
pub(super) fn seed() -> Model {
    let ty = t(DType::F32, &[2, 3]);
    let mut g = Graph::new("s");
    g.add_input("x", ty.clone());
    g.add_node(Node::new("abs", OpId::onnx("Abs"), vec!["x".into()], vec!["a".into()])).unwrap();
    g.add_node(Node::new("neg", OpId::onnx("Neg"), vec!["a".into()], vec!["y".into()])).unwrap();
    g.add_output("y", ty);
    Model::new(g)
}

fn feeds_seen(p: &Pattern, point: usize) -> Vec<Feed> {
    let mut seen = Vec::new();
    for s in 0..200 {
        let mut rng = Rng::seed_from_u64(s);
        let (m, info) = splice(&seed(), p, &mut rng, s, Some(point)).unwrap();
        check_graph(&m.graph, true).unwrap();
        assert_eq!(m.graph.node_count(), 4 + info.bridge_ops.len());
        seen.extend(info.feeds);
    }
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn exact_reuse_abstract_reuse_and_bridges_all_happen_and_stay_valid() {
    // exact type available: exact reuse (and sometimes bridges)
    assert!(feeds_seen(&pattern(t(DType::F32, &[2, 3])), 1).contains(&Feed::Exact));
    // only f32[2,3] precedes, the pattern wants f32[4,5]: abstract reuse (rank-agnostic ops) or bridges
    let seen = feeds_seen(&pattern(t(DType::F32, &[4, 5])), 1);
    assert!(seen.contains(&Feed::Abstract) && seen.contains(&Feed::Bridge), "{seen:?}");
    // another dtype and rank: only bridges
    assert_eq!(feeds_seen(&pattern(t(DType::F64, &[])), 2), [Feed::Bridge]);
    assert_eq!(feeds_seen(&pattern(t(DType::I8, &[3, 1, 2])), 0), [Feed::Bridge]);
}

#[test]
fn outputs_connect_onward_or_become_graph_outputs() {
    let p = pattern(t(DType::F32, &[2, 3]));
    let (mut connected, mut dangling) = (0, 0);
    for s in 0..100 {
        let mut rng = Rng::seed_from_u64(s);
        let (m, info) = splice(&seed(), &p, &mut rng, s, Some(1)).unwrap();
        if info.connected == 1 {
            connected += 1;
            // Neg now reads the pattern's output
            let neg = m.graph.nodes_in_order().unwrap().into_iter().find(|n| n.name == "neg").unwrap().clone();
            assert!(neg.inputs[0].starts_with(&format!("p{s}_")), "{:?}", neg.inputs);
            assert_eq!(m.graph.outputs, ["y"]);
        } else {
            dangling += 1;
            assert_eq!(m.graph.outputs.len(), 2, "an unconnected output becomes a graph output");
        }
    }
    assert!(connected > 50 && dangling > 0, "{connected} {dangling}");
    // at the end of the graph nothing follows: always a graph output
    let (m, info) = splice(&seed(), &p, &mut Rng::seed_from_u64(3), 3, Some(2)).unwrap();
    assert_eq!((info.connected, m.graph.outputs.len()), (0, 2));
}

/// A synthesized test depends on (seed, id) alone: the same whether the campaign fed earlier tests back just
/// in time (every test `<= i - POOL_LAG` before `i` is made) or right after making them, with the pool full.
#[test]
fn synthesized_tests_do_not_depend_on_when_earlier_tests_were_fed_back() {
    use crate::synth::schedule::Schedule;
    use crate::synth::source::{SynthSource, TestSource, POOL_CAP, POOL_LAG};
    // what a test fired, as a campaign would report it: varies by id, so the coverage counts move
    let fired = |id: u64| vec![["A", "B", "C"][(id % 3) as usize].to_string()];
    let cfg = crate::seedgen::SeedConfig { max_nodes: 4, ..Default::default() };
    let pats = vec![pattern(t(DType::F32, &[2, 3])), pattern(t(DType::F32, &[4]))];
    let n = 2 * POOL_LAG + POOL_CAP as u64 + 40;
    let eager = SynthSource::new(7, cfg.clone(), pats.clone(), Schedule::Coverage, 1);
    let a: Vec<Option<Payload>> = (0..n)
        .map(|id| {
            let t = eager.make(id).ok()?;
            eager.feedback(&t, true, &fired(id));
            Some(t.payload)
        })
        .collect();
    let lazy = SynthSource::new(7, cfg.clone(), pats.clone(), Schedule::Coverage, 1);
    let mut made: Vec<Option<crate::case::Test>> = Vec::new();
    for id in 0..n {
        for t in made.iter().skip((id.saturating_sub(POOL_LAG)) as usize).take(1).flatten() {
            if t.id + POOL_LAG <= id {
                lazy.feedback(t, true, &fired(t.id));
            }
        }
        made.push(lazy.make(id).ok());
    }
    let b: Vec<Option<Payload>> = made.into_iter().map(|t| t.map(|t| t.payload)).collect();
    assert!(a.iter().filter(|m| m.is_some()).count() as u64 > n / 2, "most syntheses succeed");
    assert_eq!(a, b, "the same tests whenever the feedback came");
    // the pool mattered: without feedback, later tests differ
    let none = SynthSource::new(7, cfg, pats, Schedule::Coverage, 1);
    let differ = (POOL_LAG..n).filter(|&id| none.make(id).ok().map(|t| t.payload) != a[id as usize]).count();
    assert!(differ > 0, "tests drew from the pool");
}

#[test]
fn a_share_of_varied_splices_reads_a_value_inside_the_pattern_again_and_the_rest_are_unchanged() {
    use super::vary::{Variation, EXTRA_READER_SHARE};
    // Identity -> mid -> Relu: `mid` is the pattern's only inner value (its own test never reads it twice)
    let p = pattern(t(DType::F32, &[2, 3]));
    let (mut varied, mut by_node) = (0, 0);
    for s in 0..400 {
        let plain = splice(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1)).unwrap();
        let (m, info) =
            splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::ExtraReader]).unwrap();
        check_graph(&m.graph, true).unwrap();
        if info.variations.is_empty() {
            let same = crate::graph::onnx::encode_model(&m) == crate::graph::onnx::encode_model(&plain.0);
            assert!(same, "a splice the variation skips is the same splice");
            continue;
        }
        varied += 1;
        // `mid` is read twice: by the Relu and by a new graph output, or by the seed's Neg (whose input was free)
        let mid = format!("p{s}_mid");
        let g = &m.graph;
        let neg = g.node_ids().map(|id| g.node(id)).find(|n| n.op.name == "Neg").unwrap();
        if neg.inputs == [mid.clone()] {
            by_node += 1;
            assert_eq!(g.outputs.len(), plain.0.graph.outputs.len(), "{:?}", g.outputs);
        } else {
            assert!(g.outputs.contains(&mid) && !plain.0.graph.outputs.contains(&mid), "{:?}", g.outputs);
            assert_eq!(g.outputs.len(), plain.0.graph.outputs.len() + 1);
        }
    }
    assert!(by_node > 0, "a later node read the inner value in none of {varied} varied splices");
    let share = varied as f64 / 400.0;
    assert!((EXTRA_READER_SHARE / 2.0..EXTRA_READER_SHARE * 2.0).contains(&share), "{varied} of 400 splices");
    assert!(Variation::parse("extra-reader").is_ok() && Variation::parse("dtype").is_ok());
    assert!(Variation::parse("nope").is_err());
}

#[test]
fn a_share_of_dtype_varied_splices_takes_another_type_the_pattern_accepts_throughout() {
    use super::vary::{Variation, DTYPE_SHARE};
    // Identity -> mid -> Relu in float32: Relu also takes float64, float16, int8 and int32
    let p = pattern(t(DType::F32, &[2, 3]));
    let (mut varied, mut kinds) = (0, std::collections::BTreeSet::new());
    for s in 0..400 {
        let plain = splice(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1)).unwrap();
        let (m, info) =
            splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::Dtype]).unwrap();
        let types = check_graph(&m.graph, true).unwrap();
        let mid = types[&format!("p{s}_mid")].dtype;
        if info.variations.is_empty() {
            let same = crate::graph::onnx::encode_model(&m) == crate::graph::onnx::encode_model(&plain.0);
            assert!(same, "a splice the variation skips is the same splice");
            assert_eq!(mid, DType::F32);
            continue;
        }
        varied += 1;
        assert_ne!(mid, DType::F32, "a varied pattern computes in another type");
        kinds.insert(mid);
    }
    let share = varied as f64 / 400.0;
    assert!((DTYPE_SHARE / 2.0..DTYPE_SHARE * 2.0).contains(&share), "{varied} of 400 splices");
    assert!(kinds.len() >= 3, "{kinds:?}");
}

/// Transpose(perm [1, 0]) then Softmax(axis 1) on f32[2, 3]: a share of the splices writes another perm or axis
/// (the identity perm, the axis as -1 or 0), and the spliced model type-checks with the pattern's new output type.
#[test]
fn a_share_of_attr_varied_splices_writes_another_legal_attribute_value() {
    use super::vary::Variation;
    use super::vary_attrs::ATTR_SHARE;
    use crate::graph::Attr;
    let ty = t(DType::F32, &[2, 3]);
    let mut p = pattern(ty.clone());
    let mut g = Graph::new("p");
    g.add_input("in", ty.clone());
    let tr = Node::new("tr", OpId::onnx("Transpose"), vec!["in".into()], vec!["mid".into()]);
    g.add_node(tr.with_attr("perm", Attr::Ints(vec![1, 0]))).unwrap();
    let sm = Node::new("sm", OpId::onnx("Softmax"), vec!["mid".into()], vec!["out".into()]);
    g.add_node(sm.with_attr("axis", Attr::Int(1))).unwrap();
    g.add_output("out", t(DType::F32, &[3, 2]));
    (p.model.graph, p.meta.outputs[0].ty) = (g, t(DType::F32, &[3, 2]));
    let (mut varied, mut seen) = (0, std::collections::BTreeSet::new());
    for s in 0..400 {
        let (m, info) = splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::Attr]).unwrap();
        check_graph(&m.graph, true).unwrap();
        let node = |name: &str| m.graph.node_ids().map(|id| m.graph.node(id)).find(|n| n.name == name).cloned();
        let (tr, sm) = (node(&format!("p{s}_tr")).unwrap(), node(&format!("p{s}_sm")).unwrap());
        let written = (tr.attrs["perm"].clone(), sm.attrs["axis"].clone());
        if info.variations.is_empty() {
            assert_eq!(written, (Attr::Ints(vec![1, 0]), Attr::Int(1)), "a splice the variation skips is the same");
            continue;
        }
        varied += 1;
        assert_ne!(written, (Attr::Ints(vec![1, 0]), Attr::Int(1)), "a varied pattern writes another value");
        seen.insert(format!("{written:?}"));
    }
    let share = varied as f64 / 400.0;
    assert!((ATTR_SHARE / 2.0..ATTR_SHARE * 2.0).contains(&share), "{varied} of 400 splices");
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(Variation::parse("attr").is_ok());
}

/// QuantizeLinear then DequantizeLinear of f32[2, 3] with one scalar scale and zero point: a share of the splices
/// makes them per-axis on axis 0 or 1 (a scale per channel, the zero point repeated, both nodes with that `axis`),
/// and the spliced model type-checks.
#[test]
fn a_share_of_per_axis_varied_splices_quantizes_per_channel() {
    use super::vary::Variation;
    use super::vary_axis::PER_AXIS_SHARE;
    use crate::graph::{Attr, Tensor};
    let ty = t(DType::F32, &[2, 3]);
    let mut p = pattern(ty.clone());
    let mut g = Graph::new("p");
    g.add_input("in", ty.clone());
    g.add_initializer("s", Tensor::from_f32(&[], &[0.5]));
    g.add_initializer("z", Tensor::from_f64s(DType::U8, &[], &[3.0]));
    let qin = vec!["in".into(), "s".into(), "z".into()];
    g.add_node(Node::new("q", OpId::onnx("QuantizeLinear"), qin, vec!["mid".into()])).unwrap();
    let dqin = vec!["mid".into(), "s".into(), "z".into()];
    g.add_node(Node::new("dq", OpId::onnx("DequantizeLinear"), dqin, vec!["out".into()])).unwrap();
    g.add_output("out", ty.clone());
    p.model.graph = g;
    let (mut varied, mut axes) = (0, std::collections::BTreeSet::new());
    for s in 0..400 {
        let (m, info) =
            splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::PerAxis]).unwrap();
        check_graph(&m.graph, true).unwrap();
        let node = |name: &str| m.graph.node_ids().map(|id| m.graph.node(id)).find(|n| n.name == name).cloned();
        let (q, dq) = (node(&format!("p{s}_q")).unwrap(), node(&format!("p{s}_dq")).unwrap());
        let scale = &m.graph.initializers[&q.inputs[1]];
        if info.variations.is_empty() {
            assert_eq!((scale.numel(), q.attrs.get("axis")), (1, None), "a splice the variation skips is the same");
            continue;
        }
        varied += 1;
        let Some(Attr::Int(axis)) = q.attrs.get("axis").cloned() else { panic!("no axis: {q:?}") };
        assert_eq!(dq.attrs.get("axis"), Some(&Attr::Int(axis)));
        assert_eq!(scale.dims, vec![[2, 3][axis as usize]]);
        let values = scale.to_f64s().unwrap();
        assert!(values[0] != values[1], "each channel another scale: {values:?}");
        assert_eq!(m.graph.initializers[&q.inputs[2]].to_f64s().unwrap(), vec![3.0; values.len()]);
        axes.insert(axis);
    }
    let share = varied as f64 / 400.0;
    assert!((PER_AXIS_SHARE / 2.0..PER_AXIS_SHARE * 2.0).contains(&share), "{varied} of 400 splices");
    assert_eq!(axes.len(), 2, "{axes:?}");
    assert!(Variation::parse("per-axis").is_ok());
}

#[test]
fn a_fixed_share_of_splices_feeds_an_edge_shape_the_pattern_accepts() {
    // f32[2,3] precedes; the pattern wants f32[4,5] (Identity, Relu: any shape): some tags feed [1,1] or []
    let p = pattern(t(DType::F32, &[4, 5]));
    let (mut edges, mut kinds) = (0, std::collections::BTreeSet::new());
    for s in 0..400 {
        let mut rng = Rng::seed_from_u64(s);
        let (m, info) = splice(&seed(), &p, &mut rng, s, Some(1)).unwrap();
        let types = check_graph(&m.graph, true).unwrap();
        if info.feeds.contains(&Feed::Edge) {
            edges += 1;
            let fed = &types[&format!("p{s}_mid")];
            assert!(fed.dims() == Some(vec![1, 1]) || fed.dims() == Some(vec![]), "{fed}");
            kinds.insert(fed.dims().unwrap().len());
        }
    }
    let share = edges as f64 / 400.0;
    assert!((EDGE_SHARE / 2.0..EDGE_SHARE * 2.0).contains(&share), "{edges} of 400 splices");
    assert_eq!(kinds.len(), 2, "both size-1 dims and rank 0 occur");
    // a rank-0 port has no edge shape; a rank-1 one of size 1 only the scalar
    assert!(edge_types(&t(DType::F32, &[])).is_empty() && edge_types(&t(DType::F32, &[1])) == [t(DType::F32, &[])]);
}

/// Tests of a pattern kept at its own older opset join a part of the pool of their own, into which the opset-20
/// patterns that are the same at that opset are spliced: both passes meet in tests written at the older opset.
#[test]
fn patterns_at_the_seeds_opset_meet_older_opset_patterns_in_tests_written_there() {
    use crate::synth::schedule::Schedule;
    use crate::synth::source::{SynthSource, TestSource, POOL_LAG};
    let mut old = pattern(t(DType::F32, &[2, 3]));
    old.meta.pass = "Old".into();
    old.model.opsets.insert(String::new(), 11);
    let mut new = pattern(t(DType::F32, &[2, 3]));
    new.meta.pass = "New".into();
    new.model.opsets.insert(String::new(), 20);
    let cfg = crate::seedgen::SeedConfig { max_nodes: 4, ..Default::default() };
    let src = SynthSource::new(3, cfg, vec![old, new], Schedule::Uniform, 1);
    let (mut new_at_11, mut made) = (0, 0);
    for id in 0..3 * POOL_LAG {
        let Ok(test) = src.make(id) else { continue };
        made += 1;
        let m = crate::graph::onnx::decode_model(test.payload.onnx().unwrap()).unwrap();
        let pass = test.target_pass.clone().unwrap();
        if pass == "Old" {
            assert_eq!(m.opset(), 11, "an own-opset pattern's test is written at its opset");
        }
        if m.opset() == 11 && pass == "New" {
            new_at_11 += 1;
            check_graph(&crate::ops::since::typed_at(&m.graph, 11), false).unwrap();
        }
        src.feedback(&test, true, &[pass]);
    }
    assert!(made > 2 * POOL_LAG, "{made}");
    assert!(new_at_11 > 10, "the opset-20 pattern went into tests written at 11 {new_at_11} times");
}

/// Tests are a function of (seed, id): two sources made alike make the same bytes, also where a lowering to an
/// older opset declares the types of a pattern's inner values (in name order, not a hash map's).
#[test]
fn two_sources_made_alike_make_the_same_tests() {
    use crate::synth::schedule::Schedule;
    use crate::synth::source::{SynthSource, TestSource, POOL_LAG};
    let ty = t(DType::F32, &[2, 3]);
    let mut old = pattern(ty.clone());
    old.meta.pass = "Old".into();
    old.model.opsets.insert(String::new(), 11);
    let mut chain = pattern(ty.clone());
    chain.meta.pass = "New".into();
    chain.model.opsets.insert(String::new(), 20);
    let mut g = Graph::new("p");
    g.add_input("in", ty.clone());
    let names = ["in", "v1", "v2", "v3", "v4", "v5", "out"];
    for (i, op) in ["Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Identity"].iter().enumerate() {
        let node = Node::new(&format!("n{i}"), OpId::onnx(op), vec![names[i].into()], vec![names[i + 1].into()]);
        g.add_node(node).unwrap();
    }
    g.add_output("out", ty);
    chain.model.graph = g;
    let cfg = crate::seedgen::SeedConfig { max_nodes: 4, ..Default::default() };
    let make = || SynthSource::new(5, cfg.clone(), vec![old.clone(), chain.clone()], Schedule::Coverage, 1);
    let (a, b) = (make(), make());
    let mut same = 0;
    for id in 0..3 * POOL_LAG {
        let (Ok(x), Ok(y)) = (a.make(id), b.make(id)) else { continue };
        assert!(x.payload == y.payload, "test {id} differs between two sources made alike");
        let fired = [x.target_pass.clone().unwrap()];
        a.feedback(&x, true, &fired);
        b.feedback(&y, true, &fired);
        same += 1;
    }
    assert!(same > 2 * POOL_LAG, "{same}");
}

#[test]
fn a_dtype_variant_never_divides_integers_by_a_value_the_pattern_computes() {
    use super::vary::Variation;
    // in -> Relu -> r; Div(in, r): in float a zero divisor gives inf, in an integer type a crash (invalid test)
    let mut p = pattern(t(DType::F32, &[2, 3]));
    let g = &mut p.model.graph;
    g.add_node(Node::new("div", OpId::onnx("Div"), vec!["in".into(), "out".into()], vec!["q".into()])).unwrap();
    g.outputs = vec!["q".into()];
    g.types.insert("q".into(), t(DType::F32, &[2, 3]).into());
    p.meta.outputs[0].name = "q".into();
    let mut varied = 0;
    for s in 0..400 {
        let Ok((m, info)) = splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::Dtype])
        else {
            continue;
        };
        let types = check_graph(&m.graph, true).unwrap();
        varied += !info.variations.is_empty() as usize;
        let q = types[&format!("p{s}_q")].dtype;
        assert!(!q.is_int(), "tag {s}: an integer Div by the pattern's own Relu output");
    }
    assert!(varied > 0, "no float variant either");
}

#[test]
fn a_dtype_variant_keeps_each_node_within_its_opsets_schema() {
    // at opset 12 Relu takes floats only (integers since 14): a variant there stays float, at 20 it may not
    let mut old = pattern(t(DType::F32, &[2, 3]));
    old.model.opsets.insert(String::new(), 12);
    let mut seen: std::collections::HashMap<i64, Vec<DType>> = Default::default();
    for (opset, p) in [(12, &old), (20, &pattern(t(DType::F32, &[2, 3])))] {
        for s in 0..400 {
            let Some(q) = super::vary::retyped(p, s) else { continue };
            seen.entry(opset).or_default().push(q.model.graph.tensor_type("out").unwrap().dtype);
        }
    }
    assert!(seen[&12].iter().all(|d| d.is_float()), "{:?}", seen[&12]);
    assert!(seen[&20].iter().any(|d| d.is_int()), "{:?}", seen[&20]);
}
