//! Targets in workers: crashes, aborts, hangs and memory blow-ups are detected, recorded and survived; ORT's
//! pass-call instrumentation and pass disabling work on ORT's own optimizer test models.
//!
//! The ORT tests need the onnxruntime wheel in .venv (scripts/setup.sh installs it); ORT's optimizer test
//! models are vendored in tests/data/ort-transform-testdata (MIT, see its NOTICE).

use oatest::compiler::worker::{Worker, WorkerSpec};
use oatest::compiler::{Config, Level, Status, TargetKind};
use oatest::graph::{onnx, Tensor};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn spec(kind: TargetKind) -> WorkerSpec {
    let mut s = WorkerSpec::new(kind).unwrap();
    s.exe = PathBuf::from(env!("CARGO_BIN_EXE_oatest"));
    s.timeout = Duration::from_millis(3000);
    s.mem_limit_mb = Some(1024);
    s
}

mod common;
use common::{fault_model as model, relu_inputs as inputs};

#[test]
fn every_kind_of_worker_death_is_an_outcome_and_the_next_test_runs() {
    let mut w = Worker::start(spec(TargetKind::Fault)).unwrap();
    let opt = Config::level(Level::All);
    let cases: [(&str, fn(&Status) -> bool); 5] = [
        ("segfault", |s| matches!(s, Status::Crash { signal: Some(11), .. })),
        ("abort", |s| matches!(s, Status::Crash { signal: Some(6), .. })),
        ("hang", |s| matches!(s, Status::Timeout { limit_ms: 3000 })),
        ("oom", |s| matches!(s, Status::Oom { .. })),
        ("exit", |s| matches!(s, Status::Crash { signal: None, .. })),
    ];
    for (i, (fault, expect)) in cases.iter().enumerate() {
        let o = w.run(&model(Some(fault)), &inputs(), &opt);
        assert!(expect(&o.status), "{fault}: got {:?}", o.status);
        // the unoptimized configuration of the same model, on the restarted worker, is fine
        let ok = w.run(&model(Some(fault)), &inputs(), &Config::level(Level::Disable));
        assert_eq!(ok.status, Status::Ok, "after {fault}");
        assert_eq!(ok.outputs, inputs());
        assert_eq!(w.starts, i as u64 + 2, "one restart per death");
    }
}

#[test]
fn a_run_whose_outputs_exceed_four_mib_is_an_error_under_every_configuration() {
    // the fault target returns its inputs as outputs: 5 MiB of float32 in, 5 MiB out
    let mut w = Worker::start(spec(TargetKind::Fault)).unwrap();
    let name = inputs()[0].name.clone();
    let big = vec![oatest::compiler::NamedTensor { name, tensor: Tensor::from_f32(&[5 << 18], &vec![1.0; 5 << 18]) }];
    for level in [Level::Disable, Level::All] {
        let o = w.run(&model(None), &big, &Config::level(level));
        match &o.status {
            Status::Error { message } => assert!(message.contains("exceed oatest's limit"), "{message}"),
            other => panic!("{level:?}: expected an error, got {other:?}"),
        }
        assert!(o.outputs.is_empty());
    }
    // a run of ordinary size still returns its outputs
    let o = w.run(&model(None), &inputs(), &Config::level(Level::Disable));
    assert_eq!((o.status, o.outputs), (Status::Ok, inputs()));
}

#[test]
fn a_worker_that_dies_while_idle_is_restarted_and_not_blamed_on_the_next_test() {
    let mut w = Worker::start(spec(TargetKind::Fault)).unwrap();
    let first = w.run(&model(Some("exit_later")), &inputs(), &Config::level(Level::Disable));
    assert_eq!(first.status, Status::Ok, "it answers before it dies");
    std::thread::sleep(Duration::from_millis(400));
    let next = w.run(&model(None), &inputs(), &Config::level(Level::Disable));
    assert_eq!(next.status, Status::Ok, "the next test's reference is not a crash");
    assert_eq!((w.idle_deaths, w.starts), (1, 2));
}

#[test]
fn oatest_run_reports_a_crash_as_an_outcome_and_exits_normally() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.onnx");
    std::fs::write(&path, model(Some("segfault"))).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["run", path.to_str().unwrap(), "--target", "fault", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["config"], "disable");
    assert_eq!(rows[0]["status"], "ok");
    assert_eq!(rows[1]["status"], "crash");
    assert!(rows[1]["message"].as_str().unwrap().contains("SIGSEGV"));
    for key in ["config", "status", "message", "passes_fired", "time_ms"] {
        assert!(rows[1].get(key).is_some(), "missing {key}");
    }
}

