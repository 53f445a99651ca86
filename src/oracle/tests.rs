//! Each judge on crafted outcomes.

use super::*;
use crate::compiler::{Config, Level, NamedTensor, Outcome, Status};
use crate::graph::{DType, Tensor};

fn out(level: Level, status: Status, vals: &[f32]) -> Outcome {
    let outputs = if status == Status::Ok {
        vec![NamedTensor { name: "y".into(), tensor: Tensor::from_f32(&[vals.len()], vals) }]
    } else {
        Vec::new()
    };
    Outcome {
        target: "t".into(),
        config: Config::level(level),
        status,
        outputs,
        passes_fired: vec![],
        passes_ran: vec![],
        time_ms: 1.0,
    }
}

fn oracle() -> Oracle {
    Oracle { tolerance: Tolerance::default() }
}

/// An oracle with one absolute tolerance for every float dtype and no relative one.
fn atol(a: f64) -> Tolerance {
    Tolerance { atol: Some(a), rtol: Some(0.0), ..Tolerance::default() }
}

fn symptoms(j: &Judgement) -> Vec<(Symptom, String)> {
    j.verdicts.iter().map(|v| (v.symptom, v.config.clone())).collect()
}

#[test]
fn equal_runs_are_clean_and_small_differences_are_tolerated() {
    let j = oracle()
        .judge(&[out(Level::Disable, Status::Ok, &[1.0, 2.0]), out(Level::All, Status::Ok, &[1.00005, 2.0001])]);
    assert!(j.valid && j.verdicts.is_empty(), "{j:?}");
}

#[test]
fn chebyshev_distance_above_tolerance_is_an_inconsistency() {
    let j = oracle().judge(&[
        out(Level::Disable, Status::Ok, &[1.0, 2.0, 3.0]),
        out(Level::Basic, Status::Ok, &[1.0, 2.0, 3.0]),
        out(Level::All, Status::Ok, &[1.0, 2.5, 3.002]),
    ]);
    assert_eq!(symptoms(&j), [(Symptom::Inconsistency, "all".to_string())]);
    let v = &j.verdicts[0];
    assert_eq!(v.max_diff, Some(0.5));
    assert!(v.detail.contains("'y'[1]"), "{}", v.detail);
    // 2.5 vs 2 and 3.002 vs 3 (6.7e-4 relative) are both beyond the float32 default, of 3 elements
    let m = v.measure.as_ref().expect("measured");
    assert_eq!((m.exceeding, m.elements), (2, 3), "{m:?}");
    assert!((m.max_rel - 0.25).abs() < 1e-12, "{m:?}");
    assert!(v.detail.contains("2 of 3 elements beyond tolerance"), "{}", v.detail);
}

#[test]
fn nan_and_inf_in_the_reference_must_match_in_kind() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    // the reference's own NaN/Inf is not a bug when the other side agrees
    let same = oracle()
        .judge(&[out(Level::Disable, Status::Ok, &[nan, inf, -inf]), out(Level::All, Status::Ok, &[nan, inf, -inf])]);
    assert!(same.verdicts.is_empty());
    for other in [[1.0, inf, -inf], [nan, -inf, -inf], [nan, inf, 0.0]] {
        let j =
            oracle().judge(&[out(Level::Disable, Status::Ok, &[nan, inf, -inf]), out(Level::All, Status::Ok, &other)]);
        assert_eq!(j.verdicts.len(), 1, "{other:?}");
        assert_eq!(j.verdicts[0].max_diff, Some(f64::INFINITY));
    }
    // a NaN appearing only in the optimized run is an inconsistency too
    let j = oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0]), out(Level::All, Status::Ok, &[nan])]);
    assert_eq!(symptoms(&j), [(Symptom::Inconsistency, "all".to_string())]);
}

#[test]
fn integers_compare_exactly_and_structure_must_match() {
    let int = |level, v: &[f64]| Outcome {
        target: "t".into(),
        config: Config::level(level),
        status: Status::Ok,
        outputs: vec![NamedTensor { name: "k".into(), tensor: Tensor::from_f64s(DType::I64, &[v.len()], v) }],
        passes_fired: vec![],
        passes_ran: vec![],
        time_ms: 0.0,
    };
    let o = Oracle { tolerance: atol(10.0) };
    assert_eq!(o.judge(&[int(Level::Disable, &[1.0, 2.0]), int(Level::All, &[1.0, 3.0])]).verdicts.len(), 1);
    assert!(o.judge(&[int(Level::Disable, &[1.0, 2.0]), int(Level::All, &[1.0, 2.0])]).verdicts.is_empty());
    let j = oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0, 2.0]), out(Level::All, Status::Ok, &[1.0])]);
    assert!(j.verdicts[0].detail.contains("reference has"), "{:?}", j.verdicts);
}

