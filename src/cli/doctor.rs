//! `oatest doctor`: which compilers this oatest can reach, where they were found, and their versions.

use clap::Args;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub ort: super::OrtLib,
}

pub fn run(a: DoctorArgs) -> anyhow::Result<()> {
    println!("oatest {}", env!("CARGO_PKG_VERSION"));
    // where the project's files come from: $OATEST_HOME, else the current directory's or the executable's
    // ancestors
    let home = std::env::var(crate::util::HOME_VAR).ok().filter(|h| !h.is_empty());
    match crate::util::project_file("patterns").and_then(|p| p.parent().map(std::path::Path::to_path_buf)) {
        Some(root) => {
            let from = match &home {
                Some(h) if root == std::path::Path::new(h) => format!("${}", crate::util::HOME_VAR),
                _ if root == std::path::Path::new(env!("CARGO_MANIFEST_DIR")) => {
                    "the checkout this binary was built from".to_string()
                }
                _ => "the current directory's or the executable's ancestors".to_string(),
            };
            let libs: Vec<String> = ["ort", "tvm", "ort-transformers"]
                .iter()
                .filter(|t| root.join("patterns").join(t).is_dir())
                .map(|t| t.to_string())
                .collect();
            println!("home:  {} (from {from}); pattern libraries: {}", root.display(), libs.join(", "));
        }
        None => println!(
            "home:  not found: no patterns/ under ${}, the current directory or the executable's ancestors (set {} \
             to the oatest checkout)",
            crate::util::HOME_VAR,
            crate::util::HOME_VAR
        ),
    }
    #[cfg(feature = "ort")]
    match crate::compiler::ort::find_library(a.ort.ort_lib.as_deref()) {
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