#[test]
fn tract_runs_decluttered_and_optimized() {
    let mut w = Worker::start(spec(TargetKind::Tract)).unwrap();
    for level in [Level::Disable, Level::All] {
        let o = w.run(&model(None), &inputs(), &Config::level(level));
        assert_eq!(o.status, Status::Ok);
        assert_eq!(o.outputs[0].tensor, Tensor::from_f32(&[2], &[1.0, 0.0]));
    }
    let o = w.run(&model(None), &inputs(), &Config::level(Level::Basic));
    assert!(matches!(o.status, Status::Error { .. }), "tract has no basic level");
}

fn corpus() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ort-transform-testdata");
    assert!(p.is_dir(), "{} is missing", p.display());
    p
}

fn ort_fired(w: &mut Worker, file: &str, config: &Config) -> Vec<String> {
    let path = corpus().join(file);
    let bytes = std::fs::read(&path).unwrap();
    let m = onnx::decode_model(&bytes).unwrap();
    let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
    let o = w.run(&bytes, &feeds, config);
    assert_eq!(o.status, Status::Ok, "{file} under {config}");
    o.passes_fired
}

fn ort_worker() -> Worker {
    Worker::start(spec(TargetKind::Ort)).expect("ORT worker (run scripts/setup.sh to install onnxruntime into .venv)")
}

#[test]
fn disabling_a_level1_rule_by_name_stops_it_firing() {
    let mut w = ort_worker();
    assert!(w.info.version.starts_with("1."), "{}", w.info.version);
    let mut c = Config::level(Level::Basic);
    c.attribute_rules = true;
    let fired = ort_fired(&mut w, "abs-id.onnx", &c);
    assert!(fired.contains(&"EliminateIdentity".to_string()), "{fired:?}");
    assert!(fired.contains(&"Level1_RuleBasedTransformer".to_string()), "{fired:?}");
    c.disabled = vec!["EliminateIdentity".into()];
    let fired = ort_fired(&mut w, "abs-id.onnx", &c);
    assert!(!fired.iter().any(|p| p == "EliminateIdentity" || p == "Level1_RuleBasedTransformer"), "{fired:?}");
}

/// A test's configurations share their rule-attribution sessions (a level-1 rule is attributed at level 1 for
/// basic, extended and all): each still reports the rule, and a configuration that disables it does not.
#[test]
fn rule_attribution_shared_by_configurations_answers_each() {
    let mut w = ort_worker();
    for level in [Level::Basic, Level::Extended, Level::All, Level::Basic] {
        let mut c = Config::level(level);
        (c.attribute_rules, c.rules_of_interest) = (true, vec!["EliminateIdentity".into()]);
        let fired = ort_fired(&mut w, "abs-id.onnx", &c);
        assert!(fired.contains(&"EliminateIdentity".to_string()), "{level:?}: {fired:?}");
        c.disabled = vec!["EliminateIdentity".into()];
        let fired = ort_fired(&mut w, "abs-id.onnx", &c);
        assert!(!fired.contains(&"EliminateIdentity".to_string()), "{level:?} without it: {fired:?}");
    }
    let mut c = Config::level(Level::All);
    c.attribute_rules = true;
    let fired = ort_fired(&mut w, "fusion/conv_relu.onnx", &c);
    assert!(!fired.contains(&"EliminateIdentity".to_string()), "another model: {fired:?}");
}

#[test]
fn disabling_a_level2_transformer_by_name_stops_it_firing() {
    let mut w = ort_worker();
    let mut c = Config::level(Level::Extended);
    let fired = ort_fired(&mut w, "fusion/conv_relu.onnx", &c);
    assert!(fired.contains(&"ConvActivationFusion".to_string()), "{fired:?}");
    // a comma list is silently ignored by ORT; oatest always joins with ';'
    c.disabled = vec!["ConvActivationFusion".into(), "NchwcTransformer".into()];
    let fired = ort_fired(&mut w, "fusion/conv_relu.onnx", &c);
    assert!(!fired.contains(&"ConvActivationFusion".to_string()), "{fired:?}");
}

