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
    let mut files = Vec::new();
    collect(&a.input, &mut files)?;
    files.sort();
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

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "onnx") {
            out.push(p);
        }
    }
    Ok(())
}
