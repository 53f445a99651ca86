//! `oatest convert`: import a model (or a directory of models) and export it again through oatest's IR.

use crate::graph::onnx;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// A model file, or a directory searched recursively for *.onnx.
    pub input: PathBuf,
    /// The output file, or (for a directory input) the output directory mirroring the input's layout.
    pub output: PathBuf,
}

pub fn run(a: ConvertArgs) -> anyhow::Result<()> {
    if !a.input.is_dir() {
        return convert(&a.input, &a.output);
    }
    let files = crate::util::onnx_files(&a.input)?;
    let mut failed = 0;
    for f in &files {
        let rel = f.strip_prefix(&a.input).expect("collected under input");
        if let Err(e) = convert(f, &a.output.join(rel)) {
            failed += 1;
            eprintln!("error: {e:#}");
        }
    }
    eprintln!("converted {} of {} models into {}", files.len() - failed, files.len(), a.output.display());
    anyhow::ensure!(failed == 0, "{failed} models could not be converted");
    Ok(())
}

fn convert(input: &Path, output: &Path) -> anyhow::Result<()> {
    let m = onnx::load(input)?;
    onnx::save(&m, output)
}