#[test]
fn across_ort_optimizer_tests_at_level_all_at_least_30_transformers_fire() {
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["run", corpus().to_str().unwrap(), "--target", "ort", "--config", "all", "--json", "--jobs", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut fired = std::collections::BTreeSet::new();
    let mut rows = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        rows += 1;
        for p in v["passes_fired"].as_array().unwrap() {
            fired.insert(p.as_str().unwrap().to_string());
        }
    }
    assert!(rows >= 440, "only {rows} models ran");
    assert!(fired.len() >= 30, "only {} transformers fired: {fired:?}", fired.len());
}

/// An opt-in configuration (`all+gelu_approx`, a named configuration of data/ort-configs.toml) fires
/// GeluApproximation on ORT's own approximation test model, which `all` alone does not; the oracle allows the
/// approximation's error under it (and only under it).
#[test]
fn an_opt_in_configuration_fires_gelu_approximation() {
    let mut w = ort_worker();
    let all = Config::parse("all").unwrap();
    let approx = Config::parse("all+gelu_approx").unwrap();
    assert_eq!(approx.to_string(), "all+gelu_approx");
    assert!(!ort_fired(&mut w, "approximation/gelu.onnx", &all).iter().any(|p| p == "GeluApproximation"));
    assert!(ort_fired(&mut w, "approximation/gelu.onnx", &approx).iter().any(|p| p == "GeluApproximation"));
    let bytes = std::fs::read(corpus().join("approximation/gelu.onnx")).unwrap();
    let m = onnx::decode_model(&bytes).unwrap();
    let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
    let runs = w.run_configs(&bytes, &feeds, &[Config::level(Level::Disable), approx]);
    let oracle = oatest::oracle::Oracle { tolerance: oatest::oracle::Tolerance::default() };
    assert!(oracle.judge(&runs).verdicts.is_empty(), "{:?}", oracle.judge(&runs).verdicts);
    // the same outputs judged as a plain `all` run: the approximation is beyond float32's default tolerance
    let mut plain = runs[1].clone();
    plain.config = all;
    assert!(oracle.inconsistency(&runs[0], &plain).is_some(), "FastGelu should differ from Gelu beyond 1e-5");
}

/// The free-dimension configuration (`all+free_dims`: overrides, not session entries) fires
/// FreeDimensionOverrideTransformer only on a model whose input dims were freed to the overrides' names; inputs
/// generated for the freed model take the overrides' sizes (the session refuses others), and the results match
/// the unoptimized run's.
#[test]
fn free_dimension_overrides_fire_on_freed_input_dims() {
    use oatest::graph::{DType, Dim, Graph, Model, Node, OpId, TensorType};
    let mut g = Graph::new("free");
    g.add_input("x", TensorType::new(DType::F32, &[1, 3, 4]));
    g.add_input("y", TensorType::new(DType::F32, &[4, 7]));
    g.add_node(Node::new("mm", OpId::onnx("MatMul"), vec!["x".into(), "y".into()], vec!["z".into()])).unwrap();
    g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["z".into()], vec!["out".into()])).unwrap();
    g.add_output("out", TensorType::new(DType::F32, &[1, 3, 7]));
    let mut m = Model::new(g);
    let free = Config::parse("all+free_dims").unwrap();
    let mut w = ort_worker();
    let fired = |w: &mut Worker, m: &Model, c: &Config| {
        let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
        let o = w.run(&onnx::encode_model(m), &feeds, c);
        assert_eq!(o.status, Status::Ok, "{c}: {}", o.status.message());
        (o.passes_fired, o.outputs)
    };
    assert!(!fired(&mut w, &m, &free).0.iter().any(|p| p == "FreeDimensionOverrideTransformer"));
    // 1, 3 and 4 are sizes the overrides name (n1, n3, n4); 7 is not
    assert_eq!(m.graph.free_input_dims(&free.dim_overrides()), 4);
    let x = m.graph.tensor_type("x").unwrap().shape.unwrap();
    assert_eq!(x, [Dim::Sym("n1".into()), Dim::Sym("n3".into()), Dim::Sym("n4".into())]);
    assert!(m.graph.has_symbolic_inputs());
    let (passes, optimized) = fired(&mut w, &m, &free);
    assert!(passes.iter().any(|p| p == "FreeDimensionOverrideTransformer"), "{passes:?}");
    let (passes, reference) = fired(&mut w, &m, &Config::level(Level::Disable));
    assert!(passes.is_empty(), "{passes:?}");
    assert_eq!(optimized, reference);
    let (passes, _) = fired(&mut w, &m, &Config::parse("all").unwrap());
    assert!(!passes.iter().any(|p| p == "FreeDimensionOverrideTransformer"), "{passes:?}");
}

