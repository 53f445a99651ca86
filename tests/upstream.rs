//! What upstream knows about a bug, end to end with real ONNX Runtime and TVM builds: a known upstream issue
//! labels the entry (`known`), and a bug reduced against an old ORT build is re-run with the current one
//! (`--also-ort-lib`) and marked fixed upstream. The old build is the onnxruntime 1.19.2 wheel pinned in
//! python/requirements-old-ort.txt, installed into `.venv-ort-1.19.2` by scripts/setup.sh (or here, the same way).
//! A TVM bug is re-run with apache-tvm 0.26.0 (`--also-tvm`, python/requirements-old-tvm.txt, `.venv-tvm-0.26.0`).

mod common;
use common::{json, oatest};
use oatest::graph::{onnx, DType, Graph, Model, Node, OpId, Tensor, TensorType};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The library of the onnxruntime wheel installed into `dir` (`onnxruntime/capi/libonnxruntime.so.*`).
fn wheel_library(dir: &Path) -> Option<PathBuf> {
    let capi = dir.join("onnxruntime/capi");
    let mut libs: Vec<PathBuf> = std::fs::read_dir(capi)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libonnxruntime.so.")))
        .collect();
    libs.sort();
    libs.pop()
}

/// Installs the project's `requirements` file into `dir` as scripts/setup.sh does (`pip install --no-deps --target`).
fn pip_target(dir: &Path, requirements: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new(root.join(".venv/bin/python"))
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", "--target"])
        .arg(dir)
        .arg("-r")
        .arg(root.join(requirements))
        .status()
        .expect("the project's .venv python runs (bash scripts/setup.sh)");
    assert!(status.success(), "pip could not install {requirements} into {}", dir.display());
}

/// ORT 1.19.2's library: `.venv-ort-1.19.2` as scripts/setup.sh installs it (installed here when missing).
fn ort_1_19_2() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join(".venv-ort-1.19.2");
    if wheel_library(&dir).is_none() {
        pip_target(&dir, "python/requirements-old-ort.txt");
    }
    wheel_library(&dir).expect("the onnxruntime 1.19.2 wheel holds its library")
}

/// The apache-tvm 0.26.0 directory as scripts/setup.sh installs it (installed here when missing).
fn tvm_0_26() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join(".venv-tvm-0.26.0");
    if !dir.join("tvm/__init__.py").is_file() {
        pip_target(&dir, "python/requirements-old-tvm.txt");
    }
    dir
}

/// ORT 1.32.0's library: the onnxruntime wheel of the project's .venv.
fn ort_current() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_dir(root.join(".venv/lib"))
        .unwrap()
        .flatten()
        .find_map(|py| wheel_library(&py.path().join("site-packages")))
        .expect("the onnxruntime wheel in .venv (bash scripts/setup.sh)");
    assert!(lib.to_string_lossy().ends_with("1.32.0"), "python/requirements.txt pins onnxruntime 1.32.0: {lib:?}");
    lib
}

