//! Generates the ONNX protobuf message types from proto/onnx-ml.proto at build time (protox: no protoc needed).
fn main() {
    println!("cargo:rerun-if-changed=proto/onnx-ml.proto");
    let fds = protox::compile(["onnx-ml.proto"], ["proto"]).expect("proto/onnx-ml.proto must compile");
    prost_build::Config::new().compile_fds(fds).expect("prost-build must generate the ONNX types");
}