/// Seeds with ONNX Runtime's contrib ops (`oatest seeds gen --contrib`) declare the com.microsoft opset and run
/// cleanly under ORT at every level, with the same results as the unoptimized run; the quantized ones hand
/// NhwcTransformer its QLinearConv and pools, as the QDQ transformers would.
#[test]
fn contrib_op_seeds_run_under_ort_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_oatest"))
        .args(["seeds", "gen", "--count", "150", "--seed", "3", "--contrib", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut w = ort_worker();
    let configs: Vec<Config> =
        [Level::Disable, Level::Basic, Level::Extended, Level::Layout, Level::All].map(Config::level).to_vec();
    let oracle = oatest::oracle::Oracle { tolerance: oatest::oracle::Tolerance::default() };
    let (mut ops, mut fired) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for f in oatest::util::onnx_files(dir.path()).unwrap() {
        let bytes = std::fs::read(&f).unwrap();
        let m = onnx::decode_model(&bytes).unwrap();
        let contrib: Vec<String> = m
            .graph
            .node_ids()
            .map(|id| m.graph.node(id).op.clone())
            .filter(|op| oatest::ops::lookup(&op.domain, &op.name).is_some_and(|s| s.contrib()))
            .map(|op| op.name)
            .collect();
        if contrib.is_empty() {
            continue;
        }
        let ms = m.graph.node_ids().any(|id| m.graph.node(id).op.domain == "com.microsoft");
        assert!(!ms || m.opsets.get("com.microsoft") == Some(&1), "{}: no com.microsoft import", f.display());
        let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
        let runs = w.run_configs(&bytes, &feeds, &configs);
        for o in &runs {
            assert_eq!(o.status, Status::Ok, "{} ({contrib:?}) under {}", f.display(), o.config);
        }
        let j = oracle.judge(&runs);
        assert!(j.valid, "{}: {:?}", f.display(), j.invalid_reason);
        fired.extend(runs.iter().flat_map(|o| o.passes_fired.clone()));
        ops.extend(contrib);
    }
    assert!(ops.len() >= 16, "only {ops:?} appeared in 150 seeds");
    assert!(fired.contains("NhwcTransformer"), "{fired:?}");
}

/// Optimized-graph feedback: ORT saves the graph it optimized (`save_optimized`), and oatest imports it as a
/// seed (`optimized_seed`): here ORT's ConvAddActivationFusion result, a FusedConv with its sum input Z, which
/// type-checks against the catalog's contrib ops, runs again, and takes a spliced pattern.
#[test]
fn an_optimized_graph_with_fused_conv_and_z_feeds_back_as_a_seed() {
    let mut w = ort_worker();
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("optimized.onnx");
    // Conv -> Add(Z) -> Relu at opset 20, as a campaign's tests are (ORT saves the model at its own opset)
    use oatest::graph::{Attr, DType, Graph, Model, Node, OpId, TensorType};
    let mut g = Graph::new("conv_add_relu");
    g.add_input("x", TensorType::new(DType::F32, &[1, 3, 8, 8]));
    g.add_input("z", TensorType::new(DType::F32, &[1, 4, 8, 8]));
    let weights: Vec<f32> = (0..4 * 3 * 3 * 3).map(|i| ((i % 7) as f32 - 3.0) / 10.0).collect();
    g.add_initializer("W", Tensor::from_f32(&[4, 3, 3, 3], &weights));
    g.add_initializer("B", Tensor::from_f32(&[4], &[0.1, -0.2, 0.3, 0.0]));
    let conv = Node::new("conv", OpId::onnx("Conv"), vec!["x".into(), "W".into(), "B".into()], vec!["c".into()])
        .with_attr("pads", Attr::Ints(vec![1, 1, 1, 1]));
    g.add_node(conv).unwrap();
    g.add_node(Node::new("add", OpId::onnx("Add"), vec!["c".into(), "z".into()], vec!["a".into()])).unwrap();
    g.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["a".into()], vec!["y".into()])).unwrap();
    g.add_output("y", TensorType::new(DType::F32, &[1, 4, 8, 8]));
    let m = Model::new(g);
    let bytes = onnx::encode_model(&m);
    let feeds = oatest::compiler::inputs::generate(&m.graph, 0).unwrap();
    // without NCHWc layouts (ops the catalog does not model), as a machine without them would save it
    let mut c = Config::parse("all:-NchwcTransformer").unwrap();
    c.save_optimized = Some(saved.clone());
    assert_eq!(w.run(&bytes, &feeds, &c).status, Status::Ok);
    let seed = oatest::synth::source::optimized_seed(&std::fs::read(&saved).unwrap()).expect("imported");
    let seed = onnx::decode_model(&seed).unwrap();
    let fused: Vec<_> =
        seed.graph.node_ids().map(|id| seed.graph.node(id)).filter(|n| n.op.name == "FusedConv").collect();
    assert_eq!(
        fused.len(),
        1,
        "{:?}",
        seed.graph.node_ids().map(|id| seed.graph.node(id).op.clone()).collect::<Vec<_>>()
    );
    assert_eq!(fused[0].op.domain, "com.microsoft");
    assert_eq!(fused[0].inputs.len(), 4, "FusedConv without Z: {:?}", fused[0].inputs);
    assert_eq!(seed.opsets.get("com.microsoft"), Some(&1));
    let again = w.run(&onnx::encode_model(&seed), &feeds, &Config::level(Level::Disable));
    assert_eq!(again.status, Status::Ok, "{:?}", again.status);
    // a pattern spliced into it: the second-order test runs
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("patterns/ort/FuseReluClip");
    let p = oatest::pattern::Pattern::load(&oatest::util::onnx_files(&lib).unwrap()[0]).unwrap();
    let mut rng = oatest::seedgen::rng_for(1, 0);
    let (spliced, _) = (0..20u64)
        .find_map(|t| oatest::synth::splice(&seed, &p, &mut rng, t, None).ok())
        .expect("a pattern splices into the optimized graph");
    let inputs = oatest::compiler::inputs::generate(&spliced.graph, 0).unwrap();
    let runs = w.run_configs(
        &onnx::encode_model(&spliced),
        &inputs,
        &[Config::level(Level::Disable), Config::level(Level::All)],
    );
    assert!(runs.iter().all(|o| o.status == Status::Ok), "{:?}", runs.iter().map(|o| &o.status).collect::<Vec<_>>());
}