/// x: int8[1, 2] -> DequantizeLinear (per-axis: axis 1 by default, a scale per channel) -> Transpose (no perm):
/// ORT 1.19.2 to 1.26.0 abort in TransposeOptimizer; 1.32.0 runs it.
fn dq_transpose() -> Vec<u8> {
    let mut g = Graph::new("g");
    g.add_input("x", TensorType::new(DType::I8, &[1, 2]));
    g.add_initializer("s", Tensor::from_f32(&[2], &[0.5, 1.5]));
    g.add_node(Node::new("dq", OpId::onnx("DequantizeLinear"), vec!["x".into(), "s".into()], vec!["d".into()]))
        .unwrap();
    g.add_node(Node::new("t", OpId::onnx("Transpose"), vec!["d".into()], vec!["y".into()])).unwrap();
    g.add_output("y", TensorType::new(DType::F32, &[2, 1]));
    onnx::encode_model(&Model::new(g))
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_bug_of_an_old_build_that_the_newest_does_not_show_is_fixed_upstream() {
    let (old, new) = (ort_1_19_2(), ort_current());
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, dq_transpose()).unwrap();
    let out = dir.path().join("bug");
    let o = oatest(&[
        "reduce",
        path(&model),
        "--target",
        "ort",
        "--config",
        "disable",
        "--config",
        "all",
        "--ort-lib",
        path(&old),
        "--also-ort-lib",
        path(&new),
        "--out",
        path(&out),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    assert_eq!((bug["target_version"].as_str(), bug["symptom"].as_str()), (Some("1.19.2"), Some("crash")), "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["TransposeOptimizer"]), "{bug}");
    assert_eq!(bug["versions"], serde_json::json!({"1.19.2": "reproduces", "1.32.0": "no"}), "{bug}");
    assert_eq!(bug["fixed_upstream"], "1.32.0");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("- **Affected versions:** 1.19.2 reproduces, 1.32.0 no (fixed upstream in 1.32.0)"),
        "{report}"
    );
    assert!(stdout.contains("fixed upstream in 1.32.0"), "{stdout}");
}

#[test]
fn a_campaign_against_the_old_build_files_the_bug_as_fixed_upstream() {
    let (old, new) = (ort_1_19_2(), ort_current());
    let dir = tempfile::tempdir().unwrap();
    let seeds = dir.path().join("seeds");
    std::fs::create_dir_all(&seeds).unwrap();
    std::fs::write(seeds.join("dq_transpose.onnx"), dq_transpose()).unwrap();
    let run = dir.path().join("run");
    // test 1 is the model from --seeds (test ids alternate between generated seeds and the directory)
    let o = oatest(&[
        "fuzz",
        "--target",
        "ort",
        "--mode",
        "random",
        "--tests",
        "2",
        "--jobs",
        "1",
        "--seed",
        "3",
        "--seeds",
        path(&seeds),
        "--ort-lib",
        path(&old),
        "--also-ort-lib",
        path(&new),
        "--out",
        path(&run),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index = std::fs::read_to_string(run.join("bugs/README.md")).unwrap();
    let row = index.lines().find(|l| l.starts_with("| TransposeOptimizer |")).unwrap_or_else(|| panic!("{index}"));
    assert!(row.contains("| crash |") && row.contains("| new | fixed upstream in 1.32.0 |"), "{row}");
    let entry = row.rsplit("](").next().unwrap().trim_end_matches(" |").trim_end_matches(')').replace("/report.md", "");
    let bug = json(&run.join("bugs").join(entry).join("bug.json"));
    assert_eq!(bug["versions"], serde_json::json!({"1.19.2": "reproduces", "1.32.0": "no"}), "{bug}");
    // the flags are the campaign's: `oatest triage` takes them from its checkpoint (entries filed afresh)
    std::fs::remove_dir_all(run.join("bugs")).unwrap();
    let o = oatest(&["triage", path(&run), "--again"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index = std::fs::read_to_string(run.join("bugs/README.md")).unwrap();
    assert!(index.contains("| new | fixed upstream in 1.32.0 |"), "{index}");
    // a library that is not there is refused by name
    let o = oatest(&["fuzz", "--target", "ort", "--tests", "1", "--also-ort-lib", "/nonexistent/libonnxruntime.so"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--also-ort-lib /nonexistent/libonnxruntime.so does not exist"),
        "{err}"
    );
}

#[test]
fn a_known_upstream_bug_is_labeled_with_its_link() {
    // Relu -> Clip on float64: FuseReluClip fails, reported upstream (data/known-bugs.toml)
    let mut g = Graph::new("g");
    let t = TensorType::new(DType::F64, &[3]);
    g.add_input("x", t.clone());
    g.add_initializer("lo", Tensor::from_f64s(DType::F64, &[], &[-1.0]));
    g.add_initializer("hi", Tensor::from_f64s(DType::F64, &[], &[2.0]));
    g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["x".into()], vec!["a".into()])).unwrap();
    g.add_node(Node::new("c", OpId::onnx("Clip"), vec!["a".into(), "lo".into(), "hi".into()], vec!["y".into()]))
        .unwrap();
    g.add_output("y", t);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, onnx::encode_model(&Model::new(g))).unwrap();
    let reduce = |out: &Path, extra: &[&str]| {
        let mut args = vec!["reduce", path(&model), "--target", "ort", "--config", "disable", "--config", "all"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--out", path(out)]);
        let o = oatest(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        json(&out.join("bug.json"))
    };
    let bug = reduce(&dir.path().join("a"), &[]);
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["FuseReluClip"]), "{bug}");
    assert_eq!(bug["known"]["link"], "https://github.com/microsoft/onnxruntime/issues/23116", "{bug}");
    assert_eq!(bug["known"]["status"], "open");
    let report = std::fs::read_to_string(dir.path().join("a/report.md")).unwrap();
    assert!(report.contains("- **Known:** https://github.com/microsoft/onnxruntime/issues/23116 (open)"), "{report}");
    // --known: another file, whose entry does not match this bug (another message): new
    let other = dir.path().join("known.toml");
    std::fs::write(
        &other,
        "[[bug]]\ntarget = \"ort\"\nculprits = [\"FuseReluClip\"]\nmessage = \"input of 10\"\nlink = \"L\"\nstatus = \"open\"\n",
    )
    .unwrap();
    let bug = reduce(&dir.path().join("b"), &["--known", path(&other)]);
    assert!(bug["known"].is_null(), "{bug}");
    // a broken file is refused, named
    std::fs::write(&other, "[[bug]]\ntarget = \"ort\"\n").unwrap();
    let o = oatest(&[
        "reduce",
        path(&model),
        "--target",
        "ort",
        "--known",
        path(&other),
        "--out",
        path(&dir.path().join("c")),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("known.toml: not a valid known-bugs file"), "{err}");
}

/// `c @ (a @ b)` with 1-D `a` and `c` (a: float32[1], b: [1, 7], c: [7]): AdjustMatmulOrder reorders it into
/// `(c @ a) @ b`, which has no matching reduction length (apache-tvm 0.26.0 and 0.27.0.post1).
fn vector_matmuls() -> Vec<u8> {
    let mut g = Graph::new("g");
    for (name, dims) in [("a", &[1][..]), ("b", &[1, 7][..]), ("c", &[7][..])] {
        g.add_input(name, TensorType::new(DType::F32, dims));
    }
    g.add_node(Node::new("ab", OpId::onnx("MatMul"), vec!["a".into(), "b".into()], vec!["ab".into()])).unwrap();
    g.add_node(Node::new("cab", OpId::onnx("MatMul"), vec!["c".into(), "ab".into()], vec!["y".into()])).unwrap();
    g.add_output("y", TensorType::new(DType::F32, &[]));
    onnx::encode_model(&Model::new(g))
}

#[test]
fn a_tvm_bug_is_re_run_with_another_apache_tvm_and_marked_per_version() {
    let old = tvm_0_26();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, vector_matmuls()).unwrap();
    let out = dir.path().join("bug");
    let (tvm, config) = ("tvm", "disable");
    let o = oatest(&[
        "reduce",
        path(&model),
        "--target",
        tvm,
        "--config",
        config,
        "--config",
        "all",
        "--also-tvm",
        path(&old),
        "--out",
        path(&out),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    let bug = json(&out.join("bug.json"));
    assert_eq!(bug["target_version"].as_str(), Some("0.27.0.post1"), "{bug}");
    assert_eq!(bug["triage"]["culprits"], serde_json::json!(["AdjustMatmulOrder"]), "{bug}");
    assert_eq!(bug["versions"], serde_json::json!({"0.26.0": "reproduces", "0.27.0.post1": "reproduces"}), "{bug}");
    assert!(bug["fixed_upstream"].is_null(), "{bug}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("0.26.0 reproduces, 0.27.0.post1 reproduces"), "{report}");
    // a directory without apache-tvm is refused by name
    let o = oatest(&["reduce", path(&model), "--target", tvm, "--also-tvm", "/nonexistent", "--out", path(&out)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--also-tvm /nonexistent: no apache-tvm there"), "{err}");
}
