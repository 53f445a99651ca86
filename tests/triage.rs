//! Triage end to end on models whose bug is known: the fault target's `oatest.fault.needs` makes a bug that
//! appears only when named passes (one `Fuse<Op>` per op type in the graph) fire. Delta debugging must name
//! exactly those passes, reduction must keep them and drop everything else (interior nodes included), and
//! findings that differ only in their context must be one bug.

mod common;
use common::{chain_model, json, oatest};
use oatest::graph::onnx;
use std::collections::BTreeSet;
use std::path::Path;

/// A [4, 6] chain whose fault needs the named passes.
fn chain(ops: &[&str], fault: &str, needs: &str) -> Vec<u8> {
    chain_model(ops, &[4, 6], Some((fault, needs)))
}

fn ops_in(path: &Path) -> Vec<String> {
    let m = onnx::load(path).unwrap();
    m.graph.nodes_in_order().unwrap().iter().map(|n| n.op.name.clone()).collect()
}

fn set(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

#[test]
fn reduce_names_exactly_the_culprits_within_the_bound_and_removes_interior_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    let ops = ["Relu", "Sigmoid", "Neg", "Abs", "Exp", "Tanh"];
    std::fs::write(&model, chain(&ops, "wrong", "FuseSigmoid;FuseExp")).unwrap();
    let out = dir.path().join("bug");
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "fault", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert_eq!(bug["symptom"], "inconsistency");
    assert_eq!(set(&t["culprits"]), BTreeSet::from(["FuseExp".to_string(), "FuseSigmoid".to_string()]));
    // k = 2 culprits among n = 6 fired passes
    let bound = 2.0 * 2.0 * (6f64).log2() + 2.0;
    assert!(t["dd_runs"].as_f64().unwrap() <= bound, "{} runs > {bound}", t["dd_runs"]);
    assert_eq!(t["confirmed"], true);
    let kept: BTreeSet<String> = ops_in(&out.join("model.onnx")).into_iter().collect();
    assert_eq!(kept, BTreeSet::from(["Sigmoid".to_string(), "Exp".to_string()]), "Neg and Abs sat between them");
    assert_eq!(ops_in(&out.join("original.onnx")).len(), ops.len());
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    // the tracker's sections first (results per level measured when written), oatest's detail collapsed below
    let at = |h: &str| report.find(h).unwrap_or_else(|| panic!("no {h} in {report}"));
    assert!(at("### Expected behavior") < at("### Actual behavior") && at("### Actual behavior") < at("<details>"));
    assert!(report.contains("| `all` | ok | **"), "the optimized run differs beyond tolerance: {report}");
    let ablation = report.lines().find(|l| l.starts_with("| `all` with `")).expect("a row with the culprits off");
    assert!(ablation.contains("FuseExp") && ablation.contains("FuseSigmoid") && ablation.contains("within tolerance"));
    assert!(report[at("<details>")..].contains("**Culprit passes:** FuseExp + FuseSigmoid"), "{report}");
    assert!(out.join("input_0.pb").exists() && out.join("output_0.pb").exists());
}

#[test]
fn a_crash_keeps_its_culprit_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, chain(&["Relu", "Neg", "Abs", "Sigmoid"], "segfault", "FuseNeg")).unwrap();
    let out = dir.path().join("bug");
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "fault", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    assert_eq!(bug["symptom"], "crash");
    assert_eq!(set(&bug["triage"]["culprits"]), BTreeSet::from(["FuseNeg".to_string()]));
    assert_eq!(ops_in(&out.join("model.onnx")), ["Neg"]);
}