#[test]
fn float16_allows_rounding_but_not_real_differences() {
    let h = |level, v: &[f64]| Outcome {
        target: "t".into(),
        config: Config::level(level),
        status: Status::Ok,
        outputs: vec![NamedTensor { name: "h".into(), tensor: Tensor::from_f64s(DType::F16, &[v.len()], v) }],
        passes_fired: vec![],
        passes_ran: vec![],
        time_ms: 0.0,
    };
    // one ULP of float16 at 100 is 0.0625: within the default ULPs, though far beyond its atol
    assert!(oracle().judge(&[h(Level::Disable, &[100.0]), h(Level::All, &[100.0625])]).verdicts.is_empty());
    let j = oracle().judge(&[h(Level::Disable, &[100.0]), h(Level::All, &[104.0])]);
    assert_eq!(j.verdicts.len(), 1, "64 ULPs");
    assert_eq!(j.verdicts[0].measure.as_ref().and_then(|m| m.ulps), Some(64));
}

#[test]
fn crash_hang_and_oom_are_findings_in_any_configuration() {
    let crash = Status::Crash { signal: Some(11), message: String::new() };
    let j = oracle().judge(&[
        out(Level::Disable, Status::Ok, &[1.0]),
        out(Level::Basic, crash, &[]),
        out(Level::Extended, Status::Timeout { limit_ms: 10 }, &[]),
        out(Level::All, Status::Oom { message: "memory allocation of 8 bytes failed".into() }, &[]),
    ]);
    assert_eq!(
        symptoms(&j),
        [(Symptom::Crash, "basic".into()), (Symptom::Hang, "extended".into()), (Symptom::Crash, "all".into())]
    );
    // a crash of the reference itself is still a crash finding, but the test is not valid
    let j = oracle().judge(&[out(Level::Disable, Status::Crash { signal: Some(6), message: String::new() }, &[])]);
    assert!(!j.valid);
    assert_eq!(symptoms(&j), [(Symptom::Crash, "disable".into())]);
}

#[test]
fn a_reference_that_breaks_the_declared_output_types_makes_the_test_invalid() {
    // the model declares y: float[3]; these inputs make the unoptimized run give float[2] (FastGelu's finding on
    // int64[1,0] where the model declared int64[1,3] was counted valid, and ended undecided)
    let g = {
        let mut g = crate::graph::Graph::new("g");
        g.add_input("x", crate::graph::TensorType::new(DType::F32, &[3]));
        let relu = crate::graph::Node::new("n", crate::graph::OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()]);
        g.add_node(relu).unwrap();
        g.add_output("y", crate::graph::TensorType::new(DType::F32, &[3]));
        g
    };
    let hints = Hints::of_onnx(&g);
    let bytes = crate::graph::onnx::encode_model(&crate::graph::Model::new(g.clone()));
    assert_eq!(crate::graph::onnx::declared_outputs(&bytes), hints.declared);
    let crash = Status::Crash { signal: Some(11), message: String::new() };
    let runs = [out(Level::Disable, Status::Ok, &[1.0, 2.0]), out(Level::All, Status::Ok, &[5.0, 2.0])];
    let j = oracle().judge_with(&runs, &hints);
    assert!(!j.valid && j.verdicts.is_empty());
    assert_eq!(j.invalid_reason.as_deref(), Some(CONTRACT));
    // a crash is still a crash
    let j = oracle().judge_with(&[runs[0].clone(), out(Level::All, crash, &[])], &hints);
    assert_eq!((j.valid, symptoms(&j)), (false, vec![(Symptom::Crash, "all".into())]));
    // inputs within the contract: the deviation is a finding; without declared types nothing is checked
    let ok = [out(Level::Disable, Status::Ok, &[1.0, 2.0, 3.0]), out(Level::All, Status::Ok, &[5.0, 2.0, 3.0])];
    assert_eq!(symptoms(&oracle().judge_with(&ok, &hints)), [(Symptom::Inconsistency, "all".into())]);
    assert!(oracle().judge_with(&runs, &Hints::of(&g)).valid);
}

