//! `oatest reduce MODEL`: the triage of one model that shows a bug (culprit passes, minimized model), written
//! as its bug directory.

use super::triage::TriageOpts;
use crate::compiler::{inputs, Config};
use crate::oracle::{Hints, Oracle};
use crate::triage::reduce::Case;
use crate::triage::{self, Finding, Reproducer};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReduceArgs {
    /// The model showing a bug.
    pub model: PathBuf,
    /// ort, tract, tvm or ort-transformers.
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
    /// The bug directory to write (default: <model stem>-bug/); two passes that each show the bug on their own
    /// give a second one, <out>-2.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub opts: TriageOpts,
}

pub fn run(a: ReduceArgs) -> anyhow::Result<()> {
    // an ONNX model, or a Relax synthesis recipe (tvm, a .json file): then the seed graph inside it is reduced
    let (payload, model) = crate::case::Payload::read(&a.model)?;
    let recipe = payload.recipe().cloned();
    let feeds = match &a.inputs {
        Some(p) => inputs::read(p, &model.graph)?,
        None => inputs::generate(&model.graph, a.seed)
            .with_context(|| format!("{}: cannot generate inputs", a.model.display()))?,
    };
    let mut labeler = a.opts.labeler()?;
    let mut w = a.opts.worker(&a.target)?;
    let configs: Vec<Config> = if a.configs.is_empty() {
        w.info.default_configs.clone()
    } else {
        a.configs.iter().map(|c| Config::parse(c)).collect::<anyhow::Result<_>>()?
    };
    anyhow::ensure!(configs.len() >= 2, "--config: give a reference and at least one configuration to compare");
    let bytes = payload.bytes();
    let oracle = Oracle { tolerance: a.opts.tolerance()? };
    // judged as the campaign judges: what a re-run does not confirm is no finding to reduce
    let mut run = |c: &[Config]| w.run_configs(&bytes, &feeds, c);
    let hints = Hints::of_test(&model.graph, recipe.is_none());
    let c = crate::oracle::confirm::judge(&oracle, &configs, &hints, &mut run, || None, false);
    let (outcomes, judgement) = (c.outcomes, c.judgement);
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
    finding.relax = recipe.map(crate::triage::RelaxTest::Recipe);
    println!("{}: {} under {}", a.model.display(), finding.symptom, finding.config);
    let mut semantic = triage::classify::Semantic::new(false);
    let mut r = Reproducer::new(&mut w, oracle.clone(), finding, Some(&mut semantic));
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}-bug", a.model.file_stem().unwrap_or_default().to_string_lossy())));
    // two passes that each show it on their own give two bug directories: out, then out-2
    for (k, (mut t, m)) in triage::triage_all(&mut r, a.opts.limits()).into_iter().enumerate() {
        triage::fresh::gate(&mut r, &mut t, &m);
        let out = if k == 0 { out.clone() } else { PathBuf::from(format!("{}-{}", out.display(), k + 1)) };
        let upstream = labeler.label(&r, &t, &m);
        crate::report::entry::write(&out, &mut r, &t, &m, &upstream, oracle.tolerance, vec![source.clone()])?;
        println!("class: {} ({})", t.class, t.class_note);
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
        if !t.also_faulty.is_empty() {
            println!("also faulty on its own: {} (disabled here; its own directory)", t.also_faulty.join("+"));
        }
        println!("upstream: {}", upstream.known_label());
        if !upstream.versions.is_empty() {
            let fixed =
                upstream.fixed_upstream.as_ref().map(|v| format!(" (fixed upstream in {v})")).unwrap_or_default();
            println!("affected versions: {}{fixed}", upstream.versions_line());
        }
        println!("wrote {}", out.display());
    }
    Ok(())
}
