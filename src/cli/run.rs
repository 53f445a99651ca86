//! `oatest run`: run models under a target's differential configurations in a worker and print the outcomes.

use crate::compiler::worker::{Pool, WorkerSpec};
use crate::compiler::{inputs, Config, Outcome, TargetKind};
use crate::oracle::{Hints, Judgement};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Model files (or directories searched for *.onnx).
    #[arg(required_unless_present = "list_configs")]
    pub models: Vec<PathBuf>,
    /// List the named configurations (`LEVEL+NAME`: ORT session entries for opt-in and kill switches) and exit.
    #[arg(long)]
    pub list_configs: bool,
    /// ort, tract, tvm or ort-transformers.
    #[arg(long, default_value = "tract")]
    pub target: String,
    /// A configuration `LEVEL[@THREADS][+NAME...][:-Pass;key=value]`; repeatable. Default: the target's
    /// differential set.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// Inputs: a directory of input_K.pb TensorProto files or one .pb file (default: generated from --seed).
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Seed of generated inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// One JSON object per (model, configuration) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ort: super::OrtLib,
    /// Per-run time limit in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Worker address-space limit in MiB.
    #[arg(long, default_value_t = 8192)]
    pub mem_mb: u64,
    /// Also attribute rewrite rules inside rule-based passes (ORT: one extra session per rule when one fired).
    #[arg(long)]
    pub attribute_rules: bool,
    /// Also judge the outcomes with the campaign's oracle and print the verdicts (first config = reference).
    #[arg(long)]
    pub judge: bool,
    /// The tolerance of --judge.
    #[command(flatten)]
    pub tolerance: super::tolerance::ToleranceArgs,
    /// Worker processes (default: number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// One line of `--json`: the model and its outcome, in the shape `outcome.json` records it.
#[derive(Serialize)]
struct Row {
    model: String,
    #[serde(flatten)]
    outcome: crate::finding::OutcomeRecord,
}

pub fn run(a: RunArgs) -> anyhow::Result<()> {
    if a.list_configs {
        print!("{}", crate::compiler::named::listing());
        return Ok(());
    }
    let kind = TargetKind::parse(&a.target)?;
    let configs: Vec<Config> = a.configs.iter().map(|c| Config::parse(c)).collect::<anyhow::Result<_>>()?;
    let mut files = Vec::new();
    for m in &a.models {
        files.extend(crate::util::onnx_files(m)?);
    }
    anyhow::ensure!(!files.is_empty(), "no .onnx files in {:?}", a.models);
    let mut spec = WorkerSpec::new(kind)?;
    spec.ort_lib = a.ort.ort_lib.clone();
    spec.timeout = Duration::from_millis(a.timeout_ms);
    spec.mem_limit_mb = Some(a.mem_mb);
    let jobs =
        a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).min(files.len());
    let pool = Pool::start(&spec, jobs)?;
    let info = pool.info();
    let mut configs = if configs.is_empty() { info.default_configs.clone() } else { configs };
    configs.iter_mut().for_each(|c| c.attribute_rules = a.attribute_rules);
    if !a.json {
        println!("target {} {}", info.target, info.version);
    }
    let oracle = crate::oracle::Oracle { tolerance: a.tolerance.tolerance()? };
    let results = pool.map(files, |w, path| -> (PathBuf, anyhow::Result<(Vec<Outcome>, Option<Judgement>)>) {
        let r = (|| {
            // a Relax synthesis recipe (TVM findings, a .json file) carries its seed graph, whose inputs it takes
            let (payload, model) = crate::case::Payload::read(&path)?;
            let bytes = payload.bytes();
            let feeds = match &a.inputs {
                Some(p) => inputs::read(p, &model.graph)?,
                // without inputs the model is still compiled (passes fire); running it then fails with a message
                None => inputs::generate(&model.graph, a.seed).unwrap_or_else(|e| {
                    eprintln!("warning: {}: cannot generate inputs ({e:#}); compiling only", path.display());
                    Vec::new()
                }),
            };
            let hints = Hints::of_test(&model.graph, payload.onnx().is_some());
            let mut run = |c: &[Config]| w.run_configs(&bytes, &feeds, c);
            if !a.judge {
                return Ok((run(&configs), None));
            }
            // judged as the campaign judges: crashes, hangs and inconsistencies confirmed by re-runs
            let c = crate::oracle::confirm::judge(&oracle, &configs, &hints, &mut run, || None, false);
            Ok((c.outcomes, Some(c.judgement)))
        })();
        (path, r)
    });
    let mut failed = 0;
    for (path, r) in results {
        match r {
            Ok((outcomes, judgement)) => {
                print_outcomes(&path, &outcomes, a.json)?;
                if let Some(j) = judgement {
                    print_judgement(&path, &j, a.json)?;
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {e:#}");
            }
        }
    }
    anyhow::ensure!(failed == 0, "{failed} models could not be run");
    Ok(())
}

fn print_judgement(path: &std::path::Path, j: &Judgement, json: bool) -> anyhow::Result<()> {
    if json {
        let v = serde_json::json!({"model": path.display().to_string(), "judgement": j});
        println!("{v}");
        return Ok(());
    }
    if !j.valid {
        println!("verdict: invalid test ({})", j.invalid_reason.as_deref().unwrap_or("?"));
    }
    if j.verdicts.is_empty() && j.valid {
        println!("verdict: no finding");
    }
    for v in &j.verdicts {
        println!("verdict: {} under {}: {}", v.symptom, v.config, v.detail);
    }
    Ok(())
}

fn print_outcomes(path: &std::path::Path, outcomes: &[Outcome], json: bool) -> anyhow::Result<()> {
    for o in outcomes {
        if json {
            let row = Row { model: path.display().to_string(), outcome: crate::finding::OutcomeRecord::new(o) };
            println!("{}", serde_json::to_string(&row)?);
        } else {
            let msg: String = o.status.message().chars().take(100).collect();
            println!(
                "{:<40} {:<24} {:<8} {:>8.2} ms  fired: {}{}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                o.config.to_string(),
                o.status.kind(),
                o.time_ms,
                if o.passes_fired.is_empty() { "-".to_string() } else { o.passes_fired.join(",") },
                if msg.is_empty() { String::new() } else { format!("  [{msg}]") }
            );
        }
    }
    Ok(())
}