#[test]
fn optimized_errors_are_findings_and_reference_errors_make_the_test_invalid() {
    let err = |m: &str| Status::Error { message: m.into() };
    let j = oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0]), out(Level::All, err("FusedConv failed"), &[])]);
    assert_eq!(symptoms(&j), [(Symptom::Error, "all".into())]);
    let j = oracle().judge(&[
        out(Level::Disable, err("Could not find an implementation for Foo(1)"), &[]),
        out(Level::All, err("Could not find an implementation for Foo(1)"), &[]),
    ]);
    assert!(!j.valid && j.verdicts.is_empty());
    assert_eq!(j.invalid_reason.as_deref(), Some("no-kernel"));
    let j = oracle().judge(&[out(Level::Disable, err("Invalid rank"), &[])]);
    assert_eq!(j.invalid_reason.as_deref(), Some("reference-error"));
}

#[test]
fn unsupported_filters_are_named() {
    assert_eq!(unsupported_reason("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : x"), Some("no-kernel"));
    assert_eq!(unsupported_reason("op Foo is unsupported"), Some("unsupported"));
    assert_eq!(unsupported_reason("shape mismatch"), None);
}

fn raw_output(dtype: DType, n: usize, bytes: Vec<u8>) -> Vec<NamedTensor> {
    let tensor = Tensor { dtype, dims: vec![n as i64], data: crate::graph::TensorData::Raw(bytes) };
    vec![NamedTensor { name: "y".into(), tensor }]
}

#[test]
fn int64_outputs_compare_exactly_at_full_width() {
    // 2^62 and 2^62 + 1 are the same f64: a comparison through f64 would call them equal
    let a = raw_output(DType::I64, 1, (1i64 << 62).to_le_bytes().to_vec());
    let b = raw_output(DType::I64, 1, ((1i64 << 62) + 1).to_le_bytes().to_vec());
    let d = distance(&a, &b, Tolerance::default()).unwrap();
    assert!(d.exceeds && d.max == 1.0, "{d:?}");
    assert!(!distance(&a, &a, Tolerance::EXACT).unwrap().exceeds);
    let big = raw_output(DType::U64, 1, u64::MAX.to_le_bytes().to_vec());
    let big1 = raw_output(DType::U64, 1, (u64::MAX - 1).to_le_bytes().to_vec());
    assert!(distance(&big, &big1, Tolerance::default()).unwrap().exceeds);
}

#[test]
fn complex_outputs_compare_on_both_parts() {
    let c = |re: f32, im: f32| raw_output(DType::C64, 1, [re.to_le_bytes(), im.to_le_bytes()].concat());
    let d = distance(&c(1.0, 2.0), &c(1.0, 3.0), Tolerance::default()).unwrap();
    assert!(d.exceeds && d.index == 0 && d.max == 1.0, "the imaginary part differs: {d:?}");
    assert_eq!((d.exceeding, d.elements), (1, 1), "one complex value: {d:?}");
    assert!(!distance(&c(1.0, 2.0), &c(1.0, 2.0 + 1e-5), Tolerance::default()).unwrap().exceeds, "within tolerance");
    // the imaginary part alone, by a small amount beyond the float32 rule
    assert!(distance(&c(1.0, 2.0), &c(1.0, 2.001), Tolerance::default()).unwrap().exceeds);
}

#[test]
fn unknown_element_types_compare_byte_wise() {
    let a = raw_output(DType::Other(99), 1, vec![1, 2]);
    assert!(distance(&a, &a, Tolerance::EXACT).is_ok_and(|d| !d.exceeds));
    assert!(distance(&a, &raw_output(DType::Other(99), 1, vec![1, 3]), Tolerance::default()).is_err());
}

/// A run at `level` whose outputs are `(name, dtype, values)`.
fn run(level: Level, outputs: &[(&str, DType, &[f64])]) -> Outcome {
    let outputs = outputs
        .iter()
        .map(|(n, d, v)| NamedTensor { name: n.to_string(), tensor: Tensor::from_f64s(*d, &[v.len()], v) })
        .collect();
    Outcome { outputs, ..out(level, Status::Ok, &[]) }
}

fn verdicts(o: &Oracle, a: &[f64], b: &[f64], dtype: DType) -> usize {
    o.judge(&[run(Level::Disable, &[("y", dtype, a)]), run(Level::All, &[("y", dtype, b)])]).verdicts.len()
}