/// The filing gate, and two faulty passes: a crash that either of two passes causes alone (as two fusions each
/// faulty) is explained by one of them with the others off, but disabling that one in the finding's own
/// configuration, every other pass on, leaves the crash. It is not filed as that pass's bug alone (it was
/// `unattributed`, a real bug left outside bugs/): each pass gets an entry, in a configuration with the other
/// disabled, and names the other.
#[test]
fn two_passes_that_each_show_a_crash_on_their_own_give_an_entry_each() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    let mut m = onnx::decode_model(&chain(&["Relu", "Neg", "Abs", "Sigmoid"], "segfault", "FuseNeg|FuseAbs")).unwrap();
    // without its Neg or Abs node the graph fails another way, so reduction keeps the second trigger
    m.metadata.push(("oatest.fault.without".into(), "Neg=abort;Abs=abort".into()));
    std::fs::write(&model, onnx::encode_model(&m)).unwrap();
    let out = dir.path().join("bug");
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "fault", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut seen = BTreeSet::new();
    for d in [out.clone(), dir.path().join("bug-2")] {
        let bug = json(&d.join("bug.json"));
        let t = &bug["triage"];
        assert_eq!(t["class"], "optimizer", "{bug}");
        assert_eq!(t["culprits"].as_array().map(Vec::len), Some(1), "{bug}");
        let (culprit, other) = (t["culprits"][0].as_str().unwrap(), t["also_faulty"][0].as_str().unwrap());
        assert_ne!(culprit, other, "{bug}");
        assert!(t["config"].as_str().unwrap().contains(other), "the other pass is disabled: {bug}");
        seen.insert(culprit.to_string());
    }
    assert_eq!(seen, BTreeSet::from(["FuseAbs".to_string(), "FuseNeg".to_string()]));
}

/// A wrong result that needs what the process ran before (`stale`: every optimized run but a process's first is
/// wrong, like a value an earlier run left in memory) reproduces in the long-lived worker that found it, so
/// delta debugging and reduction go through; but its repro, one run in a fresh process, would not show it. It is
/// not filed as an optimizer bug (the review found such an entry, whose repro.py exits 0).
#[test]
fn a_symptom_that_a_fresh_process_does_not_show_is_not_filed() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, chain(&["Relu", "Neg", "Abs"], "stale", "FuseNeg")).unwrap();
    let out = dir.path().join("bug");
    // the process's first optimized run (basic) is right; the next (all) shows it
    let configs = ["--config", "disable", "--config", "basic", "--config", "all"];
    let args =
        [&["reduce", model.to_str().unwrap(), "--target", "fault", "--out", out.to_str().unwrap()][..], &configs];
    let o = oatest(&args.concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert_eq!(set(&t["culprits"]), BTreeSet::from(["FuseNeg".to_string()]), "{bug}");
    assert_eq!(t["class"], "undecided", "{bug}");
    assert!(t["class_note"].as_str().unwrap().contains("0 of 3 fresh processes"), "{bug}");
    // the same bug without the history: filed, its note saying so
    std::fs::write(&model, chain(&["Relu", "Neg", "Abs"], "wrong", "FuseNeg")).unwrap();
    let out = dir.path().join("bug-wrong");
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "fault", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
    assert!(bug["triage"]["class_note"].as_str().unwrap().contains("3 of 3 fresh processes"), "{bug}");
}

