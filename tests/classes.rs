//! Which side of an inconsistency is wrong: triage asks the semantic reference (onnx.reference) and files each
//! finding by class. The fault target computes a model's true values and misbehaves on request (shifting the
//! optimized or the unoptimized run, or both, or turning NaN into Inf), so every class has a model whose
//! answer is known; real ONNX Runtime float16 cases show the `reference` and `widened` classes on the real compiler.

mod common;
use common::{chain_model, json, oatest};
use oatest::graph::{onnx, DType, Graph, Model, Node, OpId, Tensor, TensorType};
use std::path::Path;

/// `oatest reduce` on `model` (extra arguments after it); the bug directory's bug.json.
fn reduce(dir: &Path, model: &[u8], target: &str, extra: &[&str]) -> serde_json::Value {
    let path = dir.join("m.onnx");
    std::fs::write(&path, model).unwrap();
    let out = dir.join("bug");
    let mut args = vec!["reduce", path.to_str().unwrap(), "--target", target, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = oatest(&args);
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let class = bug["triage"]["class"].as_str().unwrap().to_string();
    assert!(report.contains(&format!("**Class:** `{class}`")), "{report}");
    bug
}

fn class_of(fault: &str, ops: &[&str], needs: &str, extra: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let bug = reduce(dir.path(), &chain_model(ops, &[4, 6], Some((fault, needs))), "fault", extra);
    (bug["triage"]["class"].as_str().unwrap().to_string(), bug)
}

#[test]
fn a_wrong_optimized_run_is_an_optimizer_bug() {
    let (class, bug) = class_of("wrong", &["Relu", "Sigmoid", "Neg"], "FuseSigmoid", &[]);
    assert_eq!(class, "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["FuseSigmoid"]));
    assert_eq!(bug["triage"]["nodes"], 1, "reduced to the culprit's node: {bug}");
}

#[test]
fn a_wrong_unoptimized_run_is_the_reference_side() {
    let (class, bug) = class_of("wrong_reference", &["Relu", "Sigmoid", "Neg"], "FuseSigmoid", &[]);
    assert_eq!(class, "reference", "{bug}");
    // reduction kept the class: the minimized model still has its reference side wrong
    assert_eq!(bug["triage"]["nodes"], 1, "{bug}");
}

#[test]
fn both_runs_near_the_true_values_is_precision() {
    let tol = ["--tolerance", "0.01"];
    let dir = tempfile::tempdir().unwrap();
    let mut m = onnx::decode_model(&chain_model(&["Sigmoid", "Relu"], &[4, 6], Some(("skew", "FuseSigmoid")))).unwrap();
    // each side 0.009 off the true value: 0.018 apart, more than the tolerance, each within it
    m.metadata.push(("oatest.fault.skew".into(), "0.009".into()));
    let bug = reduce(dir.path(), &onnx::encode_model(&m), "fault", &tol);
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// Precision against float64: in float32, 1e8 + x0 + (1 + x1) - 1e8 + x2 loses the small terms; a rewrite that
/// sums otherwise (here the fault target computing in float64) lands far from the float32 reference but nearer the
/// exact value than the unoptimized run: `precision`, not a bug.
#[test]
fn an_optimized_result_nearer_the_float64_values_than_the_unoptimized_one_is_precision() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Graph::new("g");
    g.add_input("x", TensorType::new(DType::F32, &[3]));
    g.add_initializer("c", Tensor::from_f32(&[3], &[1e8, 1.0, -1e8]));
    g.add_node(Node::new("add", OpId::onnx("Add"), vec!["x".into(), "c".into()], vec!["y".into()])).unwrap();
    g.add_node(Node::new("sum", OpId::onnx("ReduceSum"), vec!["y".into()], vec!["z".into()])).unwrap();
    g.add_output("z", TensorType::new(DType::F32, &[1]));
    let mut m = Model::new(g);
    for (k, v) in
        [("oatest.fault", "float64"), ("oatest.fault.needs", "FuseReduceSum"), ("oatest.fault.compute", "onnx")]
    {
        m.metadata.push((k.into(), v.into()));
    }
    let bug = reduce(dir.path(), &onnx::encode_model(&m), "fault", &[]);
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("float64"), "{bug}");
}

#[test]
fn both_runs_off_the_true_values_is_undecided() {
    let (class, bug) = class_of("wrong_both", &["Sigmoid", "Abs"], "FuseSigmoid", &[]);
    assert_eq!(class, "undecided", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("both runs deviate"), "{bug}");
}

#[test]
fn differences_only_where_the_true_value_is_nan_are_nonfinite() {
    // Log of negated random inputs: NaN where the input was positive, finite elsewhere
    let (class, bug) = class_of("nan_to_inf", &["Neg", "Log"], "FuseLog", &[]);
    assert_eq!(class, "nonfinite", "{bug}");
}

#[test]
fn a_symptom_no_pass_explains_is_unattributed() {
    // a plain fault ignores pass switches: disabling every fired pass leaves it in place
    let (class, bug) = class_of("wrong", &["Sigmoid"], "", &[]);
    assert_eq!(class, "unattributed", "{bug}");
    assert!(bug["triage"]["culprits"].as_array().unwrap().is_empty());
}

/// ONNX Runtime's CPU provider computes a float16 MatMul in float32 through casts it inserts at every level;
/// unoptimized, RemoveDuplicateCastTransformer then hands `Cast(to float)` the unrounded float32 product
/// (ONNX says: the float16 value). With optimization on, EliminateIdentity changes the graph so that the Cast
/// sees the rounded value: the optimized run is right, the unoptimized one is wrong.
#[test]
fn ort_float16_matmul_cast_identity_is_the_reference_side() {
    let mut g = Graph::new("matmul_cast_identity");
    let h = TensorType::new(DType::F16, &[4, 4]);
    g.add_input("x", h.clone());
    let w: Vec<f64> = (0..16).map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.37).collect();
    g.add_initializer("w", Tensor::from_f64s(DType::F16, &[4, 4], &w));
    g.add_node(Node::new("mm", OpId::onnx("MatMul"), vec!["x".into(), "w".into()], vec!["m".into()])).unwrap();
    let mut cast = Node::new("cast", OpId::onnx("Cast"), vec!["m".into()], vec!["c".into()]);
    cast.attrs.insert("to".into(), oatest::graph::Attr::Int(1));
    g.add_node(cast).unwrap();
    g.add_node(Node::new("id", OpId::onnx("Identity"), vec!["c".into()], vec!["i".into()])).unwrap();
    g.add_output("m", h);
    g.add_output("i", TensorType::new(DType::F32, &[4, 4]));
    let dir = tempfile::tempdir().unwrap();
    let bug = reduce(dir.path(), &onnx::encode_model(&Model::new(g)), "ort", &[]);
    assert_eq!(bug["symptom"], "inconsistency", "{bug}");
    assert_eq!(bug["triage"]["class"], "reference", "{bug}");
}