#[test]
fn float32_small_values_are_judged_relative_to_their_magnitude() {
    // a 1e-4 error on values around 1e-3 is a 10% error: the old absolute 1e-3 let it pass
    let (reference, wrong) = ([1e-3, 2e-3, -3e-3], [1e-3, 2.1e-3, -3e-3]);
    assert_eq!(verdicts(&oracle(), &reference, &wrong, DType::F32), 1);
    assert_eq!(verdicts(&Oracle { tolerance: atol(1e-3) }, &reference, &wrong, DType::F32), 0);
    // float32 rounding of such values is not an inconsistency
    let rounded = [f64::from(1e-3f32), f64::from(f32::from_bits(2e-3f32.to_bits() + 3)), -3e-3];
    assert_eq!(verdicts(&oracle(), &reference, &rounded, DType::F32), 0);
}

#[test]
fn float32_large_values_may_differ_by_their_rounding() {
    // 1e5 and the float32 values a few ULPs away (one ULP is 2^-7 there, far above an absolute 1e-3)
    let ulps_away = |k: u32| f64::from(f32::from_bits(1e5f32.to_bits() + k));
    let (reference, rounded) = ([1e5, -1e5], [ulps_away(4), -ulps_away(1)]);
    assert_eq!(verdicts(&oracle(), &reference, &rounded, DType::F32), 0);
    assert_eq!(verdicts(&Oracle { tolerance: atol(1e-3) }, &reference, &rounded, DType::F32), 1);
    // a real difference at that magnitude is still one
    assert_eq!(verdicts(&oracle(), &reference, &[1e5 + 50.0, -1e5], DType::F32), 1);
}

#[test]
fn float16_and_bfloat16_differences_are_counted_in_ulps() {
    for dtype in [DType::F16, DType::BF16] {
        // at 64 and 96 one ULP (float16: 2^-4, bfloat16: 2^-1) is far above the 16-bit atol
        let up = |x: f64, k: u16| {
            let bits = match dtype {
                DType::F16 => half::f16::from_f64(x).to_bits() + k,
                _ => half::bf16::from_f64(x).to_bits() + k,
            };
            match dtype {
                DType::F16 => half::f16::from_bits(bits).to_f64(),
                _ => half::bf16::from_bits(bits).to_f64(),
            }
        };
        let ulps = u16::try_from(DEFAULT_ULPS).unwrap();
        let within = [up(64.0, ulps), up(96.0, 1)];
        assert_eq!(verdicts(&oracle(), &[64.0, 96.0], &within, dtype), 0, "{dtype}: {within:?}");
        let beyond = [up(64.0, ulps + 1), 96.0];
        let j = oracle()
            .judge(&[run(Level::Disable, &[("h", dtype, &[64.0, 96.0])]), run(Level::All, &[("h", dtype, &beyond)])]);
        assert_eq!(j.verdicts.len(), 1, "{dtype}: {beyond:?}");
        let m = j.verdicts[0].measure.clone().unwrap();
        assert_eq!((m.ulps, m.exceeding, m.elements), (Some(u64::from(ulps) + 1), 1, 2), "{dtype}");
        // more ULPs allowed: it passes
        let lax = Oracle { tolerance: Tolerance { ulps: DEFAULT_ULPS + 1, ..Tolerance::default() } };
        assert_eq!(verdicts(&lax, &[64.0, 96.0], &beyond, dtype), 0, "{dtype}");
    }
    // across zero: -0 and +0 are the same, the smallest subnormals on both sides are 2 ULPs apart
    assert_eq!(ulp_distance16(0x8000, 0x0000), 0);
    assert_eq!(ulp_distance16(0x8001, 0x0001), 2);
}

