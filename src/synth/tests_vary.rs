//! The variation kinds' edge cases: each keeps a variant within what its op's version and kernel take, and the
//! constant kind writes a pattern's constant in another form.

use super::tests::{pattern, seed, t};
use super::*;
use crate::graph::{DType, Graph, Node, OpId};
use crate::ops::{check_graph, Rng};
use rand::SeedableRng;

/// A pattern of one `op` node (`in` -> `out`, both f32[2, 3], attributes `attrs`) written at ai.onnx `opset`.
fn one_node(op: &str, attrs: &[(&str, crate::graph::Attr)], opset: i64) -> crate::pattern::Pattern {
    let ty = t(DType::F32, &[2, 3]);
    let mut p = pattern(ty.clone());
    let mut g = Graph::new("p");
    g.add_input("in", ty.clone());
    let mut n = Node::new(op.to_lowercase(), OpId::onnx(op), vec!["in".into()], vec!["out".into()]);
    for (k, a) in attrs {
        n = n.with_attr(k, a.clone());
    }
    g.add_node(n).unwrap();
    g.add_output("out", ty);
    p.model.graph = g;
    p.model.opsets.insert(String::new(), opset);
    p
}

/// Clip at opset 11 has CPU kernels for float and float16 only (its schema allows float64 too): a dtype variant
/// there takes no other type, where at opset 13 it may (invalid tests of a 5-minute run: "Could not find an
/// implementation for Clip(11)").
#[test]
fn a_dtype_variant_keeps_clip_11_on_the_types_its_kernels_take() {
    let mut seen: std::collections::HashMap<i64, Vec<DType>> = Default::default();
    for opset in [11, 13] {
        let p = one_node("Clip", &[], opset);
        for s in 0..400 {
            let Some(q) = super::vary::retyped(&p, s) else { continue };
            seen.entry(opset).or_default().push(q.model.graph.tensor_type("out").unwrap().dtype);
        }
    }
    assert!(seen[&11].iter().all(|d| *d == DType::F16), "{:?}", seen[&11]);
    assert!(seen[&13].iter().any(|d| !matches!(d, DType::F32 | DType::F16)), "{:?}", seen[&13]);
}

/// Flatten(axis 1) of f32[2, 3] at opset 10, which has no negative axes: an attr variant writes axis 0, never -1
/// (a 5-minute run had Flatten axis -5 variants at opset 10 among the invalid tests).
#[test]
fn an_attr_variant_writes_no_negative_axis_below_opset_11() {
    use super::vary::Variation;
    use crate::graph::Attr;
    let mut axes: std::collections::HashMap<i64, std::collections::BTreeSet<i64>> = Default::default();
    for opset in [10, 13] {
        let p = one_node("Flatten", &[("axis", Attr::Int(1))], opset);
        for s in 0..400 {
            let Ok((m, info)) = splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::Attr])
            else {
                continue;
            };
            if info.variations.is_empty() {
                continue;
            }
            let fl = m.graph.node_ids().map(|id| m.graph.node(id)).find(|n| n.name == format!("p{s}_flatten")).unwrap();
            let Attr::Int(a) = fl.attrs["axis"] else { panic!("axis") };
            axes.entry(opset).or_default().insert(a);
        }
    }
    assert_eq!(axes[&10], [0].into(), "opset 10");
    assert!(axes[&13].contains(&-1), "opset 13: {:?}", axes[&13]);
}

