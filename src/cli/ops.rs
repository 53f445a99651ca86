//! `oatest ops`: list the catalog; write single-op models whose declared output types a runtime can confirm.

use crate::graph::onnx;
use crate::ops::registry;
use crate::seedgen::{rng_for, single_op, SeedConfig};
use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum OpsCmd {
    /// List the ops of the catalog.
    List {
        /// One JSON array instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Write K random single-op models per op plus manifest.json with the output types inference predicts.
    Selftest(SelftestArgs),
}

#[derive(Args, Debug)]
pub struct SelftestArgs {
    #[arg(long)]
    pub out: PathBuf,
    /// Models per op.
    #[arg(long, default_value_t = 8)]
    pub per_op: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub export: super::ExportArgs,
}

#[derive(Serialize)]
struct Case {
    file: String,
    op: String,
    outputs: Vec<OutputType>,
}

#[derive(Serialize)]
struct OutputType {
    name: String,
    dtype: String,
    shape: Vec<usize>,
}

pub fn run(cmd: OpsCmd) -> anyhow::Result<()> {
    match cmd {
        OpsCmd::List { json } => {
            let names: Vec<String> = registry().iter().map(|s| qualified(s.as_ref())).collect();
            if json {
                println!("{}", serde_json::to_string(&names)?);
            } else {
                names.iter().for_each(|n| println!("{n}"));
            }
            Ok(())
        }
        OpsCmd::Selftest(a) => selftest(a),
    }
}

/// An op's name as `ops list` and the selftest manifest write it: `Name`, or `domain::Name` outside ai.onnx.
fn qualified(s: &dyn crate::ops::OpSpec) -> String {
    if s.domain().is_empty() {
        s.name().to_string()
    } else {
        format!("{}::{}", s.domain(), s.name())
    }
}

fn selftest(a: SelftestArgs) -> anyhow::Result<()> {
    a.export.validate()?;
    let cfg = SeedConfig { opset: a.export.opset, ir_version: a.export.ir_version, ..Default::default() };
    std::fs::create_dir_all(&a.out).with_context(|| format!("cannot create {}", a.out.display()))?;
    let mut cases = Vec::new();
    for (i, spec) in registry().iter().enumerate() {
        for k in 0..a.per_op {
            let mut rng = rng_for(a.seed, (i as u64) << 20 | k);
            let Some(m) = single_op(spec.as_ref(), &mut rng, &cfg) else {
                anyhow::bail!("op {} produced no valid single-op model in 50 attempts", spec.name());
            };
            // contrib ops may share a name with an ONNX op (Gelu): the file names the domain
            let file = format!("{}_{k}.onnx", qualified(spec.as_ref()).replace("::", "."));
            onnx::save(&m, &a.out.join(&file))?;
            let outputs = m
                .graph
                .outputs
                .iter()
                .map(|o| {
                    let t = m.graph.tensor_type(o).expect("seed outputs are typed");
                    OutputType { name: o.clone(), dtype: t.dtype.name(), shape: t.dims().expect("static") }
                })
                .collect();
            cases.push(Case { file, op: qualified(spec.as_ref()), outputs });
        }
    }
    crate::util::write_atomic(&a.out.join("manifest.json"), serde_json::to_string_pretty(&cases)?.as_bytes())?;
    eprintln!("wrote {} single-op models to {}", cases.len(), a.out.display());
    Ok(())
}
