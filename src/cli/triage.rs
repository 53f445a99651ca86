//! `oatest triage RUN_DIR`, `oatest reduce MODEL`, `oatest export RUN_DIR`: culprit passes, minimized models,
//! bug directories with reports and reproducers, and regression suites.

use crate::graph::onnx;
use crate::oracle::Oracle;
use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::{inputs, Config, TargetKind};
use crate::triage::reduce::{Case, Limits};
use crate::triage::{self, Finding, Reproducer};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Worker and reduction settings shared by triage and reduce.
#[derive(Args, Debug, Clone)]
pub struct TriageOpts {
    /// ONNX Runtime library (default: ORT_DYLIB_PATH, then the onnxruntime wheel in .venv).
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
    /// Per-run time limit in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Chebyshev tolerance of the inconsistency oracle.
    #[arg(long, default_value_t = 1e-3)]
    pub tolerance: f64,
    /// At most this many reduction candidates are checked per finding.
    #[arg(long, default_value_t = 2000)]
    pub max_checks: usize,
    /// At most this many seconds of reduction per finding.
    #[arg(long, default_value_t = 120)]
    pub reduce_secs: u64,
}

impl TriageOpts {
    fn limits(&self) -> Limits {
        Limits { max_checks: self.max_checks, time: Duration::from_secs(self.reduce_secs) }
    }

    fn worker(&self, target: &str) -> anyhow::Result<Worker> {
        let mut spec = WorkerSpec::new(TargetKind::parse(target)?)?;
        spec.ort_lib = self.ort_lib.clone();
        spec.timeout = Duration::from_millis(self.timeout_ms);
        Worker::start(spec)
    }
}

#[derive(Args, Debug)]
pub struct TriageArgs {
    /// A campaign's run directory (with findings/).
    pub run: PathBuf,
    /// Triage findings again even if they have triage.json.
    #[arg(long)]
    pub again: bool,
    #[command(flatten)]
    pub opts: TriageOpts,
}

pub fn run(a: TriageArgs) -> anyhow::Result<()> {
    let dirs = triage::finding_dirs(&a.run, !a.again)?;
    let bugs = a.run.join("bugs");
    let mut workers: std::collections::BTreeMap<String, Worker> = Default::default();
    let oracle = Oracle { tolerance: a.opts.tolerance };
    let (mut done, mut new) = (0, 0);
    for dir in &dirs {
        let target = std::fs::read_to_string(dir.join("meta.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|m| m["target"].as_str().map(str::to_string))
            .unwrap_or_default();
        if target.contains(',') || target.is_empty() {
            continue;
        }
        if !workers.contains_key(&target) {
            workers.insert(target.clone(), a.opts.worker(&target)?);
        }
        let w = workers.get_mut(&target).expect("inserted");
        match triage::triage_dir(dir, &bugs, w, oracle.clone(), a.opts.limits()) {
            Ok(Some(f)) => {
                done += 1;
                new += f.new_bug as usize;
                let t = &f.triage;
                println!(
                    "{}: {} {} [{} in {} runs] {} -> {} nodes -> bugs/{}{}",
                    dir.file_name().unwrap_or_default().to_string_lossy(),
                    if f.new_bug { "NEW" } else { "dup" },
                    if t.culprits.is_empty() { "-".to_string() } else { t.culprits.join("+") },
                    t.method,
                    t.dd_runs,
                    t.original_nodes,
                    t.nodes,
                    f.signature,
                    if t.confirmed { "" } else { " (not confirmed)" }
                );
            }
            Ok(None) => {}
            Err(e) => eprintln!("warning: {}: {e:#}", dir.display()),
        }
    }
    println!("triaged {done} findings: {new} new bugs in {}", bugs.display());
    Ok(())
}

#[derive(Args, Debug)]
pub struct ReduceArgs {
    /// The model showing a bug.
    pub model: PathBuf,
    /// ort or tract.
    #[arg(long, default_value = "ort")]
    pub target: String,
    /// Inputs: a directory of input_K.pb files (default: generated from --seed).
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Configurations (first = reference); repeatable. Default: the target's differential set.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// The bug directory to write (default: <model stem>-bug/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub opts: TriageOpts,
}

pub fn reduce(a: ReduceArgs) -> anyhow::Result<()> {
    // an ONNX model, or a Relax synthesis recipe (tvm): then the seed graph inside it is what gets reduced
    let file = std::fs::read(&a.model).with_context(|| format!("cannot read {}", a.model.display()))?;
    let (model, recipe) = crate::campaign::source::decode_test(&file, &a.model)?;
    let raw = recipe.then_some(file);
    let feeds = match &a.inputs {
        Some(p) => inputs::read(p, &model.graph)?,
        None => inputs::generate(&model.graph, a.seed)
            .with_context(|| format!("{}: cannot generate inputs", a.model.display()))?,
    };
    let mut w = a.opts.worker(&a.target)?;
    let configs: Vec<Config> = if a.configs.is_empty() {
        w.info.default_configs.clone()
    } else {
        a.configs.iter().map(|c| Config::parse(c)).collect::<anyhow::Result<_>>()?
    };
    anyhow::ensure!(configs.len() >= 2, "--config: give a reference and at least one configuration to compare");
    let bytes = raw.clone().unwrap_or_else(|| onnx::encode_model(&model));
    let oracle = Oracle { tolerance: a.opts.tolerance };
    let outcomes = w.run_configs(&bytes, &feeds, &configs);
    let judgement = oracle.judge(&outcomes);
    let (target, version) = (w.info.target.clone(), w.info.version.clone());
    let source = a.model.display().to_string();
    let Some(mut finding) =
        Finding::from_runs(&target, &version, Case { model, feeds }, &outcomes, &judgement, &source)?
    else {
        anyhow::bail!(
            "{}: no finding to reduce ({})",
            a.model.display(),
            if judgement.valid {
                "every configuration agrees".to_string()
            } else {
                format!("invalid test: {}", judgement.invalid_reason.unwrap_or_default())
            }
        );
    };
    finding.raw = raw;
    println!("{}: {} under {}", a.model.display(), finding.symptom, finding.config);
    let mut r = Reproducer { worker: &mut w, oracle: oracle.clone(), finding, runs: 0 };
    let (t, m) = triage::triage(&mut r, a.opts.limits());
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}-bug", a.model.file_stem().unwrap_or_default().to_string_lossy())));
    triage::report::write(&out, &r.finding, &t, &m, oracle.tolerance, vec![source])?;
    println!(
        "culprits: {} [{} in {} runs]; {} -> {} nodes in {} checks{}; {} runs in all",
        if t.culprits.is_empty() { "-".to_string() } else { t.culprits.join("+") },
        t.method,
        t.dd_runs,
        t.original_nodes,
        t.nodes,
        t.reduction_checks,
        if t.confirmed { "" } else { " (NOT confirmed)" },
        t.runs
    );
    println!("wrote {}", out.display());
    Ok(())
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A campaign's run directory (with bugs/ after triage, examples/).
    pub run: PathBuf,
    /// Where to write the regression suite.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 1e-3)]
    pub tolerance: f64,
}

pub fn export(a: ExportArgs) -> anyhow::Result<()> {
    let e = triage::export::export(&a.run, &a.out, a.tolerance)?;
    for s in &e.skipped {
        eprintln!("skipped: {s}");
    }
    let bugs = e.cases.values().filter(|c| c.kind == "bug").count();
    println!(
        "exported {} cases ({bugs} bugs, {} passing tests) to {}; run: pytest {}",
        e.cases.len(),
        e.cases.len() - bugs,
        a.out.display(),
        a.out.display()
    );
    Ok(())
}