/// Add(in, c) with c an f32 initializer: a share of the splices makes c an open input that the splice feeds (no
/// initializer left) or, for a pattern of another compiler than ONNX Runtime (which makes Constant nodes
/// initializers when it loads a model), a Constant node; the spliced model type-checks.
#[test]
fn a_share_of_constant_varied_splices_writes_the_constant_in_another_form() {
    use super::vary::Variation;
    use super::vary_const::CONSTANT_SHARE;
    use crate::graph::Tensor;
    let ty = t(DType::F32, &[2, 3]);
    let mut p = pattern(ty.clone());
    let mut g = Graph::new("p");
    g.add_input("in", ty.clone());
    g.add_initializer("c", Tensor::from_f32(&[2, 3], &[0.5; 6]));
    g.add_node(Node::new("add", OpId::onnx("Add"), vec!["in".into(), "c".into()], vec!["out".into()])).unwrap();
    g.add_output("out", ty.clone());
    p.model.graph = g;
    for compiler in ["ort", "ortx"] {
        p.meta.compiler = compiler.into();
        let (mut input, mut node) = (0, 0);
        for s in 0..400 {
            let (m, info) =
                splice_varied(&seed(), &p, &mut Rng::seed_from_u64(s), s, Some(1), &[Variation::Constant]).unwrap();
            check_graph(&m.graph, true).unwrap();
            let c = format!("p{s}_c");
            let g = &m.graph;
            let constant =
                g.node_ids().map(|id| g.node(id)).any(|n| n.op.name == "Constant" && n.outputs == [c.clone()]);
            if info.variations.is_empty() {
                assert!(g.initializers.contains_key(&c), "a splice the variation skips keeps the initializer");
                continue;
            }
            assert!(!g.initializers.contains_key(&c), "tag {s}: the varied constant is no initializer");
            if constant {
                node += 1;
            } else {
                let add = g.node_ids().map(|id| g.node(id)).find(|n| n.name == format!("p{s}_add")).unwrap();
                assert!(!g.initializers.contains_key(&add.inputs[1]), "tag {s}: the Add reads a fed value");
                input += 1;
            }
        }
        let share = (input + node) as f64 / 400.0;
        assert!((CONSTANT_SHARE / 2.0..CONSTANT_SHARE * 2.0).contains(&share), "{compiler}: {input} + {node} of 400");
        match compiler {
            "ort" => assert_eq!(node, 0, "ort: {node} Constant nodes"),
            _ => assert!(input > node && node > 0, "{compiler}: inputs {input}, Constant nodes {node}"),
        }
    }
    assert!(Variation::parse("constant").is_ok());
}

#[test]
fn a_spliced_test_takes_its_patterns_settings_in_place_of_an_earlier_splices() {
    use crate::graph::{Graph, Model};
    let with = |kv: &[(&str, &str)]| {
        let mut m = Model::new(Graph::new("g"));
        m.metadata = kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        m
    };
    let mut base = with(&[("oatest.model_type", "gpt2"), ("oatest.num_heads", "4"), ("author", "x")]);
    let pattern = with(&[("oatest.model_type", "bert"), (crate::pattern::META_KEY, "{}")]);
    crate::synth::source::carry_settings(&mut base, &pattern);
    let keys: Vec<(&str, &str)> = base.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(keys, [("author", "x"), ("oatest.model_type", "bert")], "num_heads of the earlier splice is gone");
    // a pattern without settings (ONNX Runtime's) leaves the model's as they are
    crate::synth::source::carry_settings(&mut base, &with(&[]));
    assert_eq!(base.metadata.len(), 2);
}

#[test]
fn relax_tests_vary_only_exposable_patterns_and_say_so_in_the_recipe() {
    use crate::synth::source::{RelaxSynthSource, TestSource};
    let pattern = |exposable: bool| {
        let mut p = crate::synth::recipe::tests::pattern();
        p.exposable = exposable;
        p
    };
    for exposable in [false, true] {
        let mut source = RelaxSynthSource::new(1, Default::default(), vec![pattern(exposable)]);
        source.extra_reader = true;
        let tests: Vec<_> = (0..40).map(|id| source.make(id).unwrap()).collect();
        let varied = tests.iter().filter(|t| t.variations == ["extra-reader"]).count();
        for t in &tests {
            let vary = &t.payload.recipe().unwrap().vary;
            assert_eq!(vary.is_empty(), t.variations.is_empty(), "the recipe says what the test counts");
        }
        match exposable {
            false => assert_eq!(varied, 0, "a pattern without an inner value is never varied"),
            true => assert!((8..=32).contains(&varied), "about half varied: {varied} of 40"),
        }
    }
}