/// y = QuantizeLinear(x), z = DequantizeLinear(y) (scale 0.5), r = Reshape(y), plain = Identity(u) with u uint8.
fn quantized_graph() -> crate::graph::Graph {
    use crate::graph::{Graph, Node, OpId, TensorType};
    let mut g = Graph::new("q");
    g.add_input("x", TensorType::new(DType::F32, &[2]));
    g.add_input("u", TensorType::new(DType::U8, &[2]));
    g.add_initializer("s", Tensor::from_f32(&[], &[0.5]));
    g.add_initializer("zp", Tensor::from_f64s(DType::U8, &[], &[0.0]));
    g.add_initializer("shape", Tensor::from_i64(&[1], &[2]));
    let node = |op: &str, ins: &[&str], out: &str| {
        Node::new(out, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![out.to_string()])
    };
    g.add_node(node("QuantizeLinear", &["x", "s", "zp"], "y")).unwrap();
    g.add_node(node("DequantizeLinear", &["y", "s", "zp"], "z")).unwrap();
    g.add_node(node("Reshape", &["y", "shape"], "r")).unwrap();
    g.add_node(node("Identity", &["u"], "plain")).unwrap();
    g.add_node(node("Relu", &["x"], "float")).unwrap();
    let cast = node("Cast", &["y"], "wide").with_attr("to", crate::graph::Attr::Int(11));
    g.add_node(cast).unwrap();
    g
}

/// An If whose then-branch quantizes and dequantizes an outer value: its outputs are levels and dequantized
/// levels as the branch's are (a QDQ fusion inside a body rounds like one at the top level).
#[test]
fn hints_pass_through_control_flow_bodies() {
    use crate::graph::{Graph, Node, OpId, TensorType};
    let q = quantized_graph();
    let mut then = Graph::new("then");
    for (n, t) in &q.initializers {
        then.add_initializer(n, t.clone());
    }
    for id in q.topo_order().unwrap() {
        then.add_node(q.node(id).clone()).unwrap();
    }
    then.add_output("y", TensorType::new(DType::U8, &[2]));
    then.add_output("z", TensorType::new(DType::F32, &[2]));
    let mut els = Graph::new("else");
    els.add_node(Node::new("e1", OpId::onnx("Identity"), vec!["u".into()], vec!["eu".into()])).unwrap();
    els.add_node(Node::new("e2", OpId::onnx("Identity"), vec!["x".into()], vec!["ex".into()])).unwrap();
    els.add_output("eu", TensorType::new(DType::U8, &[2]));
    els.add_output("ex", TensorType::new(DType::F32, &[2]));
    let mut g = Graph::new("g");
    for i in &q.inputs {
        g.add_input(i, q.types[i].clone());
    }
    g.add_input("c", TensorType::new(DType::Bool, &[]));
    let node = Node::new("if", OpId::onnx("If"), vec!["c".into()], vec!["qy".into(), "qz".into()])
        .with_attr("then_branch", crate::graph::Attr::Graph(Box::new(then)))
        .with_attr("else_branch", crate::graph::Attr::Graph(Box::new(els)));
    g.add_node(node).unwrap();
    g.add_output("qy", TensorType::new(DType::U8, &[2]));
    g.add_output("qz", TensorType::new(DType::F32, &[2]));
    let h = Hints::of(&g);
    assert!(h.quantized.contains("qy"), "{h:?}");
    assert_eq!(h.dequantized.get("qz"), Some(&0.5), "{h:?}");
}

#[test]
fn quantized_outputs_are_judged_in_quantization_steps() {
    let hints = Hints::of(&quantized_graph());
    assert_eq!(quantized_outputs(&quantized_graph()), ["r", "wide", "y"].map(String::from).into(), "{hints:?}");
    assert_eq!(hints.dequantized.get("z"), Some(&0.5));
    let judge = |name: &str, dtype, b: &[f64], hints: &Hints| {
        let (r, o) = (run(Level::Disable, &[(name, dtype, &[100.0, 0.0])]), run(Level::All, &[(name, dtype, b)]));
        oracle().judge_with(&[r, o], hints).verdicts
    };
    for q in ["y", "r"] {
        // one step on a quantized output passes; without hints it is exact
        assert!(judge(q, DType::U8, &[101.0, 0.0], &hints).is_empty(), "{q}");
        assert_eq!(judge(q, DType::U8, &[101.0, 0.0], &Hints::default()).len(), 1, "{q}");
        // two steps, and the 255-step wrap-around, do not
        assert_eq!(judge(q, DType::U8, &[102.0, 0.0], &hints).len(), 1, "{q}");
        let wrap = judge(q, DType::U8, &[100.0, 255.0], &hints);
        assert_eq!(wrap.len(), 1, "{q}");
        assert_eq!(wrap[0].measure.as_ref().and_then(|m| m.steps), Some(255));
        assert!(wrap[0].detail.contains("255 quantization steps"), "{}", wrap[0].detail);
    }
    // a plain uint8 output is exact even with hints
    assert_eq!(judge("plain", DType::U8, &[101.0, 0.0], &hints).len(), 1);
    // a dequantized output may be one scale (0.5) off, not two
    assert!(judge("z", DType::F32, &[100.5, 0.0], &hints).is_empty());
    assert_eq!(judge("z", DType::F32, &[100.5, 0.0], &Hints::default()).len(), 1);
    assert_eq!(judge("z", DType::F32, &[101.0, 0.0], &hints).len(), 1);
    assert_eq!(judge("float", DType::F32, &[100.5, 0.0], &hints).len(), 1);
    // levels cast to a float (a fused QLinearSoftmax one level off, cast to float64, in review): one level, not two
    assert!(judge("wide", DType::F64, &[101.0, 0.0], &hints).is_empty());
    assert_eq!(judge("wide", DType::F64, &[102.0, 0.0], &hints).len(), 1);
    // more steps allowed by the tolerance
    let lax = Oracle { tolerance: Tolerance { steps: 2, ..Tolerance::default() } };
    let (r, o) = (run(Level::Disable, &[("y", DType::U8, &[100.0])]), run(Level::All, &[("y", DType::U8, &[102.0])]));
    assert!(lax.inconsistency_with(&r, &o, &hints).is_none());
    assert!(lax.inconsistency(&r, &o).is_some());
}