/// How many of the library's patterns of `pass` spliced into 32 generated seeds each, and in how many of those
/// tests the pass fired (under `all`; a rewrite rule attributed by its own session). Seeds with odd indices hold
/// an If, Loop or Scan, and the pattern goes into one of its bodies (whose other branch then yields a constant
/// of the pattern's output type, strings too).
fn splice_and_fire(pass: &str) -> (usize, usize) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("patterns/ort").join(pass);
    let mut w = ort_worker();
    let mut c = Config::level(Level::All);
    (c.attribute_rules, c.rules_of_interest) = (true, vec![pass.to_string()]);
    let (mut spliced, mut fired) = (0, 0);
    for f in oatest::util::onnx_files(&dir).unwrap() {
        let p = oatest::pattern::Pattern::load(&f).unwrap();
        for i in 0..32u64 {
            let cfg = oatest::seedgen::SeedConfig { control_flow: (i % 2) as f64, ..Default::default() };
            let seed = oatest::seedgen::generate(7, i, &cfg);
            let mut rng = oatest::seedgen::rng_for(7, i);
            let spliced_model = match oatest::synth::branch::has_body(&seed) {
                true => oatest::synth::branch::splice_into_body(&seed, &p, &mut rng, i, &[]),
                false => oatest::synth::splice(&seed, &p, &mut rng, i, None),
            };
            let Ok((m, _)) = spliced_model else { continue };
            spliced += 1;
            let feeds = oatest::compiler::inputs::generate(&m.graph, i).unwrap();
            let o = w.run(&onnx::encode_model(&m), &feeds, &c);
            assert_eq!(o.status, Status::Ok, "{}: {}", f.display(), o.status.message());
            fired += o.passes_fired.iter().any(|p| p == pass) as usize;
        }
    }
    (spliced, fired)
}

