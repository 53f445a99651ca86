//! Command-line interface: clap definitions, one small file per subcommand, each parsed once into a validated
//! configuration that calls the library.

mod bench;
mod check;
mod convert;
mod doctor;
mod export;
mod extract;
mod fuzz;
mod merge;
mod ops;
mod patterns;
mod reduce;
mod run;
mod seeds;
mod synth;
mod tolerance;
mod triage;
mod worker;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// `--ort-lib`, shared by every subcommand that runs ONNX Runtime.
#[derive(Args, Debug, Clone, Default)]
pub struct OrtLib {
    /// ONNX Runtime library (default: ORT_DYLIB_PATH, then the onnxruntime wheel in .venv).
    #[arg(long = "ort-lib", value_name = "PATH")]
    pub ort_lib: Option<PathBuf>,
}

#[derive(Parser, Debug)]
#[command(name = "oatest", version, about = "Optimization-aware fuzzing of deep-learning compiler optimizers")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// The fuzz campaign: generate tests, run them under every configuration, file findings.
    Fuzz(fuzz::FuzzArgs),
    /// Extract optimization-aware patterns from a compiler's own test models.
    #[command(subcommand)]
    Extract(extract::ExtractCmd),
    /// Pattern libraries: statistics.
    #[command(subcommand)]
    Patterns(patterns::PatternsCmd),
    /// Seed graphs: generate random valid ONNX models.
    #[command(subcommand)]
    Seeds(seeds::SeedsCmd),
    /// The operator catalog: list it, or write single-op models to check its inference against a runtime.
    #[command(subcommand)]
    Ops(ops::OpsCmd),
    /// Triage a campaign's findings: culprit passes, minimized models, bugs/<signature>/ with reports.
    Triage(triage::TriageArgs),
    /// Minimize one model that shows a bug and write its bug directory (report.md, repro.py, model.onnx).
    Reduce(reduce::ReduceArgs),
    /// Merge the run directories of a campaign's shards (`fuzz --shard K/N`) into one run directory.
    Merge(merge::MergeArgs),
    /// Export a campaign's bugs and pass-covering passing tests as an ONNX backend-test regression suite.
    Export(export::ExportArgs),
    /// Splice one pattern into one seed graph (for debugging synthesis).
    Synth(synth::SynthArgs),
    /// Import ONNX models, validate their structure and type-check them against the op catalog.
    Check(check::CheckArgs),
    /// Import and re-export models through oatest's IR (normalizes them; shows what oatest reads).
    Convert(convert::ConvertArgs),
    /// Run models under a target's differential configurations (in worker processes) and print the outcomes.
    Run(run::RunArgs),
    /// Measure oatest's own costs (worker overhead versus calling the target directly).
    Bench(bench::BenchArgs),
    /// Show which compilers are reachable, where they were found and their versions.
    Doctor(doctor::DoctorArgs),
    /// Internal: host a target and serve run requests on stdin/stdout.
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Fuzz(c) => fuzz::run(c),
        Command::Extract(c) => extract::run(c),
        Command::Patterns(c) => patterns::run(c),
        Command::Seeds(c) => seeds::run(c),
        Command::Ops(c) => ops::run(c),
        Command::Check(c) => check::run(c),
        Command::Synth(c) => synth::run(c),
        Command::Triage(c) => triage::run(c),
        Command::Reduce(c) => reduce::run(c),
        Command::Export(c) => export::run(c),
        Command::Merge(c) => merge::run(c),
        Command::Convert(c) => convert::run(c),
        Command::Run(c) => run::run(c),
        Command::Doctor(c) => doctor::run(c),
        Command::Bench(c) => bench::run(c),
        Command::Worker(c) => worker::run(c),
    }
}

/// Export settings shared by the commands that write models.
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// ai.onnx opset version written into models (20..=26: the op specs follow opset-20 signatures).
    #[arg(long, default_value_t = crate::graph::DEFAULT_OPSET)]
    pub opset: i64,
    /// ONNX IR version written into models (9 loads in every ONNX Runtime from 1.17 on).
    #[arg(long, default_value_t = crate::graph::DEFAULT_IR_VERSION)]
    pub ir_version: i64,
}

impl ExportArgs {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (20..=26).contains(&self.opset),
            "--opset {} is outside 20..=26 (the catalog follows opset-20 signatures)",
            self.opset
        );
        anyhow::ensure!((8..=13).contains(&self.ir_version), "--ir-version {} is outside 8..=13", self.ir_version);
        Ok(())
    }
}
