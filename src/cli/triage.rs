//! `oatest triage RUN_DIR`: for each finding of a campaign, delta-debug the passes that fired down to the
//! culprit passes, and write them next to the finding (culprits.json).

use crate::oracle::{Oracle, Symptom};
use crate::target::worker::{Worker, WorkerSpec};
use crate::target::{inputs, Config, Outcome, Status, TargetKind};
use crate::triage::dd::{culprits, Culprits, Probe};
use anyhow::Context;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct TriageArgs {
    /// A campaign's run directory (with findings/).
    pub run: PathBuf,
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    #[arg(long, default_value_t = 1e-3)]
    pub tolerance: f64,
}

pub fn run(a: TriageArgs) -> anyhow::Result<()> {
    let findings = a.run.join("findings");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&findings)
        .with_context(|| format!("cannot list {}", findings.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    dirs.sort();
    let mut workers: std::collections::BTreeMap<String, Worker> = Default::default();
    for dir in dirs {
        match triage_one(&a, &dir, &mut workers) {
            Ok(Some(c)) => println!(
                "{}: {} [{} in {} runs]{}",
                dir.file_name().unwrap_or_default().to_string_lossy(),
                if c.passes.is_empty() { "-".to_string() } else { c.passes.join(", ") },
                c.method,
                c.runs,
                c.note.map(|n| format!(" ({n})")).unwrap_or_default()
            ),
            Ok(None) => {}
            Err(e) => eprintln!("warning: {}: {e:#}", dir.display()),
        }
    }
    Ok(())
}

fn triage_one(
    a: &TriageArgs,
    dir: &Path,
    workers: &mut std::collections::BTreeMap<String, Worker>,
) -> anyhow::Result<Option<Culprits>> {
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json"))?)?;
    let records: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(dir.join("outcome.json"))?)?;
    let target = meta["target"].as_str().context("meta.json has no target")?.to_string();
    let v = &meta["verdicts"][0];
    let symptom: Symptom = serde_json::from_value(meta["symptom"].clone())?;
    let verdict =
        meta["verdicts"].as_array().and_then(|vs| vs.iter().find(|x| x["symptom"] == meta["symptom"])).unwrap_or(v);
    let config_name = verdict["config"].as_str().unwrap_or_default().to_string();
    if target.contains(',') || config_name.contains(['~', ':']) {
        return Ok(None); // cross-target findings have no pass set to debug
    }
    let config = Config::parse(&config_name)?;
    let fired_in = |name: &str| -> Vec<String> {
        records
            .iter()
            .find(|r| r["config"] == name)
            .and_then(|r| r["passes_fired"].as_array())
            .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let reference_name = records.first().and_then(|r| r["config"].as_str()).unwrap_or("disable").to_string();
    let always = fired_in(&reference_name);
    let fired: Vec<String> = fired_in(&config_name).into_iter().filter(|p| !always.contains(p)).collect();
    if !workers.contains_key(&target) {
        let mut spec = WorkerSpec::new(TargetKind::parse(&target)?)?;
        spec.ort_lib = a.ort_lib.clone();
        spec.timeout = std::time::Duration::from_millis(a.timeout_ms);
        workers.insert(target.clone(), Worker::start(spec)?);
    }
    let w = workers.get_mut(&target).expect("inserted");
    let model = std::fs::read(dir.join("model.onnx"))?;
    let m = crate::graph::onnx::decode_model(&model)?;
    let feeds = inputs::read(dir, &m.graph)?;
    let oracle = Oracle { tolerance: a.tolerance };
    let reference: Option<Outcome> = (symptom == Symptom::Inconsistency).then(|| {
        w.run(&model, &feeds, &Config::parse(&reference_name).unwrap_or(Config::level(crate::target::Level::Disable)))
    });
    let mut probe = |enabled: &[String]| -> Probe {
        let mut c = config.clone();
        c.disabled = fired.iter().filter(|p| !enabled.contains(p)).cloned().collect();
        let o = w.run(&model, &feeds, &c);
        match (symptom, &o.status) {
            (Symptom::Crash, Status::Crash { .. } | Status::Oom { .. }) => Probe::Symptom,
            (Symptom::Hang, Status::Timeout { .. }) => Probe::Symptom,
            (Symptom::Error, Status::Error { .. }) => Probe::Symptom,
            (Symptom::Inconsistency, Status::Ok) => match &reference {
                Some(r) if r.status == Status::Ok && oracle.inconsistency(r, &o).is_some() => Probe::Symptom,
                Some(r) if r.status == Status::Ok => Probe::Clean,
                _ => Probe::Unresolved,
            },
            (Symptom::Inconsistency, _) => Probe::Unresolved,
            (_, Status::Ok) => Probe::Clean,
            _ => Probe::Unresolved,
        }
    };
    let result = culprits(&fired, &mut probe);
    crate::util::write_atomic(&dir.join("culprits.json"), serde_json::to_string_pretty(&result)?.as_bytes())?;
    Ok(Some(result))
}