/// For each pass: (tests whose pattern got variation `kind`, those in which the pass still fired, the element
/// types of the pattern inputs in the tests where it fired and its own patterns never had) over its library's
/// patterns spliced into generated seeds with `--vary KIND` (a share of the tags varies).
fn variant_fires(pass: &str, kind: oatest::synth::vary::Variation) -> (usize, usize, BTreeSet<String>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("patterns/ort").join(pass);
    let mut w = ort_worker();
    let mut c = Config::level(Level::All);
    (c.attribute_rules, c.rules_of_interest) = (true, vec![pass.to_string()]);
    let (mut varied, mut fired, mut new_types) = (0, 0, BTreeSet::new());
    let patterns: Vec<_> = oatest::util::onnx_files(&dir)
        .unwrap()
        .iter()
        .take(8)
        .map(|f| oatest::pattern::Pattern::load(f).unwrap())
        .collect();
    let own: BTreeSet<String> = patterns.iter().flat_map(|p| p.meta.inputs.iter().map(|i| i.ty.dtype.name())).collect();
    for p in &patterns {
        for i in 0..32u64 {
            let seed = oatest::seedgen::generate(7, i, &Default::default());
            let mut rng = oatest::seedgen::rng_for(7, i);
            let spliced = oatest::synth::splice_varied(&seed, p, &mut rng, i, None, &[kind]);
            let Ok((m, info)) = spliced else {
                continue;
            };
            if info.variations.is_empty() {
                continue;
            }
            varied += 1;
            let feeds = oatest::compiler::inputs::generate(&m.graph, i).unwrap();
            let o = w.run(&onnx::encode_model(&m), &feeds, &c);
            if o.passes_fired.iter().any(|f| f == pass) {
                fired += 1;
                let types = oatest::ops::check_graph(&m.graph, false).unwrap();
                // the pattern's nodes are the spliced ones named after the tag (`p{tag}_...`)
                let prefix = format!("p{i}_");
                let g = &m.graph;
                for n in g.node_ids().map(|id| g.node(id)).filter(|n| n.name.starts_with(&prefix)) {
                    for t in n.inputs.iter().filter_map(|v| types.get(v)) {
                        if !own.contains(&t.dtype.name()) {
                            new_types.insert(t.dtype.name());
                        }
                    }
                }
            }
        }
    }
    (varied, fired, new_types)
}

/// A value inside a pattern read again as a graph output is what no pattern's own test wrote: a pass that still
/// fires there must keep the value (the review's "still read" family: FastGelu, BiasSkipLayerNorm, EmbedLayerNorm
/// and Attention fusions deleted such a node). The passes below fire on such variants (measured with ORT 1.32.0:
/// EliminateIdentity 18 of 18, MatMulAddFusion 12 of 12, ReshapeFusion 13 of 13; ConvBNFusion 0 of 16 refuses).
#[test]
fn passes_fire_on_extra_reader_variants_their_patterns_never_wrote() {
    use oatest::synth::vary::Variation;
    for pass in ["EliminateIdentity", "MatMulAddFusion", "ReshapeFusion"] {
        let (varied, fired, _) = variant_fires(pass, Variation::ExtraReader);
        eprintln!("{pass}: fired in {fired} of {varied} varied tests");
        assert!(varied >= 8, "{pass}: only {varied} varied splices");
        assert!(fired >= 1, "{pass}: fired in none of {varied} tests with an extra reader");
    }
}

/// A pattern in an element type its own tests never used: passes fire on it with pattern nodes reading that
/// type (FuseReluClip's and DivMulFusion's tests are float only; their bugs were found on int32 and int64).
/// Measured with ORT 1.32.0: EliminateIdentity 48 of 48 (float16, float64, int32, uint8), DivMulFusion 21 of 24
/// (float64, int32, int8, uint8), FuseReluClip 2 of 8 (float16).
#[test]
fn passes_fire_on_dtype_variants_in_types_their_patterns_never_had() {
    use oatest::synth::vary::Variation;
    for pass in ["EliminateIdentity", "DivMulFusion", "FuseReluClip"] {
        let (varied, fired, new_types) = variant_fires(pass, Variation::Dtype);
        eprintln!("{pass}: fired in {fired} of {varied} varied tests, on new types {new_types:?}");
        assert!(varied >= 8, "{pass}: only {varied} varied splices");
        assert!(!new_types.is_empty(), "{pass}: fired in {fired} of {varied} tests, never on a new type");
    }
}

/// A pattern node with another attribute value than its own test wrote (a flag, an axis, pads, strides, a perm, an
/// epsilon): passes still fire on such variants, so their code paths for those values run. Measured with ORT
/// 1.32.0: ConvBNFusion 24 of 24, GemmTransposeFusion 48 of 48, TransposeOptimizer 19 of 24, ConvAddFusion 32 of
/// 32 (Pad_Fusion 2 of 16: most of its variants pad differently than the Conv it folds into).
#[test]
fn passes_fire_on_attr_variants_their_patterns_never_wrote() {
    use oatest::synth::vary::Variation;
    for pass in ["ConvBNFusion", "GemmTransposeFusion", "TransposeOptimizer", "ConvAddFusion"] {
        let (varied, fired, _) = variant_fires(pass, Variation::Attr);
        eprintln!("{pass}: fired in {fired} of {varied} varied tests");
        assert!(varied >= 8, "{pass}: only {varied} varied splices");
        assert!(fired >= 1, "{pass}: fired in none of {varied} tests with another attribute value");
    }
}

