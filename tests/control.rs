//! Control flow (If, Loop, Scan) end to end: subgraphs survive ONNX import and export, type-check against the
//! catalog with outer-scope values, run under ONNX Runtime at every level, and ORT's transformers fire inside a
//! branch. Needs the onnxruntime wheel in .venv (scripts/setup.sh).

use oatest::compiler::worker::{Worker, WorkerSpec};
use oatest::compiler::{Config, Level, Status, TargetKind};
use oatest::graph::{onnx, Attr, DType, Graph, Model, Node, OpId, Tensor, TensorType};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn ort_worker() -> Worker {
    let mut s = WorkerSpec::new(TargetKind::Ort).unwrap();
    s.exe = PathBuf::from(env!("CARGO_BIN_EXE_oatest"));
    s.timeout = Duration::from_secs(20);
    Worker::start(s).unwrap()
}

const LEVELS: [Level; 5] = [Level::Disable, Level::Basic, Level::Extended, Level::Layout, Level::All];

/// Seeds with one control-flow node each (`oatest seeds gen --control-flow 1`): If (constant and input
/// conditions), Loop and Scan appear, every model type-checks strictly with its bodies reading the enclosing
/// graph, and ORT runs it at every level with the unoptimized run's results.
#[test]
fn control_flow_seeds_type_check_and_run_under_ort_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["seeds", "gen", "--count", "90", "--seed", "5", "--control-flow", "1", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut w = ort_worker();
    let configs: Vec<Config> = LEVELS.map(Config::level).to_vec();
    let oracle = oatest::oracle::Oracle { tolerance: oatest::oracle::Tolerance::default() };
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut outer = 0;
    for f in oatest::util::onnx_files(dir.path()).unwrap() {
        let bytes = std::fs::read(&f).unwrap();
        let m = onnx::decode_model(&bytes).unwrap();
        oatest::ops::check_graph(&m.graph, true).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let control: Vec<&Node> = m
            .graph
            .node_ids()
            .map(|id| m.graph.node(id))
            .filter(|n| matches!(n.op.name.as_str(), "If" | "Loop" | "Scan"))
            .collect();
        for n in &control {
            *kinds.entry(n.op.name.clone()).or_default() += 1;
            outer += usize::from(!n.implicit_inputs().is_empty());
        }
        // the subgraphs survive a round trip unchanged
        assert_eq!(onnx::encode_model(&onnx::decode_model(&onnx::encode_model(&m)).unwrap()), onnx::encode_model(&m));
        let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
        let runs = w.run_configs(&bytes, &feeds, &configs);
        for o in &runs {
            assert_eq!(o.status, Status::Ok, "{} under {}", f.display(), o.config);
        }
        let j = oracle.judge(&runs);
        assert!(j.valid, "{}: {:?}", f.display(), j.invalid_reason);
    }
    for k in ["If", "Loop", "Scan"] {
        assert!(kinds.get(k).copied().unwrap_or(0) >= 5, "{k} is rare: {kinds:?}");
    }
    assert!(outer >= 20, "only {outer} control-flow nodes read the enclosing graph");
}

/// `x -> If(cond) { then: Conv(x, W) -> Relu, else: z }`: nothing at the top level can be fused, but ORT's
/// ConvActivationFusion fires inside the then-branch (W and x come from the outer scope), and the optimized
/// model computes what the unoptimized one does on both branches.
#[test]
fn an_if_whose_then_branch_fires_a_transformer() {
    let x = TensorType::new(DType::F32, &[1, 2, 5, 5]);
    let y = TensorType::new(DType::F32, &[1, 3, 5, 5]);
    let mut then = Graph::new("then");
    let conv = Node::new("conv", OpId::onnx("Conv"), vec!["x".into(), "W".into()], vec!["c".into()])
        .with_attr("pads", Attr::Ints(vec![1, 1, 1, 1]));
    then.add_node(conv).unwrap();
    then.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["c".into()], vec!["r".into()])).unwrap();
    then.add_output("r", y.clone());
    let mut els = Graph::new("else");
    els.add_node(Node::new("id", OpId::onnx("Identity"), vec!["z".into()], vec!["e".into()])).unwrap();
    els.add_output("e", y.clone());
    let mut g = Graph::new("if_conv_relu");
    g.add_input("x", x);
    g.add_input("z", y.clone());
    g.add_input("cond", TensorType::new(DType::Bool, &[]));
    let weights: Vec<f32> = (0..3 * 2 * 3 * 3).map(|i| ((i % 5) as f32 - 2.0) / 4.0).collect();
    g.add_initializer("W", Tensor::from_f32(&[3, 2, 3, 3], &weights));
    let node = Node::new("if", OpId::onnx("If"), vec!["cond".into()], vec!["out".into()])
        .with_attr("then_branch", Attr::Graph(Box::new(then)))
        .with_attr("else_branch", Attr::Graph(Box::new(els)));
    assert_eq!(node.implicit_inputs().into_iter().collect::<Vec<_>>(), ["W", "x", "z"]);
    g.add_node(node).unwrap();
    g.add_output("out", y);
    let m = Model::new(g);
    oatest::ops::check_graph(&m.graph, true).unwrap();
    let bytes = onnx::encode_model(&m);
    assert_eq!(onnx::decode_model(&bytes).unwrap().graph, m.graph, "the If and its branches round-trip");
    let mut w = ort_worker();
    for branch in [true, false] {
        let mut feeds = oatest::compiler::inputs::generate(&m.graph, 1).unwrap();
        let c = feeds.iter_mut().find(|t| t.name == "cond").unwrap();
        c.tensor = Tensor::from_f64s(DType::Bool, &[], &[f64::from(u8::from(branch))]);
        let runs = w.run_configs(&bytes, &feeds, &[Config::level(Level::Disable), Config::level(Level::All)]);
        assert!(runs.iter().all(|o| o.status == Status::Ok), "{runs:?}");
        let oracle = oatest::oracle::Oracle { tolerance: oatest::oracle::Tolerance::default() };
        let j = oracle.judge(&runs);
        assert!(j.valid && j.verdicts.is_empty(), "cond = {branch}: {:?}", j.verdicts);
        assert!(
            runs[1].passes_fired.iter().any(|p| p == "ConvActivationFusion"),
            "ConvActivationFusion did not fire in the branch: {:?}",
            runs[1].passes_fired
        );
    }
}

