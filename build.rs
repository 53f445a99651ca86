//! Generates the ONNX protobuf message types from proto/onnx-ml.proto at build time (protox: no protoc needed).
fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let tract = lock
        .split("[[package]]")
        .find(|p| p.contains("name = \"tract-onnx\""))
        .and_then(|p| {
            p.lines().find_map(|l| l.strip_prefix("version = \"")).map(|v| v.trim_end_matches('"').to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=OATEST_TRACT_VERSION={tract}");
    println!("cargo:rerun-if-changed=proto/onnx-ml.proto");
    let fds = protox::compile(["onnx-ml.proto"], ["proto"]).expect("proto/onnx-ml.proto must compile");
    prost_build::Config::new().compile_fds(fds).expect("prost-build must generate the ONNX types");
}