/// The other way round (ONNX Runtime 1.31.1, a 30-minute campaign): `MatMul(float16) -> Identity -> Cast(to
/// float)`. Unoptimized, the Identity keeps ORT's inserted casts apart and the Cast sees the rounded float16
/// product (right); optimized, EliminateIdentity lets the inserted `Cast(to float16)` and the model's
/// `Cast(to float)` merge, so the output is the unrounded float32 product. The optimized side deviates from
/// ONNX semantics, but only by a skipped 16-bit rounding: class `widened`, not a bug of EliminateIdentity.
#[test]
fn ort_float16_matmul_identity_cast_skipping_the_rounding_is_widened() {
    let mut g = Graph::new("matmul_identity_cast");
    let h = TensorType::new(DType::F16, &[1, 1]);
    g.add_input("x", h);
    g.add_node(Node::new("mm", OpId::onnx("MatMul"), vec!["x".into(), "x".into()], vec!["m".into()])).unwrap();
    g.add_node(Node::new("id", OpId::onnx("Identity"), vec!["m".into()], vec!["i".into()])).unwrap();
    let mut cast = Node::new("cast", OpId::onnx("Cast"), vec!["i".into()], vec!["c".into()]);
    cast.attrs.insert("to".into(), oatest::graph::Attr::Int(1));
    g.add_node(cast).unwrap();
    g.add_output("c", TensorType::new(DType::F32, &[1, 1]));
    let dir = tempfile::tempdir().unwrap();
    // x = 2.4568 (float16 2.45703125): x*x = 6.0370..., in float16 6.03515625
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    let x = Tensor::from_f64s(DType::F16, &[1, 1], &[2.45703125]);
    std::fs::write(inputs.join("input_0.pb"), onnx::encode_tensor("x", &x)).unwrap();
    let bug = reduce(dir.path(), &onnx::encode_model(&Model::new(g)), "ort", &["--inputs", inputs.to_str().unwrap()]);
    assert_eq!(bug["symptom"], "inconsistency", "{bug}");
    assert_eq!(bug["triage"]["class"], "widened", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("skips 16-bit roundings"), "{bug}");
}

/// ONNX Runtime 1.31.1 (found by oatest, seed 1): `basic` fails with "Node input ... is not a graph input" after
/// MatMulAddFusion + GemmTransposeFusion + EliminateIdentity; NoopElimination (x + 0 -> x) only makes the
/// pattern appear: alone it yields a correct graph on which the others show the error. It is an enabler.
#[test]
fn a_pass_that_only_makes_the_pattern_appear_is_an_enabler_not_a_culprit() {
    let f = |d: &[usize]| TensorType::new(DType::F32, d);
    let mut g = Graph::new("matmul_add_noop");
    g.add_input("v", f(&[1]));
    g.add_input("a", f(&[1, 1]));
    g.add_input("b", f(&[1, 1]));
    g.add_initializer("axes", Tensor::from_i64(&[1], &[1]));
    g.add_initializer("zero", Tensor::from_f32(&[1], &[0.0]));
    let node = |name: &str, op: &str, ins: &[&str], out: &str| {
        Node::new(name, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![out.to_string()])
    };
    g.add_node(node("u", "Unsqueeze", &["v", "axes"], "bv")).unwrap();
    g.add_node(node("t", "Transpose", &["a"], "at")).unwrap();
    g.add_node(node("mm", "MatMul", &["at", "b"], "product")).unwrap();
    g.add_node(node("add", "Add", &["product", "bv"], "sum")).unwrap();
    g.add_node(node("add0", "Add", &["zero", "bv"], "plus0")).unwrap();
    g.add_node(node("id", "Identity", &["plus0"], "y1")).unwrap();
    g.add_output("y1", f(&[1, 1]));
    g.add_output("sum", f(&[1, 1]));
    let dir = tempfile::tempdir().unwrap();
    let bug = reduce(dir.path(), &onnx::encode_model(&Model::new(g)), "ort", &[]);
    assert_eq!(bug["symptom"], "error", "{bug}");
    let t = &bug["triage"];
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
    };
    assert!(names(&t["culprits"]).contains(&"NoopElimination".to_string()), "{bug}");
    assert_eq!(names(&t["enablers"]), ["NoopElimination"], "{bug}");
    let report = std::fs::read_to_string(dir.path().join("bug/report.md")).unwrap();
    assert!(report.contains("**Enabled by:** NoopElimination"), "{report}");
}

/// ONNX Runtime 1.31.1 on x86-64 without VNNI: quantizing a Conv's float weights to full-range int8 makes a
/// U8S8 QLinearConv whose fast AVX2 kernel overflows (the documented U8S8 saturation); ORT's precise mode
/// `session.x64quantprecision=1` computes it right. Class `platform`, not a bug of the passes. On a machine
/// whose kernels do not overflow (VNNI, or not x86-64) there is no finding at all.
#[test]
fn ort_u8s8_overflow_cured_by_the_precise_x64_mode_is_platform() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oatest-findings/u8s8-overflow");
    let dir = tempfile::tempdir().unwrap();
    let model = std::fs::read(data.join("model.onnx")).unwrap();
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let overflows = cfg!(target_arch = "x86_64") && !cpu.contains("vnni");
    if !overflows {
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, &model).unwrap();
        let o = oatest(&["reduce", path.to_str().unwrap(), "--target", "ort", "--inputs", data.to_str().unwrap()]);
        assert!(!o.status.success(), "no overflow here, so no finding: {}", String::from_utf8_lossy(&o.stdout));
        return;
    }
    let bug = reduce(dir.path(), &model, "ort", &["--inputs", data.to_str().unwrap()]);
    assert_eq!(bug["symptom"], "inconsistency", "{bug}");
    assert_eq!(bug["triage"]["class"], "platform", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("session.x64quantprecision=1"), "{bug}");
}