/// LabelEncoderFusion's patterns (two ai.onnx.ml LabelEncoders on strings) splice into generated seeds, whose
/// values are never strings, through a Cast to string placed after the shape bridges (ORT's shape ops take no
/// strings), and the rule fires in the spliced tests.
#[test]
fn label_encoder_patterns_splice_through_a_cast_to_string_and_fire() {
    let (spliced, fired) = splice_and_fire("LabelEncoderFusion");
    assert!(spliced >= 48, "only {spliced} of 64 splices succeeded");
    assert!(fired * 2 >= spliced, "LabelEncoderFusion fired in {fired} of {spliced} spliced tests");
}

/// WhereDummyDq's patterns, extracted from the transcription of ORT's WhereDummyDqTest graph
/// (tests/data/ort-test-graphs), splice into generated seeds and fire there.
#[test]
fn where_dummy_dq_patterns_from_ort_s_test_graph_splice_and_fire() {
    let (spliced, fired) = splice_and_fire("WhereDummyDq");
    assert!(spliced >= 48, "only {spliced} of 64 splices succeeded");
    assert!(fired * 2 >= spliced, "WhereDummyDq fired in {fired} of {spliced} spliced tests");
}

/// GatherToSliceFusion's subgraph patterns (the graph of ORT's GatherToSliceFusion test, whose constant Range
/// operands ConstantFolding folds in any session: extraction's `unfold` repair computes them as `Clip(p, c, c)`)
/// splice into generated seeds and fire there, also on the constant variant that writes the Range's indices
/// negative, a range the test never wrote (ONNX Runtime 1.32.0 turns `Range(-8, 0, 1)` into an empty Slice).
#[test]
fn gather_to_slice_fusion_fires_on_spliced_patterns_and_on_negative_ranges() {
    use oatest::synth::vary::Variation;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("patterns/ort/GatherToSliceFusion");
    let mut w = ort_worker();
    let mut c = Config::level(Level::All);
    c.attribute_rules = true;
    // (tests, fired) with the Range's start as its test wrote it and written negative
    let (mut plain, mut negative) = ((0, 0), (0, 0));
    let subgraphs: Vec<PathBuf> = oatest::util::onnx_files(&dir)
        .unwrap()
        .into_iter()
        .filter(|f| f.file_name().unwrap().to_string_lossy().starts_with("subgraph-"))
        .collect();
    assert_eq!(subgraphs.len(), 2, "{subgraphs:?}");
    for f in subgraphs {
        let p = oatest::pattern::Pattern::load(&f).unwrap();
        for i in 0..64u64 {
            let seed = oatest::seedgen::generate(7, i, &Default::default());
            let mut rng = oatest::seedgen::rng_for(7, i);
            let spliced = oatest::synth::splice_varied(&seed, &p, &mut rng, i, None, &[Variation::Constant]);
            let Ok((m, _)) = spliced else { continue };
            let g = &m.graph;
            let start = g.initializers.iter().find(|(n, _)| n.starts_with(&format!("p{i}_range_input_1")));
            let count = match start.map(|(_, t)| t.to_i64s().unwrap()[0]) {
                Some(0) => &mut plain,
                Some(s) if s < 0 => &mut negative,
                other => panic!("{}: tag {i}: Range start {other:?}", f.display()),
            };
            let feeds = oatest::compiler::inputs::generate(g, i).unwrap();
            let o = w.run(&onnx::encode_model(&m), &feeds, &c);
            assert_eq!(o.status, Status::Ok, "{}: {}", f.display(), o.status.message());
            count.0 += 1;
            count.1 += o.passes_fired.iter().any(|f| f == "GatherToSliceFusion") as usize;
        }
    }
    eprintln!("fired in {plain:?} (tests, fired) as written, {negative:?} with a negative range");
    assert!(plain.0 >= 64 && plain.1 * 2 >= plain.0, "as written: fired in {} of {} tests", plain.1, plain.0);
    assert!(negative.0 >= 4 && negative.1 * 2 >= negative.0, "negative: fired in {} of {}", negative.1, negative.0);
}