#[test]
fn a_model_without_a_finding_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, chain(&["Relu", "Neg"], "wrong", "FuseTanh")).unwrap();
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "fault"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no finding to reduce"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn findings_that_differ_only_in_context_are_one_bug_and_export_as_a_suite() {
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    std::fs::create_dir_all(&seeds).unwrap();
    // the same bug (Sigmoid and Exp both optimized) in three different contexts
    let contexts: [&[&str]; 3] =
        [&["Relu", "Sigmoid", "Neg", "Exp"], &["Abs", "Tanh", "Sigmoid", "Exp", "Neg", "Relu"], &["Exp", "Sigmoid"]];
    for (i, ops) in contexts.iter().enumerate() {
        std::fs::write(seeds.join(format!("ctx{i}.onnx")), chain(ops, "wrong", "FuseSigmoid;FuseExp")).unwrap();
    }
    common::fuzz_fault_seeds(&seeds, &out, 12);
    // what the campaign left untriaged, triage finishes
    let t = oatest(&["triage", out.to_str().unwrap()]);
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let bugs: Vec<_> = std::fs::read_dir(out.join("bugs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(bugs.iter().filter(|b| b.is_dir()).count(), 1, "one bug: {bugs:?}");
    let bug = json(&bugs.iter().find(|b| b.is_dir()).unwrap().join("bug.json"));
    let findings = std::fs::read_dir(out.join("findings")).unwrap().count();
    assert!(findings >= 3);
    assert_eq!(bug["findings"].as_array().unwrap().len(), findings, "every finding is counted under the bug");
    assert_eq!(bug["triage"]["nodes"], 2, "the representative is the smallest");
    let index = std::fs::read_to_string(out.join("bugs/README.md")).unwrap();
    let name = bugs.iter().find(|b| b.is_dir()).unwrap().file_name().unwrap().to_string_lossy().to_string();
    assert!(
        index.contains("## optimizer (1 entries)") && index.contains(&format!("[{name}]({name}/report.md)")),
        "{index}"
    );
    // every finding was triaged by the campaign itself; the later ones by a cheap check against the entry
    let s = json(&out.join("stats.json"));
    assert_eq!(s["findings_untriaged"], 0, "{s}");
    assert_eq!(s["findings_triaged"], s["findings_raw"], "{s}");
    let attached = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .filter(|e| json(&e.as_ref().unwrap().path().join("triage.json"))["triage"]["method"] == "attached")
        .count();
    assert!(attached >= 1 && attached < findings, "{attached} of {findings} attached");

    // export: the bug plus passing tests, in the backend-test layout
    let exp = dir.path().join("suite");
    let e = oatest(&["export", out.to_str().unwrap(), "--out", exp.to_str().unwrap()]);
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let cases = json(&exp.join("cases.json"));
    let cases = cases["cases"].as_object().unwrap();
    assert!(cases.values().any(|c| c["kind"] == "bug"));
    assert!(cases.values().any(|c| c["kind"] == "passing"), "generated seeds pass and fire FaultPass");
    for name in cases.keys() {
        for f in ["model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"] {
            assert!(exp.join(name).join(f).exists(), "{name} lacks {f}");
        }
    }
    assert!(exp.join("test_oatest_regression.py").exists());
}

/// Relu -> Clip on float64 fails at ORT session creation inside FuseReluClip, one of the ~20 rewrite rules of
/// `Level1_RuleBasedTransformer` (ORT 1.31): the culprit is the rule, not its container.
#[test]
fn a_rule_inside_a_rule_based_container_is_named_as_the_culprit() {
    use oatest::graph::{DType, Graph, Model, Node, OpId, Tensor, TensorType};
    let ty = TensorType::new(DType::F64, &[2, 3]);
    let mut g = Graph::new("relu_clip");
    g.add_input("x", ty.clone());
    g.add_initializer("lo", Tensor::from_f64s(DType::F64, &[], &[0.5]));
    g.add_initializer("hi", Tensor::from_f64s(DType::F64, &[], &[2.0]));
    g.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["x".into()], vec!["r".into()])).unwrap();
    g.add_node(Node::new("clip", OpId::onnx("Clip"), vec!["r".into(), "lo".into(), "hi".into()], vec!["y".into()]))
        .unwrap();
    g.add_output("y", ty);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("relu_clip.onnx");
    std::fs::write(&model, onnx::encode_model(&Model::new(g))).unwrap();
    let out = dir.path().join("bug");
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "ort", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    assert_eq!(bug["symptom"], "error", "{bug}");
    assert_eq!(set(&bug["triage"]["culprits"]), BTreeSet::from(["FuseReluClip".to_string()]), "{bug}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(!report.contains("**Culprit passes:** Level1_RuleBasedTransformer"), "{report}");
    // ONNX Runtime's bug template, in its order, with the level table and the ablation a user would type
    let headings = [
        "### Describe the issue",
        "### To reproduce",
        "### Urgency",
        "### Platform",
        "### OS Version",
        "### ONNX Runtime Installation",
        "### ONNX Runtime Version or Commit ID",
        "### ONNX Runtime API",
        "### Architecture",
        "### Execution Provider",
        "<details>",
    ];
    let at: Vec<usize> =
        headings.iter().map(|h| report.find(h).unwrap_or_else(|| panic!("no {h} in {report}"))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{report}");
    for row in ["| `disable` (ORT_DISABLE_ALL) | ok |", "| `basic` (ORT_ENABLE_BASIC) | error", "| onnx.reference"] {
        assert!(report.contains(row), "no row {row} in {report}");
    }
    assert!(report.contains(r#"add_session_config_entry("optimization.disable_specified_optimizers", "FuseReluClip")"#));
    assert!(report.contains(r#"disabled_optimizers=["FuseReluClip"]"#), "{report}");
    assert!(report.contains("matches the unoptimized result"), "{report}");
}

/// Reduction must not slide to another bug: this model segfaults when FuseNeg fires, but a graph without its
/// Abs node aborts instead. A candidate without Abs still crashes, by SIGABRT: it is refused, so Abs stays.
#[test]
fn a_crash_is_recognized_by_its_signal_so_reduction_cannot_slide_to_another() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    let mut m = onnx::decode_model(&chain(&["Relu", "Neg", "Sigmoid", "Abs"], "segfault", "FuseNeg")).unwrap();
    m.metadata.push(("oatest.fault.without".into(), "Abs=abort".into()));
    std::fs::write(&model, onnx::encode_model(&m)).unwrap();
    let out = dir.path().join("bug");
    let o = oatest(&["reduce", model.to_str().unwrap(), "--target", "fault", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    assert_eq!(bug["symptom"], "crash");
    assert_eq!(set(&bug["triage"]["culprits"]), BTreeSet::from(["FuseNeg".to_string()]));
    let kept: BTreeSet<String> = ops_in(&out.join("model.onnx")).into_iter().collect();
    assert!(kept.contains("Neg") && kept.contains("Abs"), "{kept:?}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("SIGSEGV") && !report.contains("SIGABRT"), "{report}");
}

/// One bug, two culprit sets: the same crash (SIGSEGV) needs FuseSigmoid with FuseExp in one test and with
/// FuseTanh in another; it is one entry that lists both sets. A crash of another kind (SIGABRT) sharing the
/// pass, and a wrong result sharing it, stay entries of their own.
#[test]
fn a_bug_seen_with_several_culprit_sets_is_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (seeds, out) = (dir.path().join("seeds"), dir.path().join("run"));
    std::fs::create_dir_all(&seeds).unwrap();
    let cases: [(&[&str], &str, &str); 4] = [
        (&["Relu", "Sigmoid", "Exp"], "segfault", "FuseSigmoid;FuseExp"),
        (&["Tanh", "Sigmoid", "Neg"], "segfault", "FuseSigmoid;FuseTanh"),
        (&["Sigmoid", "Abs", "Relu"], "abort", "FuseSigmoid;FuseAbs"),
        (&["Sigmoid", "Softsign"], "wrong", "FuseSigmoid;FuseSoftsign"),
    ];
    for (i, (ops, fault, needs)) in cases.iter().enumerate() {
        std::fs::write(seeds.join(format!("case{i}.onnx")), chain(ops, fault, needs)).unwrap();
    }
    common::fuzz_fault_seeds(&seeds, &out, 24);
    let entries: Vec<serde_json::Value> = std::fs::read_dir(out.join("bugs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| json(&p.join("bug.json")))
        .collect();
    let summary: Vec<String> =
        entries.iter().map(|b| format!("{} {} {}", b["symptom"], b["triage"]["culprits"], b["culprit_sets"])).collect();
    assert_eq!(entries.len(), 3, "{summary:#?}");
    let segv = entries.iter().find(|b| b["triage"]["detail"].as_str().unwrap().contains("SIGSEGV")).unwrap();
    let sets: BTreeSet<BTreeSet<String>> = segv["culprit_sets"].as_array().unwrap().iter().map(set).collect();
    let expected: BTreeSet<BTreeSet<String>> = [["FuseExp", "FuseSigmoid"], ["FuseSigmoid", "FuseTanh"]]
        .iter()
        .map(|s| s.iter().map(|p| p.to_string()).collect())
        .collect();
    assert_eq!(sets, expected, "{summary:#?}");
    let segv_findings = std::fs::read_dir(out.join("findings"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with("-crash"))
        .filter(|e| json(&e.as_ref().unwrap().path().join("outcome.json")).to_string().contains("SIGSEGV"))
        .count();
    assert_eq!(segv["findings"].as_array().unwrap().len(), segv_findings);
    let index = std::fs::read_to_string(out.join("bugs/README.md")).unwrap();
    assert!(index.contains("(and 1 other culprit set)"), "{index}");
}

/// ONNX Runtime 1.32.0 (seed 71, left `unattributed` in review): LayerNormFusionL1 fuses a layer normalization
/// whose scale broadcasts the input ([1,1,1] by [3]) and the kernel refuses it. Disabling it, SimplifiedLayer-
/// NormFusion (which never fired before) fuses the same nodes and fails on its own node: the configuration with
/// every fired pass off cannot run, so the search goes on among every pass that runs and names LayerNormFusionL1.
#[test]
fn a_culprit_whose_disabling_lets_a_shadowed_pass_fail_is_still_named() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/oatest-findings/layernorm-broadcast-scale");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bug");
    let model = data.join("model.onnx");
    // at `basic` the shadowed pass stays quiet; at `all` it takes over
    let args = ["reduce", model.to_str().unwrap(), "--target", "ort", "--inputs", data.to_str().unwrap()];
    let levels = ["--config", "disable", "--config", "all", "--out", out.to_str().unwrap()];
    let o = oatest(&[&args[..], &levels[..]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    let t = &bug["triage"];
    assert_eq!(bug["symptom"], "error", "{bug}");
    assert_eq!(t["class"], "optimizer", "{bug}");
    assert_eq!(set(&t["culprits"]), BTreeSet::from(["LayerNormFusionL1".to_string()]), "{bug}");
    // the entry's repro shows that disabling its culprit cures it: the shadowed pass, failing on its own once the
    // culprit is off (a review found the report's claim wrong), is disabled in its configuration and named
    assert_eq!(t["also_faulty"], serde_json::json!(["SimplifiedLayerNormFusion"]), "{bug}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("matches the unoptimized result"), "{report}");
}

/// ONNX Runtime 1.32.0 (seed 71, two entries in review): DivMulFusion rewrites the int64 `x * (1 / y)` as
/// `x / y`, which truncates differently (5 * (1 / 2) = 0, 5 / 2 = 2). Returned, that is a wrong result; used as
/// a Gather index, the kernel refuses it. One root cause, one entry: the error is keyed as the wrong value its
/// failing node reads.
#[test]
fn an_error_on_a_value_the_culprit_computes_wrong_is_that_wrong_results_entry() {
    use oatest::graph::{DType, Graph, Model, Node, OpId, Tensor, TensorType};
    let i64s = |d: &[usize]| TensorType::new(DType::I64, d);
    let node = |name: &str, op: &str, ins: &[&str], out: &str| {
        Node::new(name, OpId::onnx(op), ins.iter().map(|s| s.to_string()).collect(), vec![out.to_string()])
    };
    let model = |gather: bool| {
        let mut g = Graph::new("div_mul");
        g.add_input("x", i64s(&[1, 1]));
        g.add_input("y", i64s(&[1, 1]));
        g.add_initializer("one", Tensor::from_i64(&[1], &[1]));
        g.add_node(node("div", "Div", &["one", "y"], "q")).unwrap();
        g.add_node(node("mul", "Mul", &["x", "q"], "index")).unwrap();
        if gather {
            g.add_initializer("rows", Tensor::from_f32(&[2, 4], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]));
            g.add_node(node("gather", "Gather", &["rows", "index"], "row")).unwrap();
            g.add_output("row", TensorType::new(DType::F32, &[1, 1, 4]));
        } else {
            g.add_output("index", i64s(&[1, 1]));
        }
        onnx::encode_model(&Model::new(g))
    };
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::write(inputs.join("input_0.pb"), onnx::encode_tensor("x", &Tensor::from_i64(&[1, 1], &[5]))).unwrap();
    std::fs::write(inputs.join("input_1.pb"), onnx::encode_tensor("y", &Tensor::from_i64(&[1, 1], &[2]))).unwrap();
    let mut signatures = Vec::new();
    for (gather, symptom) in [(false, "inconsistency"), (true, "error")] {
        let path = dir.path().join(format!("m{gather}.onnx"));
        std::fs::write(&path, model(gather)).unwrap();
        let out = dir.path().join(format!("bug{gather}"));
        let args = ["reduce", path.to_str().unwrap(), "--target", "ort", "--inputs", inputs.to_str().unwrap()];
        let o = oatest(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let bug = json(&out.join("bug.json"));
        assert_eq!(bug["symptom"], symptom, "{bug}");
        assert_eq!(bug["triage"]["class"], "optimizer", "{bug}");
        assert_eq!(set(&bug["triage"]["culprits"]), BTreeSet::from(["DivMulFusion".to_string()]), "{bug}");
        signatures.push(bug["triage"]["signature"].as_str().unwrap().to_string());
    }
    assert_eq!(signatures[0], signatures[1], "one root cause, one entry");
}
