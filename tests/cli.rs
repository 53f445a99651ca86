//! The binary's behaviour on bad input and its file-writing guarantees.

use oatest::graph::{onnx, Attr, DType, Graph, Model, Node, OpId, TensorType};
use std::path::Path;
use std::process::{Command, Output};

fn oatest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oatest")).args(args).output().expect("oatest runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn one_node_model(op: &str, attrs: &[(&str, Attr)]) -> Model {
    let mut g = Graph::new("g");
    let t = TensorType::new(DType::F32, &[2, 3]);
    g.add_input("x", t.clone());
    let mut n = Node::new("n0", OpId::onnx(op), vec!["x".into()], vec!["y".into()]);
    for (k, v) in attrs {
        n = n.with_attr(k, v.clone());
    }
    g.add_node(n).unwrap();
    g.add_output("y", t);
    Model::new(g)
}

fn assert_clean_error(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "exit code, stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks '{n}': {err}");
    }
}

#[test]
fn a_truncated_model_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = onnx::encode_model(&oatest::seedgen::generate(1, 0, &Default::default()));
    let path = dir.path().join("cut.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let o = oatest(&["check", path.to_str().unwrap()]);
    assert_clean_error(&o, &["cut.onnx", "truncated or corrupt"]);
}

#[test]
fn garbage_bytes_and_missing_files_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.onnx");
    std::fs::write(&path, b"\xff\xff\xff\xff not a protobuf").unwrap();
    assert_clean_error(&oatest(&["check", path.to_str().unwrap()]), &["junk.onnx"]);
    assert_clean_error(&oatest(&["check", "/nonexistent/m.onnx"]), &["/nonexistent/m.onnx", "cannot read"]);
}

#[test]
fn an_unknown_op_is_reported_with_path_node_and_op() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unknown.onnx");
    onnx::save(&one_node_model("FrobnicateV2", &[]), &path).unwrap();
    let o = oatest(&["check", path.to_str().unwrap()]);
    assert_clean_error(&o, &["unknown.onnx", "n0", "unknown op FrobnicateV2"]);
    let lenient = oatest(&["check", "--allow-unknown", path.to_str().unwrap()]);
    assert!(lenient.status.success(), "{}", stderr(&lenient));
}

#[test]
fn an_out_of_range_attribute_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("badattr.onnx");
    onnx::save(&one_node_model("Softmax", &[("axis", Attr::Int(5))]), &path).unwrap();
    let o = oatest(&["check", path.to_str().unwrap()]);
    assert_clean_error(&o, &["badattr.onnx", "n0", "Softmax", "axis"]);
    onnx::save(&one_node_model("Gelu", &[("approximate", Attr::str("fast"))]), &path).unwrap();
    assert_clean_error(&oatest(&["check", path.to_str().unwrap()]), &["badattr.onnx", "approximate"]);
}

#[test]
fn a_failed_conversion_leaves_no_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("cut.onnx");
    std::fs::write(&src, [0x0a, 0xff]).unwrap();
    let dst = dir.path().join("out.onnx");
    let o = oatest(&["convert", src.to_str().unwrap(), dst.to_str().unwrap()]);
    assert_clean_error(&o, &["cut.onnx"]);
    assert!(!dst.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "only the input remains: {leftovers:?}");
}

#[test]
fn seeds_gen_writes_count_files_and_rejects_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = oatest(&["seeds", "gen", "--count", "12", "--seed", "5", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let n = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(n, 12);
    for e in std::fs::read_dir(&out).unwrap() {
        onnx::load(&e.unwrap().path()).unwrap();
    }
    let bad = oatest(&["seeds", "gen", "--min-nodes", "9", "--max-nodes", "3", "--out", out.to_str().unwrap()]);
    assert_clean_error(&bad, &["--min-nodes 9 exceeds --max-nodes 3"]);
    assert!(!Path::new(&out.join("seed_00012.onnx")).exists());
}

/// An installed binary (copied out of the checkout) finds its pattern libraries through `$OATEST_HOME`, or without
/// it in the checkout it was built from; a home without them refuses an ORT campaign with the fix named, never
/// running it in random mode instead.
#[test]
fn an_installed_binary_takes_its_files_from_oatest_home_or_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin").join("oatest");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_oatest"), &bin).unwrap();
    let run = |home: Option<&str>, args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(args).current_dir(dir.path()).env_remove("OATEST_HOME");
        if let Some(h) = home {
            c.env("OATEST_HOME", h);
        }
        // a test thread that forks while the copy is still open for writing keeps it "busy" until its child execs
        // (ETXTBSY, seen once under load): wait that out
        for _ in 0..50 {
            match c.output() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(100))
                }
                o => return o.expect("oatest runs"),
            }
        }
        c.output().expect("oatest runs")
    };
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(Some(empty.to_str().unwrap()), &["fuzz", "--target", "ort", "--tests", "1", "--out", "r"]);
    assert_clean_error(&o, &["no pattern library for ort", "OATEST_HOME", "--patterns", "--mode random"]);
    assert!(!dir.path().join("r").exists(), "nothing ran");
    let doctor = run(Some(empty.to_str().unwrap()), &["doctor"]);
    assert!(String::from_utf8_lossy(&doctor.stdout).contains("home:  not found"), "{doctor:?}");
    let doctor = run(None, &["doctor"]);
    let out = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(out.contains("from the checkout this binary was built from"), "{out}");
    let home = env!("CARGO_MANIFEST_DIR");
    let doctor = run(Some(home), &["doctor"]);
    let out = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(out.contains("from $OATEST_HOME") && out.contains("pattern libraries: ort, tvm"), "{out}");
}