/// Patterns spliced into a body (`synth::branch`): the pattern's nodes sit inside an If branch or a Loop/Scan
/// body, reading the body's values and the enclosing graph's, the test type-checks and runs at the reference,
/// and the pattern's own pass (ConvActivationFusion, which no base graph fires alone) fires inside the body.
#[test]
fn patterns_spliced_into_bodies_run_and_fire_their_pass_there() {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("patterns/ort/ConvActivationFusion");
    let patterns: Vec<oatest::pattern::Pattern> = oatest::util::onnx_files(&lib)
        .unwrap()
        .iter()
        .map(|f| oatest::pattern::Pattern::load(f).unwrap())
        .filter(|p| (18..=20).contains(&p.model.opset()))
        .collect();
    assert!(!patterns.is_empty());
    let cfg = oatest::seedgen::SeedConfig { control_flow: 1.0, ..Default::default() };
    let mut w = ort_worker();
    let configs = [Config::level(Level::Disable), Config::level(Level::All)];
    let fires = |runs: &[oatest::compiler::Outcome]| runs[1].passes_fired.iter().any(|p| p == "ConvActivationFusion");
    let (mut spliced, mut fired) = (0, 0);
    for i in 0..60u64 {
        let base = oatest::seedgen::generate(9, i, &cfg);
        let p = &patterns[i as usize % patterns.len()];
        let mut rng = oatest::seedgen::rng_for(4, i);
        let Ok((m, _)) = oatest::synth::branch::splice_into_body(&base, p, &mut rng, 1000 + i, &[]) else { continue };
        spliced += 1;
        oatest::ops::check_graph(&m.graph, true).unwrap_or_else(|e| panic!("test {i}: {e}"));
        let pat = format!("p{}_", 1000 + i);
        let ours =
            |g: &oatest::graph::Graph| g.node_ids().any(|id| g.node(id).outputs.iter().any(|o| o.starts_with(&pat)));
        assert!(!ours(&m.graph), "test {i}: the pattern is at the top level");
        let bodies: Vec<Graph> = m
            .graph
            .node_ids()
            .flat_map(|id| m.graph.node(id).subgraphs().map(|(_, g)| g.clone()).collect::<Vec<_>>())
            .collect();
        assert!(bodies.iter().any(ours), "test {i}: the pattern is in no body");
        let bytes = onnx::encode_model(&m);
        let feeds = oatest::compiler::inputs::generate(&m.graph, i).unwrap();
        let runs = w.run_configs(&bytes, &feeds, &configs);
        assert_eq!(runs[0].status, Status::Ok, "test {i}: the reference fails: {:?}", runs[0].status);
        let plain = w.run_configs(
            &onnx::encode_model(&base),
            &oatest::compiler::inputs::generate(&base.graph, i).unwrap(),
            &configs,
        );
        if fires(&runs) && !fires(&plain) {
            fired += 1;
        }
    }
    eprintln!("spliced {spliced}, fired {fired}");
    assert!(spliced >= 30, "only {spliced} of 60 splices into a body succeeded");
    assert!(fired >= 5, "ConvActivationFusion fired inside a body in only {fired} of {spliced} tests");
}
