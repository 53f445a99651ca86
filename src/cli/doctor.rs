//! `oatest doctor`: which compilers this oatest can reach, where they were found, and their versions.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// The ONNX Runtime library to check instead of the default search.
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
}

pub fn run(a: DoctorArgs) -> anyhow::Result<()> {
    println!("oatest {}", env!("CARGO_PKG_VERSION"));
    #[cfg(feature = "ort")]
    match crate::compiler::ort::find_library(a.ort_lib.as_deref()) {
        Ok(c) => match crate::compiler::ort::library_version(&c.path) {
            Ok(v) => println!("ort:   ONNX Runtime {v} at {} (from {})", c.path.display(), c.source),
            Err(e) => println!("ort:   {} (from {}) cannot be used: {e:#}", c.path.display(), c.source),
        },
        Err(e) => println!("ort:   not available: {e:#}"),
    }
    #[cfg(not(feature = "ort"))]
    {
        let _ = a;
        println!("ort:   not built (cargo feature `ort`)");
    }
    #[cfg(feature = "tract")]
    println!("tract: tract-onnx {} (built in)", env!("OATEST_TRACT_VERSION"));
    #[cfg(not(feature = "tract"))]
    println!("tract: not built (cargo feature `tract`)");
    // TVM is imported in a worker process (an import failure or crash there must not take doctor down)
    #[cfg(feature = "tvm")]
    match crate::compiler::worker::WorkerSpec::new(crate::compiler::TargetKind::Tvm)
        .and_then(crate::compiler::worker::Worker::start)
    {
        Ok(w) => println!("tvm:   apache-tvm {} (embedded Python)", w.info.version),
        Err(e) => println!("tvm:   not available: {e:#}"),
    }
    #[cfg(not(feature = "tvm"))]
    println!("tvm:   not built (cargo feature `tvm`)");
    // the Python transformer optimizer, likewise imported in a worker process
    #[cfg(feature = "python")]
    match crate::compiler::worker::WorkerSpec::new(crate::compiler::TargetKind::OrtTransformers)
        .and_then(crate::compiler::worker::Worker::start)
    {
        Ok(w) => println!(
            "ort-transformers: onnxruntime.transformers {} (embedded Python; {} passes)",
            w.info.version,
            w.info.optional_passes.len()
        ),
        Err(e) => println!("ort-transformers: not available: {e:#}"),
    }
    #[cfg(not(feature = "python"))]
    println!("ort-transformers: not built (cargo feature `python`)");
    Ok(())
}