/// A review found DoubleQDQPairsRemover filed for a dequantized output two steps of its scale (0.0036) off: the pass
/// makes one rounding of Q(0.0085), DQ, Q(0.0036), DQ, by design. A requantized value is known to one step of the
/// coarser scale.
#[test]
fn a_requantized_value_is_judged_in_steps_of_the_coarser_scale() {
    use crate::graph::{Graph, Node, OpId, TensorType};
    let mut g = Graph::new("qq");
    g.add_input("x", TensorType::new(DType::F32, &[1]));
    g.add_initializer("s1", Tensor::from_f32(&[], &[0.5]));
    g.add_initializer("s2", Tensor::from_f32(&[], &[0.125]));
    let node = |op: &str, ins: [&str; 2], out: &str| {
        Node::new(out, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![out.to_string()])
    };
    g.add_node(node("QuantizeLinear", ["x", "s1"], "q1")).unwrap();
    g.add_node(node("DequantizeLinear", ["q1", "s1"], "d1")).unwrap();
    g.add_node(node("QuantizeLinear", ["d1", "s2"], "q2")).unwrap();
    g.add_node(node("DequantizeLinear", ["q2", "s2"], "d2")).unwrap();
    let h = Hints::of(&g);
    assert_eq!(h.dequantized.get("d1"), Some(&0.5));
    assert_eq!(h.dequantized.get("d2"), Some(&0.5), "{h:?}");
    let (r, o) = (run(Level::Disable, &[("d2", DType::F32, &[1.0])]), run(Level::All, &[("d2", DType::F32, &[1.25])]));
    assert!(oracle().inconsistency_with(&r, &o, &h).is_none());
    let far = run(Level::All, &[("d2", DType::F32, &[2.0])]);
    assert!(oracle().inconsistency_with(&r, &far, &h).is_some());
}

#[test]
fn int64_near_two_to_the_62_differing_by_one_is_caught() {
    let v = (1i64 << 62) as f64;
    let a = raw_output(DType::I64, 2, [1i64 << 62, -(1i64 << 62)].iter().flat_map(|x| x.to_le_bytes()).collect());
    let b = raw_output(DType::I64, 2, [(1i64 << 62) + 1, -(1i64 << 62)].iter().flat_map(|x| x.to_le_bytes()).collect());
    // even when the output is a quantized one (steps are for quantized ops' levels, exact otherwise)
    let hints = Hints { quantized: ["y".to_string()].into(), ..Hints::default() };
    let lax = Tolerance { steps: 0, ..Tolerance::default() };
    let d = distance_with(&a, &b, lax, &hints).unwrap();
    assert!(d.exceeds && d.max == 1.0 && d.expected == v, "{d:?}");
    assert!(!distance_with(&a, &b, Tolerance::default(), &hints).unwrap().exceeds, "one step allowed");
    assert!(distance(&a, &b, Tolerance::default()).unwrap().exceeds);
}

