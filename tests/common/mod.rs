//! Helpers shared by the integration tests.
#![allow(dead_code)]

use oatest::compiler::NamedTensor;
use oatest::graph::{onnx, DType, Graph, Model, Node, OpId, Tensor, TensorType};
use std::path::Path;
use std::process::{Command, Output};

/// A one-node Relu model; `fault` goes into the metadata the test-only fault target obeys.
pub fn fault_model(fault: Option<&str>) -> Vec<u8> {
    let mut g = Graph::new("g");
    let t = TensorType::new(DType::F32, &[2]);
    g.add_input("x", t.clone());
    g.add_node(Node::new("n", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()])).unwrap();
    g.add_output("y", t);
    let mut m = Model::new(g);
    if let Some(f) = fault {
        m.metadata.push(("oatest.fault".into(), f.into()));
    }
    onnx::encode_model(&m)
}

pub fn relu_inputs() -> Vec<NamedTensor> {
    vec![NamedTensor { name: "x".into(), tensor: Tensor::from_f32(&[2], &[1.0, -1.0]) }]
}

pub fn oatest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_oatest")).args(args).output().expect("oatest runs")
}

pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// x -> ops[0] -> ops[1] -> ... -> y (float32 of `dims`); `fault` = (`oatest.fault`, `oatest.fault.needs`)
/// metadata for the fault target and the tvm target's test faults. The fault target computes the chain's true
/// values (onnx.reference), so the semantic reference agrees with its unfaulted runs.
pub fn chain_model(ops: &[&str], dims: &[usize], fault: Option<(&str, &str)>) -> Vec<u8> {
    let ty = TensorType::new(DType::F32, dims);
    let mut g = Graph::new("chain");
    g.add_input("x", ty.clone());
    let mut prev = "x".to_string();
    for (i, op) in ops.iter().enumerate() {
        let out = format!("v{i}");
        g.add_node(Node::new(format!("n{i}"), OpId::onnx(op), vec![prev.clone()], vec![out.clone()])).unwrap();
        prev = out;
    }
    g.add_output(&prev, ty);
    let mut m = Model::new(g);
    if let Some((f, needs)) = fault {
        m.metadata.push(("oatest.fault".into(), f.into()));
        if !needs.is_empty() {
            m.metadata.push(("oatest.fault.needs".into(), needs.into()));
        }
        m.metadata.push(("oatest.fault.compute".into(), "onnx".into()));
    }
    onnx::encode_model(&m)
}

/// `oatest fuzz --target fault --mode random --tests N --jobs 1` over the models in `seeds`, into `out`; asserts
/// that it succeeds.
pub fn fuzz_fault_seeds(seeds: &Path, out: &Path, tests: usize) {
    let n = tests.to_string();
    let o = oatest(&[
        "fuzz",
        "--target",
        "fault",
        "--mode",
        "random",
        "--tests",
        &n,
        "--jobs",
        "1",
        "--seeds",
        seeds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `R.matmul(const, x)` twice with one constant LHS, as from_onnx makes of two MatMuls reading one initializer:
/// CombineParallelMatmul raises "Cannot treat type ir.GenericConst as type ir.Var" (TVM 0.27). `n`: the size.
pub fn constant_lhs_matmuls(n: usize, relu: bool) -> Vec<u8> {
    let ty = TensorType::new(DType::F32, &[n, n]);
    let mut g = Graph::new("cpm");
    let c: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
    g.add_initializer("c", Tensor::from_f32(&[n, n], &c));
    for (x, y) in [("x", "y1"), ("z", "y2")] {
        g.add_input(x, ty.clone());
        let read = if relu {
            let r = format!("{x}_relu");
            g.add_node(Node::new(format!("relu_{x}"), OpId::onnx("Relu"), vec![x.into()], vec![r.clone()])).unwrap();
            r
        } else {
            x.to_string()
        };
        g.add_node(Node::new(format!("mm_{y}"), OpId::onnx("MatMul"), vec!["c".into(), read], vec![y.into()])).unwrap();
        g.add_output(y, ty.clone());
    }
    onnx::encode_model(&Model::new(g))
}