/// A per-tensor quantization scale made per-axis (each channel another scale) on one axis of the values it
/// quantizes: the QDQ passes' tests write per-tensor parameters almost everywhere, and these passes still fire on
/// per-axis variants, so their per-axis code paths run (measured counts in docs/BENCHMARKS.md).
#[test]
fn qdq_passes_fire_on_per_axis_variants_of_per_tensor_patterns() {
    use oatest::synth::vary::Variation;
    for pass in ["QDQPropagationTransformer", "QDQSelectorActionTransformer", "DoubleQDQPairsRemover"] {
        let (varied, fired, _) = variant_fires(pass, Variation::PerAxis);
        eprintln!("{pass}: fired in {fired} of {varied} per-axis tests");
        assert!(varied >= 8, "{pass}: only {varied} varied splices");
        assert!(fired >= 1, "{pass}: fired in none of {varied} tests with a per-axis scale");
    }
}

/// (tests whose pattern had one float constant made an open input the splice feeds, those in which `pass` still
/// fired) over its library's first patterns spliced into generated seeds with `--vary constant`.
fn fires_on_fed_constants(pass: &str) -> (usize, usize) {
    use oatest::synth::vary::Variation;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("patterns/ort").join(pass);
    let mut w = ort_worker();
    let mut c = Config::level(Level::All);
    (c.attribute_rules, c.rules_of_interest) = (true, vec![pass.to_string()]);
    let (mut varied, mut fired) = (0, 0);
    for f in oatest::util::onnx_files(&dir).unwrap().iter().take(8) {
        let p = oatest::pattern::Pattern::load(f).unwrap();
        for i in 0..48u64 {
            let seed = oatest::seedgen::generate(7, i, &Default::default());
            let mut rng = oatest::seedgen::rng_for(7, i);
            let Ok((m, info)) = oatest::synth::splice_varied(&seed, &p, &mut rng, i, None, &[Variation::Constant])
            else {
                continue;
            };
            let g = &m.graph;
            let as_node =
                g.node_ids().any(|id| g.node(id).op.name == "Constant" && g.node(id).name.ends_with("_constant"));
            if info.variations.is_empty() || as_node {
                continue;
            }
            varied += 1;
            let feeds = oatest::compiler::inputs::generate(g, i).unwrap();
            let o = w.run(&onnx::encode_model(&m), &feeds, &c);
            fired += o.passes_fired.iter().any(|f| f == pass) as usize;
        }
    }
    (varied, fired)
}

/// A pattern constant that its own test wrote as an initializer, fed instead from the seed's values: passes that do
/// not need a constant there still fire on such variants, so their code paths for computed operands run (one that
/// needs a constant must leave the pattern alone). Measured with ORT 1.32.0: MatMulAddFusion 49 of 49, BiasGeluFusion
/// 39 of 88, LayerNormFusionL1 17 of 44, SkipLayerNormFusion 31 of 108.
#[test]
fn passes_fire_on_constant_variants_whose_constant_is_a_fed_value() {
    for pass in ["MatMulAddFusion", "BiasGeluFusion", "LayerNormFusionL1", "SkipLayerNormFusion"] {
        let (varied, fired) = fires_on_fed_constants(pass);
        eprintln!("{pass}: fired in {fired} of {varied} tests with a fed constant");
        assert!(varied >= 8, "{pass}: only {varied} varied splices");
        assert!(fired >= 1, "{pass}: fired in none of {varied} tests with a fed constant");
    }
}

/// A pattern constant in another shape that broadcasts to the same values (a bias [C] as [1, C] or expanded, a
/// scalar as [1, 1], equal values as a scalar): passes still fire on such variants, so their shape checks and the
/// code after them run for shapes their own tests never wrote (GeluFusion's lost [1] output was found so).
/// Measured with ORT 1.32.0: MatMulAddFusion 15 of 21, ConvAddFusion 17 of 24, DivMulFusion 18 of 18,
/// LayerNormFusionL1 13 of 18 (GeluFusionL1 3 of 18, BiasGeluFusion 6 of 36).
#[test]
fn passes_fire_on_broadcast_variants_of_their_constants() {
    use oatest::synth::vary::Variation;
    for pass in ["MatMulAddFusion", "ConvAddFusion", "DivMulFusion", "LayerNormFusionL1"] {
        let (varied, fired, _) = variant_fires(pass, Variation::Broadcast);
        eprintln!("{pass}: fired in {fired} of {varied} broadcast tests");
        assert!(varied >= 8, "{pass}: only {varied} varied splices");
        assert!(fired >= 1, "{pass}: fired in none of {varied} tests with a constant in another shape");
    }
}
