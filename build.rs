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
    python_rpath();
    println!("cargo:rerun-if-changed=proto/onnx-ml.proto");
    let fds = protox::compile(["onnx-ml.proto"], ["proto"]).expect("proto/onnx-ml.proto must compile");
    prost_build::Config::new().compile_fds(fds).expect("prost-build must generate the ONNX types");
}

/// With the `python` feature (TVM, the semantic reference) the binary embeds libpython (pyo3). pyenv-style installs keep libpython in their own
/// `LIBDIR`, which is not on the loader path: record it as an rpath so the interpreter pyo3 was built for
/// (the one that made .venv) is the one loaded, not another Python of the same minor version. Its standard
/// library's home (`sys.base_prefix`) is recorded too (`OATEST_PYTHON_HOME`): an embedded interpreter otherwise
/// takes its home from the first `python3` on PATH, which may be another installation.
fn python_rpath() {
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
    if std::env::var_os("CARGO_FEATURE_PYTHON").is_none() {
        println!("cargo:rustc-env=OATEST_PYTHON_HOME=");
        return;
    }
    let python = std::env::var("PYO3_PYTHON").unwrap_or_else(|_| "python3".into());
    let home = std::process::Command::new(&python).args(["-c", "import sys; print(sys.base_prefix)"]).output();
    let home = home.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    println!("cargo:rustc-env=OATEST_PYTHON_HOME={home}");
    let out = std::process::Command::new(&python)
        .args(["-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR') or '')"])
        .output();
    if let Ok(o) = out {
        let dir = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if !dir.is_empty() && std::path::Path::new(&dir).is_dir() {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