/// The values of `kind:<value>` that 40 tests of `source` drew (about half of them must be varied when `listed`
/// is not empty, none when it is), each checked to be listed, and every listed one drawn.
fn drawn_values(source: &crate::synth::source::RelaxSynthSource, kind: &str, listed: &[String]) {
    use crate::synth::source::TestSource;
    let tests: Vec<_> = (0..40).map(|id| source.make(id).unwrap()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for t in &tests {
        let vary = &t.payload.recipe().unwrap().vary;
        assert_eq!(vary.is_empty(), t.variations.is_empty(), "the recipe says what the test counts");
        for v in vary {
            let value = v.strip_prefix(&format!("{kind}:")).expect("a variant names its value");
            assert!(listed.iter().any(|l| l == value), "{kind} {value} was not listed");
            seen.insert(value.to_string());
        }
    }
    let varied = tests.iter().filter(|t| t.variations == [kind]).count();
    match listed.len() {
        0 => assert_eq!(varied, 0, "a pattern the check listed nothing for is never varied"),
        n => {
            assert!((8..=32).contains(&varied), "about half varied: {varied} of 40");
            assert_eq!(seen.len(), n, "each listed {kind} is used: {seen:?}");
        }
    }
}

#[test]
fn relax_tests_vary_dtypes_the_check_listed_and_say_which_in_the_recipe() {
    for dtypes in [&[][..], &["float16"][..], &["float16", "float64"][..]] {
        let mut p = crate::synth::recipe::tests::pattern();
        p.dtypes = dtypes.iter().map(|d| d.to_string()).collect();
        let mut source = crate::synth::source::RelaxSynthSource::new(1, Default::default(), vec![p.clone()]);
        source.dtype = true;
        drawn_values(&source, "dtype", &p.dtypes);
    }
}

#[test]
fn relax_tests_vary_the_attr_sites_the_check_listed_and_say_which_in_the_recipe() {
    for sites in [&[][..], &[2][..], &[0, 3][..]] {
        let mut p = crate::synth::recipe::tests::pattern();
        p.attr_sites = sites.to_vec();
        let mut source = crate::synth::source::RelaxSynthSource::new(1, Default::default(), vec![p]);
        source.attr = true;
        drawn_values(&source, "attr", &sites.iter().map(|k| k.to_string()).collect::<Vec<_>>());
    }
}

/// A Gather of f32[4, 8] on axis 1: its own constant indices, or a Range's start and limit (constants, or hidden
/// as `Clip(p, c, c)`), are written with their negative equivalents (minus 8); a range reaching past the dimension,
/// a Range read twice or a shared constant is left alone.
#[test]
fn a_constant_variant_writes_a_gathers_constant_indices_negative() {
    use super::vary_const::{reformed, CONSTANT_SHARE};
    use super::vary_negative::negative_sites;
    use crate::graph::{Attr, Tensor};
    let gather = |g: &mut Graph, indices: &str| {
        g.add_input("data", t(DType::F32, &[4, 8]));
        let n = Node::new("gather", OpId::onnx("Gather"), vec!["data".into(), indices.into()], vec!["out".into()]);
        g.add_node(n.with_attr("axis", Attr::Int(1))).unwrap();
        g.add_output("out", t(DType::F32, &[4, 3]));
    };
    let scalar = |v: i64| Tensor::from_i64(&[], &[v]);
    // (start, limit, delta, hidden in Clips, a second reader of the Range)
    let range = |(start, limit, delta): (i64, i64, i64), clip: bool, read_twice: bool| {
        let mut g = Graph::new("p");
        g.add_input("p", t(DType::I64, &[]));
        let mut operands = Vec::new();
        for (name, v) in [("s", start), ("l", limit), ("d", delta)] {
            g.add_initializer(name, scalar(v));
            if clip {
                let args = vec!["p".into(), name.into(), name.into()];
                g.add_node(Node::new(format!("clip_{name}"), OpId::onnx("Clip"), args, vec![format!("{name}_v")]))
                    .unwrap();
                operands.push(format!("{name}_v"));
            } else {
                operands.push(name.to_string());
            }
        }
        g.add_node(Node::new("range", OpId::onnx("Range"), operands, vec!["r".into()])).unwrap();
        // the catalog has no Range: declared, as extraction declares every value
        g.types.insert("r".into(), t(DType::I64, &[3]).into());
        if read_twice {
            g.add_node(Node::new("neg", OpId::onnx("Neg"), vec!["r".into()], vec!["r2".into()])).unwrap();
            g.add_output("r2", t(DType::I64, &[3]));
        }
        gather(&mut g, "r");
        g
    };
    let sites = |g: &Graph| negative_sites(g);
    assert_eq!(sites(&range((2, 5, 1), true, false)), [vec![("s".to_string(), vec![-6]), ("l".to_string(), vec![-3])]]);
    assert_eq!(sites(&range((2, 5, 1), false, false)).len(), 1);
    assert!(sites(&range((2, 9, 1), true, false)).is_empty(), "limit past the dimension");
    assert!(sites(&range((5, 2, -1), true, false)).is_empty(), "a negative delta");
    assert!(sites(&range((2, 5, 1), true, true)).is_empty(), "the Range has another reader");
    let mut own = Graph::new("p");
    own.add_initializer("idx", Tensor::from_i64(&[3], &[0, 7, -2]));
    gather(&mut own, "idx");
    assert_eq!(sites(&own), [vec![("idx".to_string(), vec![-8, -1, -2])]]);

    // the variant: half of the tags the constant kind takes write a site negative (the other half finds no float
    // constant to feed here)
    let mut p = pattern(t(DType::F32, &[4, 8]));
    p.model.graph = range((2, 5, 1), true, false);
    let (mut negative, mut varied) = (0, 0);
    for tag in 0..400 {
        let Some(q) = reformed(&p, tag) else { continue };
        varied += 1;
        let value = |n: &str| q.model.graph.initializers[n].to_i64s().unwrap()[0];
        if value("s") < 0 {
            assert_eq!((value("s"), value("l"), value("d")), (-6, -3, 1), "tag {tag}");
            negative += 1;
        }
    }
    let share = negative as f64 / 400.0;
    assert!(negative == varied && (0.25..0.75).contains(&(share / CONSTANT_SHARE)), "{negative} of {varied}");
    p.model.graph = own;
    let q = (0..400).find_map(|tag| reformed(&p, tag).filter(|q| q.model.graph.initializers.contains_key("idx")));
    assert_eq!(q.unwrap().model.graph.initializers["idx"].to_i64s().unwrap(), [-8, -1, -2]);
}

/// The axes input of an Unsqueeze (counting its output's dimensions) and of a ReduceSum, and a Slice's starts and
/// ends (each counted on the dimension its axis names; an end at the dimension's size stays) are written negative.
#[test]
fn a_constant_variant_writes_axes_inputs_and_slice_positions_negative() {
    use super::vary_negative::negative_sites;
    use crate::graph::Tensor;
    let mut g = Graph::new("p");
    g.add_input("x", t(DType::F32, &[4, 6]));
    let ints = |v: &[i64]| Tensor::from_i64(&[v.len()], v);
    g.add_initializer("uax", ints(&[0, 3]));
    g.add_initializer("rax", ints(&[1]));
    g.add_initializer("starts", ints(&[1, 0]));
    g.add_initializer("ends", ints(&[6, 3]));
    g.add_initializer("sax", ints(&[1, 0]));
    let node = |name: &str, op: &str, inputs: &[&str], out: &str| {
        Node::new(name, OpId::onnx(op), inputs.iter().map(|s| s.to_string()).collect(), vec![out.to_string()])
    };
    g.add_node(node("u", "Unsqueeze", &["x", "uax"], "u")).unwrap();
    g.add_node(node("r", "ReduceSum", &["x", "rax"], "r")).unwrap();
    g.add_node(node("s", "Slice", &["x", "starts", "ends", "sax"], "s")).unwrap();
    for o in ["u", "r", "s"] {
        g.add_output(o, t(DType::F32, &[1]));
    }
    let mut sites = negative_sites(&g);
    sites.sort();
    let expected = |name: &str, v: &[i64]| vec![(name.to_string(), v.to_vec())];
    let want = [
        expected("ends", &[6, -1]),
        expected("rax", &[-1]),
        expected("sax", &[-1, -2]),
        expected("starts", &[-5, -4]),
        expected("uax", &[-4, -1]),
    ];
    assert_eq!(sites, want);
}