#[test]
fn tolerances_read_older_checkpoints_and_round_trip() {
    let old: Tolerance = serde_json::from_str("0.001").unwrap();
    assert_eq!(old, Tolerance { atol: Some(1e-3), ..Tolerance::default() });
    let t = Tolerance { atol: None, rtol: Some(1e-2), ulps: 4, steps: 3 };
    assert_eq!(serde_json::from_str::<Tolerance>(&serde_json::to_string(&t).unwrap()).unwrap(), t);
    assert_eq!(serde_json::from_str::<Tolerance>("{}").unwrap(), Tolerance::default());
    // a given atol/rtol overrides every float dtype's default
    let f32_default = DEFAULTS.iter().find(|d| d.0 == DType::F32).map(|d| (d.1, d.2));
    assert_eq!(Tolerance::default().float_rule(DType::F32), f32_default);
    assert_eq!(t.float_rule(DType::F16).map(|r| r.1), Some(1e-2));
    assert_eq!(t.float_rule(DType::C64), Tolerance { rtol: Some(1e-2), ..Tolerance::default() }.float_rule(DType::F32));
    assert_eq!(t.float_rule(DType::I32), None);
    assert!(Tolerance { atol: Some(-1.0), ..t }.validate().is_err());
}

#[test]
fn a_verdict_with_an_infinite_relative_difference_reads_back_from_json() {
    // an output that became Inf: max_rel is infinite, which JSON can only write as null
    let m = Measure { max_rel: f64::INFINITY, ulps: None, steps: Some(0), exceeding: 1, elements: 70 };
    let text = serde_json::to_string(&m).unwrap();
    assert!(text.contains("\"max_rel\":null"), "{text}");
    let back: Measure = serde_json::from_str(&text).expect("a finding's meta.json must load");
    assert!(back.max_rel.is_infinite());
    assert_eq!(back.exceeding, 1);
}

/// A float64 output cast up from a float32 MatMul holds float32 roundings: a fusion that rounds the float32
/// product differently (ONNX Runtime's MatMul + BatchNormalization folding, 1 float32 ULP at 3.1) is judged
/// with float32's tolerance, through the ops computing on it; a float64 computed in float64 is not.
#[test]
fn floats_cast_up_from_a_narrower_type_are_judged_with_its_tolerance() {
    use crate::graph::{Attr, Graph, Node, OpId, TensorType};
    let mut g = Graph::new("cast_up");
    g.add_input("x", TensorType::new(DType::F32, &[2]));
    g.add_input("d", TensorType::new(DType::F64, &[2]));
    let node = |op: &str, ins: &[&str], out: &str| {
        Node::new(out, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![out.to_string()])
    };
    g.add_node(node("MatMul", &["x", "x"], "m")).unwrap();
    let mut cast = node("Cast", &["m"], "up");
    cast.attrs.insert("to".into(), Attr::Int(11));
    g.add_node(cast).unwrap();
    g.add_node(node("Neg", &["up"], "neg")).unwrap();
    g.add_node(node("Add", &["neg", "d"], "sum")).unwrap();
    g.add_node(node("Neg", &["d"], "wide")).unwrap();
    let hints = Hints::of(&g);
    assert_eq!(hints.precision.get("up"), Some(&DType::F32), "{hints:?}");
    assert_eq!(hints.precision.get("sum"), Some(&DType::F32), "computed from it: {hints:?}");
    assert_eq!(hints.precision.get("wide"), None, "{hints:?}");
    assert_eq!(hints.precision.get("m"), None, "float32 in float32: {hints:?}");
    let (expected, got) = (-3.116_190_433_502_197_3, -3.116_190_195_083_618);
    let judge = |name: &str, hints: &Hints| {
        let r = run(Level::Disable, &[(name, DType::F64, &[expected, 1.0])]);
        let o = run(Level::All, &[(name, DType::F64, &[got, 1.0])]);
        oracle().judge_with(&[r, o], hints).verdicts
    };
    for v in ["up", "sum"] {
        assert!(judge(v, &hints).is_empty(), "{v}");
        assert_eq!(judge(v, &Hints::default()).len(), 1, "float64's own tolerance: {v}");
    }
    assert_eq!(judge("wide", &hints).len(), 1);
    // float32's tolerance still catches a wrong value
    let r = run(Level::Disable, &[("up", DType::F64, &[expected])]);
    let o = run(Level::All, &[("up", DType::F64, &[expected * 1.01])]);
    assert_eq!(oracle().judge_with(&[r, o], &hints).verdicts.len(), 1);
}