/// ONNX Runtime 1.31.1 (a 1-hour campaign filed this as a bug): `com.microsoft::Gelu(x) * x` under
/// `all+gelu_approx`. GeluApproximation turns Gelu into FastGelu's tanh formula, as that configuration asks;
/// the downstream Mul grows the approximation's error past the configuration's atol (1.3e-3 at x = -2.84). The
/// optimized run matches the model evaluated with that approximation: class `approximated`, not a bug.
#[test]
fn ort_gelu_approximation_deviating_only_by_the_approximation_is_approximated() {
    let mut g = Graph::new("gelu_mul");
    let t = TensorType::new(DType::F32, &[2, 1, 1, 2]);
    g.add_input("x", t.clone());
    let gelu = OpId { domain: "com.microsoft".into(), name: "Gelu".into() };
    g.add_node(Node::new("gelu", gelu, vec!["x".into()], vec!["g".into()])).unwrap();
    g.add_node(Node::new("mul", OpId::onnx("Mul"), vec!["g".into(), "x".into()], vec!["y".into()])).unwrap();
    g.add_output("y", t);
    let mut m = Model::new(g);
    m.opsets.insert("com.microsoft".into(), 1);
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    let x = Tensor::from_f64s(DType::F32, &[2, 1, 1, 2], &[1.90234375, -1.24609375, -1.8046875, -2.83984375]);
    std::fs::write(inputs.join("input_0.pb"), onnx::encode_tensor("x", &x)).unwrap();
    let args = ["--inputs", inputs.to_str().unwrap(), "--config", "disable", "--config", "all+gelu_approx"];
    let bug = reduce(dir.path(), &onnx::encode_model(&m), "ort", &args);
    assert_eq!(bug["symptom"], "inconsistency", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["GeluApproximation"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("approximation gelu"), "{bug}");
}

/// ONNX Runtime 1.31.1 (a 1-hour campaign filed this as a LayerNormFusionL1 bug): a layer normalization of
/// three equal float32 values. The fused kernel returns the bias exactly; onnx.reference and the unoptimized
/// run subtract a mean rounded one ULP away and divide that by sqrt(1e-8), landing 1.2e-3 off. Inputs moved by
/// a few ULPs move the reference's own result as far, and the fused result is the float64 value: class
/// `precision` (the float64 evaluation is asked first), not a bug.
#[test]
fn ort_layer_norm_of_equal_values_is_ill_conditioned_precision() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oatest-findings/layernorm-ill-conditioned");
    let dir = tempfile::tempdir().unwrap();
    let model = std::fs::read(data.join("model.onnx")).unwrap();
    let bug = reduce(dir.path(), &model, "ort", &["--inputs", data.to_str().unwrap()]);
    assert_eq!(bug["symptom"], "inconsistency", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL1"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    let note = bug["triage"]["class_note"].as_str().unwrap();
    assert!(note.contains("evaluated in float64") || note.contains("ill-conditioned"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 71, left in `undecided/` and `nonfinite/` in review): NoopElimination removes
/// `Add(m, +0)`, which is not a no-op at m = -0; `x / m` then gives -inf for +inf. onnx.reference cannot run
/// the whole model (an unrelated com.microsoft FusedConv output), so the output that differs is judged on the
/// part of the model that computes it. An infinity of the other sign there is the sign of a zero: two reviews split
/// on whether dropping `x + 0` is a bug (XLA and most graph compilers do it), so it is classified `nonfinite`, not
/// filed (session 23).
#[test]
fn ort_noop_elimination_of_adding_zero_to_negative_zero_is_a_signed_zero_difference() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oatest-findings/noop-negative-zero");
    let dir = tempfile::tempdir().unwrap();
    let model = std::fs::read(data.join("model.onnx")).unwrap();
    let args = ["--inputs", data.to_str().unwrap(), "--config", "disable", "--config", "all"];
    let bug = reduce(dir.path(), &model, "ort", &args);
    assert_eq!(bug["symptom"], "inconsistency", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["NoopElimination"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "nonfinite", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("sign of a zero"), "{bug}");
    let reduced = onnx::load(&dir.path().join("bug/model.onnx")).unwrap();
    let ops: Vec<String> = reduced.graph.node_ids().map(|id| reduced.graph.node(id).op.name.clone()).collect();
    assert!(ops.contains(&"Add".to_string()) && ops.len() <= 4, "the Add of +0 stays, little else: {ops:?}");
}

/// `oatest reduce` of a finding kept under tests/data/oatest-findings/`name` at `config`; None when this machine
/// shows no finding there (the x64 quantized kernels differ between CPUs).
fn reduce_kept(name: &str, config: &str) -> Option<serde_json::Value> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oatest-findings").join(name);
    let dir = tempfile::tempdir().unwrap();
    let model = data.join("model.onnx");
    let out = dir.path().join("bug");
    let args = ["reduce", model.to_str().unwrap(), "--target", "ort", "--inputs", data.to_str().unwrap()];
    let more = ["--config", "disable", "--config", config, "--out", out.to_str().unwrap()];
    let o = oatest(&[&args[..], &more[..]].concat());
    o.status.success().then(|| json(&out.join("bug.json")))
}

/// [`reduce_kept`] of a finding of ONNX Runtime's x64 quantized kernels: None only on a machine whose kernels do
/// not saturate (not AVX2, or with VNNI), which shows no finding there.
fn reduce_kept_x64(name: &str, config: &str) -> Option<serde_json::Value> {
    let bug = reduce_kept(name, config);
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let saturating = cfg!(target_arch = "x86_64") && cpu.contains("avx2") && !cpu.contains("vnni");
    assert!(bug.is_some() || !saturating, "an AVX2 machine without VNNI shows the finding {name}");
    bug
}

/// ONNX Runtime 1.32.0 (seed 301, `--vary extra-reader`): DQMatMulNBitsFusion, opt-in, runs only under the named
/// configuration `dq_matmulnbits`, and removes a Reshape whose output is also a graph output. Triage reduces and
/// blames it under that configuration.
#[test]
fn ort_an_opt_in_pass_is_blamed_under_its_named_configuration() {
    let bug = reduce_kept("dq-matmulnbits-reshape-output", "all+dq_matmulnbits").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["DQMatMulNBitsFusion"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["config"], "all+dq_matmulnbits", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 301, `--vary broadcast`): a Gelu chain on a rank-0 input whose Add constant is [1]
/// computes a [1]; GeluFusionL1 fuses it into a rank-0 Gelu and the Unsqueeze after it fails. Triage blames it.
#[test]
fn ort_a_fusion_that_drops_the_rank_its_constants_broadcast_to_is_blamed() {
    let bug = reduce_kept("gelu-constants-raise-a-scalars-rank", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["GeluFusionL1"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, filed as a LayerNormFusionL1 bug): the mean of a layer normalization's output,
/// cast to int8 and reshaped, is exactly 1.0; the fused kernel gives one ULP below and the Cast truncates it to 0.
/// The float value the Cast reads is within rounding of the float64 one: precision, not a bug.
#[test]
fn ort_an_integer_cast_of_a_float_on_a_rounding_boundary_is_precision() {
    let bug = reduce_kept("layernorm-cast-boundary", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL1"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    // the float values the Casts read judge it (boundary.rs), or perturbed references that flip the Cast too
    let note = bug["triage"]["class_note"].as_str().unwrap();
    assert!(note.contains("rounding boundary") || note.contains("ill-conditioned"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, filed as a ConvMulFusion bug): in a Loop body, float16 Conv and Mul of a dynamic
/// quantization's zero point. Folding the Mul into float16 weights is as far from the float64 values as the
/// unoptimized run; quantizing a graph input moves no rounding boundary, so the output is compared: precision.
#[test]
fn ort_a_float16_fold_after_quantizing_a_graph_input_is_precision() {
    let bug = reduce_kept("convmul-fp16-in-loop", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["ConvMulFusion"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, left `unattributed`): under the precise x64 mode, Avx2WeightS8ToU8Transformer makes
/// an int8 QLinearConv's weight uint8 beside an int8 activation; no kernel takes the pair. NhwcTransformer only
/// changes which op reports it (the com.microsoft QLinearConv or the ONNX one): one error kind, one culprit.
#[test]
fn ort_a_missing_kernel_reported_by_another_op_is_one_error_kind() {
    let Some(bug) = reduce_kept_x64("avx2-weight-kernel", "all+x64_precise") else { return };
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["Avx2WeightS8ToU8Transformer"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89): a quantized ResNet block whose optimized result is the AVX2 U8S8 saturation
/// (4 quantization steps). Its precise-mode run failed on QDQS8ToU8Transformer's own bug, so it was filed as a
/// QDQSelectorActionTransformer bug and reduced into another one (the review). Without that pass, the precise
/// mode computes the expected values: platform.
#[test]
fn ort_saturation_whose_precise_run_trips_another_bug_is_still_platform() {
    let Some(bug) = reduce_kept_x64("avx2-saturation-shared-weight", "all") else { return };
    assert_eq!(bug["triage"]["class"], "platform", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("QDQS8ToU8Transformer disabled"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, filed as a LayerNormFusionL1 bug before the review): several outputs differ, and
/// the whole model's class said wrong rewrite. Each output alone is rounding (a float within its tolerance of the
/// float64 value, a mean one ULP below 1.0 cast to int8): precision, decided before any reduction.
#[test]
fn ort_outputs_that_each_round_differently_are_precision_together() {
    let bug = reduce_kept("layernorm-outputs-alone", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    // a DequantizeLinear of the int8 mean, reshaped: steps of a float, judged by the mean (or each output alone, or
    // by a layer normalization's variance moved as a one-pass kernel rounds it)
    let note = bug["triage"]["class_note"].as_str().unwrap();
    let why = ["judged alone", "rounding boundary", "ill-conditioned"];
    assert!(why.iter().any(|w| note.contains(w)), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, filed as a ConvBNFusion bug): a float16 Conv and BatchNormalization of constants.
/// The fold rounds each step to float16, so one element where large terms cancel is 8 float16 ULPs off. Moving
/// the model's constants by a few ULPs moves onnx.reference's own result as far: precision, not a wrong fold.
#[test]
fn ort_a_float16_fold_of_constants_rounding_each_weight_is_precision() {
    let bug = reduce_kept("convbn-fp16-fold", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["ConvBNFusion"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("inputs and constants"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, filed as a LayerNormFusionL2 bug, "not an optimizer bug" in review): at opset 10,
/// ONNX's Slice shape inference gives three slices of different sizes its input's symbolic dimension; ORT's memory
/// planner trusts it and reuses a buffer of another size once the fusion frees one. The values contradict the
/// inferred shapes: class `contract`, not filed in bugs/.
#[test]
fn ort_values_contradicting_the_inferred_shapes_break_a_contract() {
    let bug = reduce_kept("slice10-inferred-shapes", "all").expect("a finding");
    assert_eq!(bug["symptom"], "error", "{bug}");
    assert_eq!(bug["triage"]["class"], "contract", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("the same dimension 'n4'"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 89, filed with NchwcTransformer as a co-faulty pass): MatmulTransposeFusion reorders a
/// Cast and a Transpose, gives up on the rank and reports no change; the unresolved graph crashes NchwcTransformer.
/// The graph it saves shows the change it did not report: it is the faulty pass, NchwcTransformer an enabler.
#[test]
fn ort_a_pass_that_changes_the_graph_without_reporting_it_is_the_faulty_one() {
    let bug = reduce_kept("matmul-transpose-silent", "all").expect("a finding");
    assert_eq!(bug["symptom"], "crash", "{bug}");
    let (culprits, enablers) = (&bug["triage"]["culprits"], &bug["triage"]["enablers"]);
    assert!(culprits.as_array().unwrap().contains(&"MatmulTransposeFusion".into()), "{bug}");
    assert!(enablers.as_array().unwrap().contains(&"NchwcTransformer".into()), "{bug}");
    assert!(!enablers.as_array().unwrap().contains(&"MatmulTransposeFusion".into()), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, filed with QDQPropagationTransformer and QDQS8ToU8Transformer both faulty, #25526):
/// in a Loop body, the Q propagation inserts keeps `output_dtype=INT8` once QDQS8ToU8Transformer makes its zero
/// point uint8. Saved with only the propagation on (no later pass folding the new Q), the graph is correct and
/// shows the error under QDQS8ToU8Transformer alone: the propagation is the enabler.
#[test]
fn ort_an_enabler_is_found_on_the_graph_it_alone_saves() {
    let bug = reduce_kept("s8tou8-after-propagation-in-loop", "all").expect("a finding");
    assert_eq!(bug["triage"]["enablers"], serde_json::json!(["QDQPropagationTransformer"]), "{bug}");
    let culprits = bug["triage"]["culprits"].as_array().unwrap();
    assert!(culprits.contains(&"QDQS8ToU8Transformer".into()), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, filed as a GeluApproximation bug): under the opt-in approximation a Gelu of
/// -1.07e-6 becomes -0, and the Sign after it 0 instead of -1. A step of a float is judged by the float it reads,
/// as an integer Cast is: here the approximation's (it was precision, within rounding of the float64 value, before
/// the approximation was asked first): approximated.
#[test]
fn ort_a_sign_of_a_float_on_its_boundary_is_judged_by_that_float() {
    let bug = reduce_kept("sign-of-approximated-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
    // the Sign's element is undetermined within the approximation's tanh ULPs, or judged by the float it reads
    let note = bug["triage"]["class_note"].as_str().unwrap();
    assert!(note.contains("steps of floats") || note.contains("approximation gelu"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 127, filed as a GeluApproximation bug): the opt-in approximation makes a Gelu of
/// -1e-6 exactly -0, and a Pow of it by a negative exponent inf where the exact model gives NaN. Elements where the
/// model evaluated with the approximation is not finite are not compared; the rest matches it: approximated.
#[test]
fn ort_an_approximation_across_a_singularity_is_approximated() {
    let bug = reduce_kept("pow-of-approximated-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 263, filed as a GeluApproximation bug): `Reciprocal(BiasGelu(x, c))` under
/// `all+gelu_approx`. At x + c = -5.05 ORT's tanh kernel gives exactly -1 where tanh rounds to 1 - 6e-8, so the
/// approximated Gelu is -0 (the Reciprocal -inf), the correctly rounded approximation -1.5e-7 (-6.6e6); elsewhere
/// its tanh is 2 ULPs off. Elements the approximation decides only to its tanh kernel's few ULPs (evaluated at
/// either end) are not compared; the rest matches it: approximated.
#[test]
fn ort_an_approximation_decided_only_within_its_tanh_kernels_ulps_is_approximated() {
    let bug = reduce_kept("reciprocal-of-a-saturated-tanh-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 211, a duplicate in review): DivMulFusion rewrites the int64 `ids * (1 / d)` as
/// `ids / d`, and the EmbedLayerNormalization that EmbedLayerNormFusion made of the Gathers refuses the index -1
/// (the unoptimized `ids * 0` is 0). The failing node is a fused one, not in the model: the values the model computes,
/// returned one at a time, show DivMulFusion's wrong value, so the error is keyed as that wrong result.
#[test]
fn ort_a_fused_node_refusing_a_value_computed_wrong_is_that_wrong_results_entry() {
    let bug = reduce_kept("divmul-int-under-embedlayernorm", "all+free_dims").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    let note = bug["triage"]["class_note"].as_str().unwrap();
    assert!(note.contains("reads a value the culprits compute wrong"), "{bug}");
    assert!(note.contains("mul_3"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 211, filed as a LayerNormFusionL1 bug): the square root of a layer normalization's
/// mean minus a value near its bias, rounding noise around 0. The fused kernel's noise is negative (NaN), the
/// unoptimized run's positive; float64 and the perturbed references give NaN too: precision.
#[test]
fn ort_a_nan_from_the_square_root_of_rounding_noise_is_precision() {
    let bug = reduce_kept("sqrt-of-layernorm-noise", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 211, a LayerNormFusionL1 entry at session 22's final build): the mean of a layer
/// normalization's output minus its mean is rounding noise around 0; cast to float16 and divided by 1e-12, one ULP
/// of noise is 59,604 where the unoptimized run's noise rounds to 0. Moving the values the arithmetic computes by
/// one ULP moves onnx.reference's result as far (the Pow's exponent 2 kept exact): precision.
#[test]
fn ort_rounding_noise_divided_by_a_tiny_epsilon_is_precision() {
    // the same entry at this build: a float16 mean of that noise and a Sub follow, which the optimized run
    // computes in float32: the perturbed model widened to float32 moves as far
    for name in ["layernorm-mean-to-float16", "layernorm-mean-in-float16"] {
        let bug = reduce_kept(name, "all").expect("a finding");
        assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL1"]), "{bug}");
        assert_eq!(bug["triage"]["class"], "precision", "{bug}");
        assert!(bug["triage"]["class_note"].as_str().unwrap().contains("values its arithmetic computes"), "{bug}");
    }
}

/// ONNX Runtime 1.32.0 (seed 211, filed as a DoubleQDQPairsRemover bug): an input quantized with scale 1/127.5,
/// then 1/127, read by a FusedConv. The pass collapses the two pairs into one with a scale recomputed from both
/// ranges, so 1.0 becomes 0.996 and the convolution scales that step. The model collapsed as the pass does by
/// design gives the optimized values: precision.
#[test]
fn ort_a_double_qdq_pair_collapsed_by_design_is_precision() {
    let bug = reduce_kept("double-qdq-before-fusedconv", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["DoubleQDQPairsRemover"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("collapsed into one"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 223, filed as a MatMulAddFusion bug): a float16 MatMul and Adds, cast to float32,
/// beside a com.microsoft MatMulNBits. The unoptimized run skips the float16 roundings, the fused one keeps one.
/// onnx.reference evaluates MatMulNBits now, so the whole model is judged: the optimized result is as close to the
/// float64 values as a conforming float16 evaluation is (the review: 1.0e-4 against 3.4e-4): precision.
#[test]
fn ort_a_float16_rounding_kept_beside_matmulnbits_is_precision() {
    let bug = reduce_kept("matmulnbits-beside-fp16-add", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    let note = bug["triage"]["class_note"].as_str().unwrap();
    assert!(note.contains("evaluated in float64") && !note.contains("MatMulNBits"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 223, filed as an NchwcTransformer bug): zeros divided by the mean of a row minus its
/// mean, exactly 0 in exact arithmetic (float64 and the unoptimized run: NaN), rounding noise in the optimized run
/// (0). Perturbed references, their computed values moved by an ULP, give finite values there too: the NaN is no
/// semantics of the model, and the class stays nonfinite.
#[test]
fn ort_a_nan_of_zero_over_a_cancelled_mean_is_not_semantics() {
    let bug = reduce_kept("zero-over-cancelled-mean", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "nonfinite", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 223, filed as a GeluApproximation bug): the reciprocal of a Gelu at -5.1 under
/// `all+gelu_approx`. The tanh approximation of a Gelu that small is 1 + tanh of about -1, a few ULPs; its
/// reciprocal is off by 5e6 in any float32 evaluation of the approximation. It was precision (perturbed references
/// of the approximated model spread as far); the approximation evaluated with its tanh a few ULPs either way
/// leaves that element undetermined, and the rest matches: approximated.
#[test]
fn ort_the_reciprocal_of_a_tiny_approximated_gelu_is_approximated() {
    let bug = reduce_kept("reciprocal-of-approximated-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 223, filed as an EliminateIdentity bug): a float16 MatMul cast to float32, quantized
/// twice and multiplied by itself. The optimized run skips the product's float16 rounding, nothing else; a quantized
/// op reads every float, so nothing can be perturbed, but the model widened to float32 moves the result as far:
/// precision.
#[test]
fn ort_a_skipped_float16_rounding_before_quantized_ops_is_precision() {
    let bug = reduce_kept("fp16-matmul-before-requantized-matmul", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 223, filed as a ConvBNFusion bug): a float16 Conv and BatchNormalization in a Scan
/// body that also dequantizes int32 biases for another output. The Conv output is no quantized op's, so the
/// float64 values judge it: the fold is off by 1.6e-3 where the unoptimized run is off by 8.3e-4: precision.
#[test]
fn ort_a_float_output_of_a_scan_beside_quantized_ones_is_judged_in_float64() {
    let bug = reduce_kept("fp16-convbn-in-quantized-scan", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("evaluated in float64"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 211, the same entry triaged again): at -4.96 ORT's tanh saturates to -1 one ULP before
/// the correctly rounded one does, so the approximated Gelu is -0 and the model evaluated with the approximation
/// -3e-7; times 1 + Erf of it, then Floor: -0 and -1. The float Floor reads is judged against the approximation
/// (the Gelu's alone: ORT keeps the Erf exact): approximated.
#[test]
fn ort_a_floor_of_an_approximation_one_ulp_apart_is_approximated() {
    let bug = reduce_kept("floor-of-early-saturated-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 211, the LayerNormFusionL1 entry triaged again): a layer normalization of three equal
/// values, dequantized from a QLinearConv and MaxPool of a graph input cast, expanded and quantized. The fused kernel
/// gives the exact bias, the unoptimized run 4.8e-3 off it. A Cast, a selection and quantized ops of given values are
/// the same in a float64 evaluation, so the output is judged against it: precision.
#[test]
fn ort_a_float_output_after_quantized_ops_of_given_levels_is_judged_in_float64() {
    let bug = reduce_kept("layernorm-after-qlinearconv", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 211, filed as a GeluApproximation bug): a BiasGelu of -5.3 then Floor under
/// `all+gelu_approx`. FastGelu's tanh saturates to -1, so the approximated Gelu is -0 and its Floor -0 where the exact
/// one gives -1; the model evaluated with the approximation must saturate alike (numpy's float32 tanh stops one ULP
/// short of -1): approximated.
#[test]
fn ort_a_floor_of_a_saturated_approximation_is_approximated() {
    let bug = reduce_kept("floor-of-approximated-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 127, the same entry again): the approximated Gelu's output beside a float16 output
/// that deviates from onnx.reference in both runs alike. The approximation explains the outputs the runs differ on.
#[test]
fn ort_an_approximation_is_judged_on_the_outputs_the_runs_differ_on() {
    let bug = reduce_kept("gelu-approximated-beside-float16", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 127, left undecided, a miss in review): LayerNormFusionL2 fuses a layer normalization
/// whose Pow exponent is a graph input. onnx.reference fails on a grouped ConvTranspose before it, whose output is
/// also returned: the output both runs agree on is given, and the rest is judged.
#[test]
fn ort_outputs_both_runs_agree_on_are_given_where_the_reference_fails_before_them() {
    let bug = reduce_kept("layernorm-pow-after-grouped-convtranspose", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL2"]), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 127, filed as a ConvBNFusion bug): a float16 Conv and BatchNormalization of a quantized
/// graph input requantized to another scale. Requantizing given values is compared with float64: precision.
#[test]
fn ort_a_float16_fold_after_requantizing_a_graph_input_is_precision() {
    let bug = reduce_kept("convbn-fp16-after-requantize", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["ConvBNFusion"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 127, the same ConvBNFusion finding minimized otherwise): a float32 MatMul before the
/// quantization leaves the perturbation test to judge; one element is one float16 ULP off where no perturbation
/// moved onnx.reference's rounded result. One ULP of the result is rounding: precision.
#[test]
fn ort_a_float16_result_one_ulp_off_where_perturbations_do_not_move_it_is_precision() {
    let bug = reduce_kept("convbn-fp16-one-ulp", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["ConvBNFusion"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, filed as a LayerNormFusionL1 bug): a layer normalization of nearly equal rows,
/// 0.2 off the float64 values in both runs, beside a row that is NaN in all three. NaN where the float64 value is
/// NaN is no error: the rest is judged, precision.
#[test]
fn ort_rows_nan_on_every_side_leave_the_rest_to_the_float64_judgement() {
    let bug = reduce_kept("layernorm-nan-rows", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("evaluated in float64"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, filed as a ConvMulFusion bug): a float16 Conv and Mul in a Loop body, their weights
/// body initializers, read from an integer MatMul of 3e4 to 6e4. The fold rounds the weights to float16; moving the
/// body's constants by a few ULPs moves the reference as far (the main graph's integer inputs stay): precision.
#[test]
fn ort_a_float16_fold_of_a_loop_bodys_weights_is_precision() {
    let bug = reduce_kept("convmul-fp16-loop-weights", "all").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["ConvMulFusion"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, filed as a LayerNormFusionL1 bug): the square root of a mean that is exactly
/// -2^-23 below 1 is NaN; the fused run gives NaN, the unoptimized one 0 by rounding. Against float64 the
/// unoptimized run is infinitely off and the optimized one exact: precision.
#[test]
fn ort_an_optimized_nan_where_the_exact_value_is_nan_is_precision() {
    let bug = reduce_kept("layernorm-exact-nan", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("evaluated in float64"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, filed as a MatMulAddFusion bug, a duplicate in review): GemmTransposeFusion fuses
/// the Gemm MatMulAddFusion made, loses an edge, and the graph fails before it reports firing. MatMulAddFusion alone
/// shows it only while the unfired passes run: the search among every pass that runs names GemmTransposeFusion.
#[test]
fn ort_a_pass_that_fails_before_reporting_is_found_among_every_pass_that_runs() {
    let bug = reduce_kept("gemm-transpose-unreported", "all").expect("a finding");
    let culprits = bug["triage"]["culprits"].as_array().unwrap();
    assert!(culprits.contains(&"GemmTransposeFusion".into()), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 113, left in `nonfinite/`, a miss in review): LayerNormFusionL2 never checks that the
/// Pow exponent is 2 and fuses a Pow of 0.035, whose exact result is NaN for negative deviations (the unoptimized
/// run's too); the fused run gives finite values. NaN is the semantics there: a wrong result, an optimizer bug.
#[test]
fn ort_a_nan_of_the_exact_values_that_only_the_optimized_run_loses_is_an_optimizer_bug() {
    let bug = reduce_kept("layernorm-pow-exponent", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL2"]), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 229, filed as a QDQSelectorActionTransformer bug): a quantized Conv requantized twice,
/// then added to a float input. The float sum the QuantizeLinear reads is within an ULP of the middle between two
/// steps; QLinearConv's exact integer sum rounds it the other way. That sum is computed, so a perturbed reference
/// moves it by an ULP and flips the same elements: precision.
#[test]
fn ort_a_computed_sum_between_two_quantization_steps_is_precision() {
    let bug = reduce_kept("conv-sum-between-quantization-steps", "all+qdq_int8").expect("a finding");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["QDQSelectorActionTransformer"]), "{bug}");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("ill-conditioned"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 229, filed as an NchwcTransformer bug): a graph input padded and reshaped (oatest's
/// shape bridge) through QLinearConv, cast to float, into a float Conv. A Pad moves given values, so the quantized
/// levels are the same in a float64 evaluation, which judges the blocked Conv's summation order: precision.
#[test]
fn ort_quantized_levels_of_a_padded_input_are_judged_in_float64() {
    let bug = reduce_kept("conv-after-padded-qlinearconv", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("evaluated in float64"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 229, filed as a LayerNormFusionL1 bug): a float64 layer normalization in a Scan body
/// whose deviations are cast to float32 and back. The fused kernel skips that rounding: exact in float64 where the
/// unoptimized run is 3.5e-7 off. The body reads a quantized value made from a padded graph input only: precision.
#[test]
fn ort_a_skipped_float32_rounding_in_a_float64_body_is_precision() {
    let bug = reduce_kept("layernorm-float32-cast-in-float64-scan", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 271, left undecided, a miss in review): LayerNormFusionL2 fuses a layer
/// normalization whose Pow exponent a grouped ConvTranspose computes (not 2). onnx.reference failed on the grouped
/// ConvTranspose ("cannot reshape array"); the semantic reference evaluates each group on its own.
#[test]
fn ort_a_grouped_conv_transpose_has_a_semantic_reference() {
    let bug = reduce_kept("layernorm-pow-exponent-from-a-grouped-conv-transpose", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL2"]), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 269, left undecided): QDQ propagation's uint8 QuantizeLinear after an int8
/// DequantizeLinear zeroes the negative values a MaxPool with pads [1, 0] reads (#27845). onnx.reference could not
/// size that MaxPool ("output shape cannot be null"): the semantic reference pools as the spec says.
#[test]
fn ort_a_maxpool_with_uneven_pads_has_a_semantic_reference() {
    let bug = reduce_kept("maxpool-uneven-pads-after-int8-dequantize", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["QDQPropagationTransformer"]), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 263, filed as a LayerNormFusionL1 bug): in a Scan body, a layer normalization of a
/// constant row, the dequantized quantization of an outer Abs of a graph input. The unoptimized run is 2.4e-3 off
/// (eps 1e-8 amplifies the mean's rounding), the fused kernel exact. A body's outer value was not "given", so the
/// quantization counted as computing and the float64 evaluation could not judge the output: precision.
#[test]
fn ort_a_quantized_outer_value_in_a_body_is_judged_in_float64() {
    let bug = reduce_kept("layernorm-of-an-outer-quantized-value-in-a-scan", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 229, filed as a GeluApproximation bug): a row divided by the mean of its deviations
/// from its mean, exactly 0 in onnx.reference (-inf), rounding noise in both runs (finite, 4.7e6 and -7.3e7). A
/// perturbed reference gives finite values there: the infinity is no semantics of the model (it was precision).
/// The approximation evaluated with its tanh a few ULPs either way moves those elements as far, and the other
/// output matches the approximation: approximated.
#[test]
fn ort_a_finite_value_where_only_exact_arithmetic_divides_by_zero_is_no_bug() {
    let bug = reduce_kept("division-by-cancelled-mean-after-approximated-gelu", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 233, filed as an NchwcTransformer bug): a graph input through Relu, QuantizeLinear and
/// DequantizeLinear into a float Conv. A Relu of given values selects (exact in float64), so the float64 values
/// judge the blocked Conv's summation order: precision.
#[test]
fn ort_quantized_levels_of_a_relu_of_an_input_are_judged_in_float64() {
    let bug = reduce_kept("conv-after-relu-of-quantized-input", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("evaluated in float64"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 233, filed as a GeluApproximation bug): an Erf-built Gelu divided by 0.033, then 1 +
/// the Erf of that divided by sqrt 2, under `all+gelu_approx`. ORT approximates the Gelu's Erf only; the approximated
/// evaluation keeps the other Erf exact too (nothing multiplies it by x: no Gelu): approximated.
#[test]
fn ort_an_erf_of_a_scaled_value_that_is_no_gelus_stays_exact_when_approximating() {
    let bug = reduce_kept("gelu-divided-then-erf", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 233, filed as a MatMul_BatchNormalization_Fusion bug): a float16 MatMul and
/// BatchNormalization in a Loop body whose other output a comparison reads. The fold is 3 float16 ULPs off where the
/// body cancels; the constants behind the returned output move in perturbed references (those behind the compared
/// output stay), which spread as far: precision.
#[test]
fn ort_a_float16_fold_in_a_loop_beside_a_compared_output_is_precision() {
    let bug = reduce_kept("fp16-matmul-bn-in-loop-beside-compared-output", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("ill-conditioned"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 233, filed as a WeightBiasQuantization bug): a float Conv between quantized values.
/// The pass quantizes its float weights to int8 and its bias to int32 by design (4 steps off); onnx.reference with
/// the weights quantized as the pass does gives the optimized values: approximated, not a bug.
#[test]
fn ort_weights_quantized_by_design_are_approximated() {
    let bug = reduce_kept("conv-weights-quantized-by-design", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("weight_bias"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 239, left unattributed, a miss in review): a 35-node test whose layer normalization reads
/// a float16 scale through Casts; LayerNormFusionL1 builds a LayerNormalization of float32 input and float16 scale.
/// No culprit set explains the original (other fusions fail alike); its minimized model, triaged again, does.
#[test]
fn ort_a_finding_no_search_explains_is_triaged_again_as_its_minimized_model() {
    let bug = reduce_kept("layernorm-fp16-scale-beside-other-fusions", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["LayerNormFusionL1"]), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 251, filed as a Level1_RuleBasedTransformer bug): in a Scan body, MatMul, Reshape,
/// Transpose, BatchNormalization, the Transpose's output also returned. MatMul_BatchNormalization_Fusion leaves that
/// body output without a producer, so the Scan returns whatever its buffer held (zeros, NaN, at times the right
/// values): the rule search could not repeat it. The saved optimized graph shows it on every run.
#[test]
fn ort_a_body_output_the_optimized_graph_leaves_undefined_is_decided_on_the_graph() {
    let bug = reduce_kept("matmul-bn-scan-output-without-producer", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["MatMul_BatchNormalization_Fusion"]), "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("nothing defines"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 251, filed with MatMulAddFusion and GemmTransposeFusion both faulty): MatMulAddFusion
/// makes a Gemm whose C is another MatMul's output; GemmTransposeFusion folds the Gemm's Transpose and moves C
/// without its edge; EliminateIdentity then renames that output and the Gemm reads a value nothing defines. No
/// saved graph shows it (saving rebuilds the edges): the pass that leaves stale edges is the faulty one.
#[test]
fn ort_of_two_computing_culprits_the_one_leaving_a_stale_edge_is_faulty() {
    let bug = reduce_kept("gemm-transpose-stale-c-edge", "all").expect("a finding");
    let enablers = bug["triage"]["enablers"].as_array().unwrap();
    assert!(enablers.contains(&"MatMulAddFusion".into()), "{bug}");
    let culprits = bug["triage"]["culprits"].as_array().unwrap();
    assert!(culprits.contains(&"GemmTransposeFusion".into()) && !enablers.contains(&"GemmTransposeFusion".into()));
}

/// ONNX Runtime 1.32.0 (seed 251, filed as a LayerNormFusionL2 bug): a layer normalization of ten equal values, a
/// graph input expanded, quantized and dequantized by the com.microsoft ops. The exact result is the bias (0); the
/// fused kernel gives it, the unoptimized run and onnx.reference 1.5e-4 (a rounded mean). The float64 evaluation,
/// which failed on the contrib DequantizeLinear's float32 result, decides: precision.
#[test]
fn ort_an_exact_fused_result_where_the_unoptimized_one_rounds_is_precision() {
    let bug = reduce_kept("layernorm-of-equal-dequantized-values", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 251, filed as an AttentionFusion bug, "not a bug, borderline" in review): a BERT
/// attention whose mask input holds 2s and 3s. The fusion assumes a 0/1 mask (`1 - mask` becomes a mask index that
/// keeps what is non-zero); with 0/1 masks both runs agree exactly. Inputs outside the pass's domain: contract.
#[test]
fn ort_an_attention_mask_beyond_zero_and_one_breaks_the_fusions_contract() {
    let bug = reduce_kept("attention-mask-of-twos-and-threes", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "contract", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 257, filed as a SkipLayerNormFusion bug): a layer normalization of values near 170
/// that a QLinearConv computes from a graph input moved by DepthToSpace, Reshape and Pad. The fused kernel is 1.6
/// float32 ULPs of the input off, the unoptimized run 0.6: judged against the float64 evaluation (DepthToSpace only
/// moves given values, so the QLinearConv's levels are given): precision.
#[test]
fn ort_a_layer_normalization_of_levels_moved_by_depth_to_space_is_judged_in_float64() {
    let bug = reduce_kept("skiplayernorm-of-depth-to-space-levels", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 257, filed as a WeightBiasQuantization bug): DequantizeLinear, Reshape, Slice,
/// Unsqueeze, then a float Gemm and a QuantizeLinear. QDQPropagationTransformer moves the DequantizeLinear to the
/// Gemm, whose weights WeightBiasQuantization then quantizes by design: the mirror of that pass reaches the
/// DequantizeLinear through what propagation moves it past: approximated.
#[test]
fn ort_weights_quantized_after_a_propagated_dequantize_are_approximated() {
    let bug = reduce_kept("weight-bias-after-propagated-dequantize", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 257, filed as a GeluApproximation bug): an Erf-built Gelu divided by another chain's
/// 1 + erf(x / sqrt 2), which two nodes read. Under the opt-in approximation ORT approximates the fused Gelu only;
/// GeluFusion leaves the shared chain exact, and so must the approximated reference: approximated.
#[test]
fn ort_a_gelu_shaped_chain_read_twice_stays_exact_under_the_approximation() {
    let bug = reduce_kept("gelu-approximated-beside-a-shared-erf-chain", "all+gelu_approx").expect("a finding");
    assert_eq!(bug["triage"]["class"], "approximated", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 257, filed as an NchwcTransformer bug, "not a bug" in review): a MaxPool whose every
/// window lies in the padding (width 1, kernel 2, dilation 2, pads 1) gives the lowest float, which a FusedConv
/// sums to -inf unoptimized and inf - inf in NCHWc order. ONNX specifies no value there: contract.
#[test]
fn ort_a_pool_window_wholly_in_the_padding_breaks_the_tests_contract() {
    let bug = reduce_kept("fusedconv-of-a-maxpool-wholly-in-padding", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "contract", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 257, filed with GemmTransposeFusion and PreShapeNodeElimination both faulty): the rule
/// points a Shape at a Transpose's output without the edge, so GemmTransposeFusion, folding that Transpose into a
/// Gemm, deletes it as unread. The rewiring pass that leaves the stale edge is the faulty one.
#[test]
fn ort_a_rewiring_pass_leaving_a_stale_edge_is_faulty_and_its_victim_an_enabler() {
    let bug = reduce_kept("preshape-stale-edge-before-gemm-transpose", "all").expect("a finding");
    assert_eq!(bug["triage"]["enablers"], serde_json::json!(["GemmTransposeFusion"]), "{bug}");
    let culprits = bug["triage"]["culprits"].as_array().unwrap();
    assert!(culprits.contains(&"PreShapeNodeElimination".into()), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 257, filed as a QDQSelectorActionTransformer bug): DequantizeLinear, Softmax,
/// QuantizeLinear, the levels cast to float64 and read by a Gemm. The fused QLinearSoftmax's table gives 254 where
/// the exact level is 255 (1.0), and the Gemm amplifies that one level. A quantized kernel is exact to a level: the
/// perturbed references move each level by one, and so move the result as far: precision.
#[test]
fn ort_one_level_of_a_quantized_kernel_amplified_downstream_is_precision() {
    let bug = reduce_kept("qlinearsoftmax-one-level-through-a-gemm", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 277, filed as an NchwcTransformer bug): a MaxPool whose windows hold NaN (a Pow of
/// negative bases) gives NaN unoptimized, the window's largest number as NchwcMaxPool. ONNX does not say what a max
/// over NaN is: a review called it no bug. It stays nonfinite.
#[test]
fn ort_a_max_over_nan_is_left_open() {
    let bug = reduce_kept("maxpool-over-nan-after-nchwc", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "nonfinite", "{bug}");
    let note = bug["triage"]["class_note"].as_str().unwrap_or_default();
    assert!(note.contains("a max or min over values holding NaN"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seeds 269 and 277, filed as LayerNormFusionL1 bugs): a value divided by the mean of a layer
/// normalization's output (2·LN(x) + 1 - [0.99999994, 1]), or by the square root of a variance, that is 0 only
/// without rounding. onnx.reference and the unoptimized run give -1.4e7 or -3.8e6, the fused kernel inf or NaN;
/// perturbed references move the divisor across 0 or as near it: rounding at a pole, precision.
#[test]
fn ort_an_infinity_or_nan_at_a_pole_of_rounding_noise_is_precision() {
    for name in ["infinity-over-cancelled-layernorm-mean", "nan-over-cancelled-layernorm-variance"] {
        let bug = reduce_kept(name, "all").expect("a finding");
        assert_eq!(bug["triage"]["class"], "precision", "{name}: {bug}");
    }
}

/// ONNX Runtime 1.32.0 (seed 269, filed as a ConvMulFusion bug): a float16 Conv and Mul after a QuantizeLinear of a
/// computed value; the fold rounds the weights once more. A float64 evaluation moves the quantization's boundaries,
/// so the output was not compared with it; with the levels onnx.reference computes given, the optimized result is
/// 8.6e-3 off the float64 values, the unoptimized one 6.3e-3: precision.
#[test]
fn ort_a_float16_fold_after_a_computed_quantization_is_judged_with_its_levels_given() {
    let bug = reduce_kept("float16-conv-mul-after-computed-quantize", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 281, filed as a LayerNormFusionL1 bug): a layer normalization of [0.9999272, 1, 1]
/// (eps 1e-12). ONNX Runtime's LayerNormalization kernel, with no fusion at all, gives the same 1.2e-3 deviation: its
/// variance is 8e-4 off where the values agree to five digits. A kernel computing the variance in one pass rounds it
/// relative to the mean square: perturbed that way, onnx.reference moves as far. Precision.
#[test]
fn ort_a_layer_normalization_of_values_equal_to_five_digits_is_precision() {
    let bug = reduce_kept("layernorm-of-values-equal-to-five-digits", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 281, filed twice): EmbedLayerNormFusion removes the embedding sum's Add that a Loop body
/// also returns. The Loop fails as "All scan outputs MUST be tensors", naming no value, so the entry was not joined
/// to the one where a Reshape reads that Add ("Node input ... is not a graph input"). The saved optimized graph
/// names it: the note says which value nothing defines, and entries are joined by its producer.
#[test]
fn ort_a_loop_output_nothing_produces_is_named_as_the_lost_value() {
    let bug = reduce_kept("embedlayernorm-add-returned-from-a-loop-body", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    let note = bug["triage"]["class_note"].as_str().unwrap_or_default();
    assert!(note.contains("nothing defines ('p72744_add3_out' is returned)"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 281, the finding behind the last test's entry, triaged again): the same layer
/// normalization of a saturated Tanh, beside a DynamicQuantizeLinear and an int8 Cast that both runs round alike.
/// The perturbation could not type the model once levels moved (a DynamicQuantizeLinear is typed by declarations),
/// and the int8 output both runs share had to be explained too: precision once neither stands in the way.
#[test]
fn ort_a_layer_normalization_beside_quantized_outputs_both_runs_share_is_precision() {
    let bug = reduce_kept("layernorm-of-saturated-tanh-beside-dynamic-quantize", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "precision", "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 301, filed as a CastElimination bug, not a bug in review): onnx.reference lacks the
/// model's DynamicQuantizeMatMul, so the squared output the runs differ on is judged from the values of the outputs
/// they agree on, within tolerance only: a float16 product the unoptimized run leaves unrounded. From the optimized
/// run's value the unoptimized run is the wrong one: the two judgements disagree, so it is undecided, not filed.
#[test]
fn ort_outputs_the_runs_agree_on_only_within_tolerance_are_given_from_both_runs() {
    let bug = reduce_kept("cast-of-float16-matmul-squared-beside-dynamic-quantize", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "undecided", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("from the optimized run's values"), "{bug}");
}

/// ONNX Runtime 1.32.0 (seed 301, filed as a LayerNormFusionL1 bug, not a bug in review): the square root of a mean
/// over a layer normalization's output less its bias, a variance the model cancels to rounding noise. Exactly it is
/// about 1e6; the unoptimized run gives 3547 and NaN, the fused one NaN: float32 keeps no digit of it on either side,
/// so the NaN is rounding's, undecided.
#[test]
fn ort_a_nan_where_the_unoptimized_run_keeps_no_correct_digit_is_undecided() {
    let bug = reduce_kept("layernorm-of-a-cancelled-variance-to-nan", "all").expect("a finding");
    assert_eq!(bug["triage"]["class"], "undecided", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("keeps no correct digit"), "{bug}");
}
