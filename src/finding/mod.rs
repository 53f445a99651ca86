//! A finding on disk, owned here: `findings/<id>-<symptom>/` with the test (`model.onnx`, or `recipe.json` for a
//! Relax-level test), its inputs, every configuration's outcome (`outcome.json`) and `meta.json`; the schema
//! (versioned, read and written), atomic writing, loading, and signatures (`signature`). Also `flaky/<id>/`:
//! tests whose inconsistencies a re-run did not confirm, kept with every run.

pub mod exemplars;
pub mod record;
pub mod signature;

use crate::case::Test;
use crate::compiler::{inputs, NamedTensor, Outcome};
use crate::oracle::{Judgement, Symptom, Verdict};
use crate::util::write_dir_atomic;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The schema version this oatest writes. 1: the test was always `model.onnx` (a Relax recipe too); 2: a Relax
/// recipe is `recipe.json`, and `meta.json` names the file.
pub const FORMAT: u32 = 2;

/// One configuration's outcome as `outcome.json` (a list of these, the reference first) and `oatest run --json`
/// record it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    pub target: String,
    pub config: String,
    /// `ok`, `error`, `crash`, `timeout`, `oom`.
    pub status: String,
    pub message: String,
    pub passes_fired: Vec<String>,
    pub time_ms: f64,
    /// (name, dtype, shape) of each output.
    pub outputs: Vec<(String, String, Vec<i64>)>,
}

impl OutcomeRecord {
    pub fn new(o: &Outcome) -> OutcomeRecord {
        OutcomeRecord {
            target: o.target.clone(),
            config: o.config.to_string(),
            status: o.status.kind().to_string(),
            message: o.status.message(),
            passes_fired: o.passes_fired.clone(),
            time_ms: o.time_ms,
            outputs: o.outputs.iter().map(|t| (t.name.clone(), t.tensor.dtype.name(), t.tensor.dims.clone())).collect(),
        }
    }
}

/// `meta.json`: what the finding is and how to regenerate it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// Schema version ([`FORMAT`]); files without it are version 1.
    #[serde(default = "format_1")]
    pub format: u32,
    pub target: String,
    pub target_version: String,
    pub campaign_seed: u64,
    pub test_id: u64,
    pub origin: String,
    /// How the test's spliced pattern differs from its own test (`--vary`; none: as written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variations: Vec<String>,
    pub symptom: Symptom,
    /// The coarse signature ([`signature::coarse`] of the primary verdict).
    pub signature: String,
    /// The source key ([`signature::source_key`]; empty in findings of older campaigns).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The passes that fired under the verdict's configuration and not under the reference, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_passes: Vec<String>,
    pub verdicts: Vec<Verdict>,
    /// The test's file in this directory (`model.onnx` or `recipe.json`).
    #[serde(default = "model_onnx")]
    pub test_file: String,
    pub reproduce: String,
}

fn format_1() -> u32 {
    1
}

fn model_onnx() -> String {
    "model.onnx".into()
}

impl Meta {
    /// The verdict the finding is filed under (the one of its symptom).
    pub fn primary(&self) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.symptom == self.symptom)
    }
}

/// A finding's source key and key passes, which decide whether it is written ([`exemplars`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SourceKey {
    pub key: String,
    pub passes: Vec<String>,
}

/// The source key of a test's finding under its primary verdict `v` ([`signature::source_key`]: for an
/// inconsistency of an ONNX test, the op that produces the first deviating output refines it) and its key passes:
/// those that fired under the verdict's configuration and not under the reference (the first outcome), sorted; when
/// that configuration reported none (a crash or a hang), the pass the test was built for; for an error raised in
/// a named pass (TVM's runner names it), that pass alone: it is the crash site, and the passes that fired before
/// it only let its input appear, so they tell no bug from another (its findings then attach without a run).
pub fn source_key(target: &str, test: &Test, outcomes: &[Outcome], v: &Verdict) -> SourceKey {
    let key = |passes| SourceKey { key: signature::source_key(target, v, None), passes };
    if let Some(pass) = (v.symptom == Symptom::Error).then(|| crate::compiler::tvm::raised_in(&v.detail)).flatten() {
        return key(vec![pass.to_string()]);
    }
    let reference: &[String] = outcomes.first().map(|o| o.passes_fired.as_slice()).unwrap_or_default();
    let mut passes: Vec<String> = outcomes
        .iter()
        .filter(|o| o.config.to_string() == v.config)
        .flat_map(|o| o.passes_fired.iter())
        .filter(|p| !reference.contains(p))
        .cloned()
        .collect();
    // a crash or hang ends the worker before it reports its passes: the pass the test was built for stands in
    if passes.is_empty() {
        passes.extend(test.target_pass.iter().cloned());
    }
    passes.sort();
    passes.dedup();
    let producer = (v.symptom == Symptom::Inconsistency)
        .then(|| signature::deviating_output(&v.detail))
        .flatten()
        .and_then(|out| {
            let m = crate::graph::onnx::decode_model(test.payload.onnx()?).ok()?;
            let p = m.graph.producer(out)?;
            Some(m.graph.node(p.node).op.to_string())
        });
    SourceKey { key: signature::source_key(target, v, producer.as_deref()), passes }
}

/// Writes the finding directory for a test of source key `key`; returns its path. An existing directory (a
/// resumed campaign re-running a test) is kept as it is.
#[allow(clippy::too_many_arguments)]
pub fn write(
    out: &Path,
    target: &str,
    version: &str,
    seed: u64,
    test: &Test,
    outcomes: &[Outcome],
    j: &Judgement,
    key: &SourceKey,
) -> anyhow::Result<PathBuf> {
    let v = signature::primary(j).expect("a finding has a verdict");
    let dir = out.join("findings").join(format!("{:08}-{}", test.id, v.symptom));
    let test_file = test.payload.file_name();
    write_dir_atomic(&dir, |tmp| {
        std::fs::write(tmp.join(test_file), test.payload.bytes())?;
        inputs::write(tmp, "input", &test.inputs)?;
        let records: Vec<OutcomeRecord> = outcomes.iter().map(OutcomeRecord::new).collect();
        std::fs::write(tmp.join("outcome.json"), serde_json::to_string_pretty(&records)?)?;
        let meta = Meta {
            format: FORMAT,
            target: target.to_string(),
            target_version: version.to_string(),
            campaign_seed: seed,
            test_id: test.id,
            origin: test.origin.clone(),
            variations: test.variations.iter().map(|v| v.to_string()).collect(),
            symptom: v.symptom,
            signature: signature::coarse(target, v),
            key: key.key.clone(),
            key_passes: key.passes.clone(),
            verdicts: j.verdicts.clone(),
            test_file: test_file.to_string(),
            reproduce: format!("oatest run {test_file} --target {target} --inputs . --judge"),
        };
        std::fs::write(tmp.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
        Ok(())
    })?;
    Ok(dir)
}

/// Keeps an invalid test (one the reference configuration refused) as `invalid/<test id>/`: the test file,
/// input_K.pb and reason.txt (the reference's message; for a run that gave outputs, how they break the types the
/// model declares; the test's variations, if any), so that the seed generator's and variations' gaps can be seen.
pub fn write_invalid(out: &Path, test: &Test, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let why = |o: &Outcome| match (&o.status, test.payload.onnx()) {
        (crate::compiler::Status::Ok, Some(model)) => {
            let declared = crate::graph::onnx::declared_outputs(model);
            crate::oracle::contract::violation(&declared, &o.outputs)
                .unwrap_or_else(|| "ran, but was judged invalid".into())
        }
        _ => o.status.message().to_string(),
    };
    let mut reason = outcomes.first().map(|o| format!("{}: {}\n", o.config, why(o))).unwrap_or_default();
    if !test.variations.is_empty() {
        reason.push_str(&format!("variations: {}\n", test.variations.join(", ")));
    }
    write_dir_atomic(&out.join("invalid").join(format!("{:08}", test.id)), |tmp| {
        std::fs::write(tmp.join(test.payload.file_name()), test.payload.bytes())?;
        inputs::write(tmp, "input", &test.inputs)?;
        std::fs::write(tmp.join("reason.txt"), reason)?;
        Ok(())
    })
}

/// An inconsistency that did not survive its re-run, kept rather than dropped: uninitialized reads and races in
/// fused kernels look exactly like this.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unconfirmed {
    pub verdict: Verdict,
    /// `nondeterministic` (the reference itself changed between runs) or `flaky` (the difference did not come
    /// back).
    pub why: String,
}

/// `flaky/<id>/meta.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlakyMeta {
    pub format: u32,
    pub target: String,
    pub target_version: String,
    pub campaign_seed: u64,
    pub test_id: u64,
    pub origin: String,
    pub test_file: String,
    pub unconfirmed: Vec<Unconfirmed>,
}

/// Keeps a test whose inconsistencies a re-run did not confirm as `flaky/<test id>/`: the test, its inputs,
/// every run (first runs, then re-runs) in `outcome.json` with its outputs as `run<k>_output_<K>.pb`, and
/// `meta.json` saying which verdicts fell and why.
pub fn write_unconfirmed(
    out: &Path,
    target: &str,
    version: &str,
    seed: u64,
    test: &Test,
    runs: &[Outcome],
    unconfirmed: &[Unconfirmed],
) -> anyhow::Result<PathBuf> {
    let dir = out.join("flaky").join(format!("{:08}", test.id));
    let test_file = test.payload.file_name();
    write_dir_atomic(&dir, |tmp| {
        std::fs::write(tmp.join(test_file), test.payload.bytes())?;
        inputs::write(tmp, "input", &test.inputs)?;
        let records: Vec<OutcomeRecord> = runs.iter().map(OutcomeRecord::new).collect();
        std::fs::write(tmp.join("outcome.json"), serde_json::to_string_pretty(&records)?)?;
        for (k, o) in runs.iter().enumerate() {
            inputs::write(tmp, &format!("run{k}_output"), &o.outputs)?;
        }
        let meta = FlakyMeta {
            format: FORMAT,
            target: target.to_string(),
            target_version: version.to_string(),
            campaign_seed: seed,
            test_id: test.id,
            origin: test.origin.clone(),
            test_file: test_file.to_string(),
            unconfirmed: unconfirmed.to_vec(),
        };
        std::fs::write(tmp.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
        Ok(())
    })?;
    Ok(dir)
}

/// A finding directory, read back.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub dir: PathBuf,
    pub meta: Meta,
    /// The reference first.
    pub outcomes: Vec<OutcomeRecord>,
    /// What the target runs.
    pub payload: crate::case::Payload,
    /// The test's model: the ONNX model, or the recipe's seed graph.
    pub model: crate::graph::Model,
    pub inputs: Vec<NamedTensor>,
}

impl Loaded {
    /// The outcome record of a configuration (by its display name).
    pub fn outcome(&self, config: &str) -> Option<&OutcomeRecord> {
        self.outcomes.iter().find(|r| r.config == config)
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a finding's file of this format", path.display()))
}

/// Only `meta.json` of a finding directory (cheap: no model, no inputs).
pub fn load_meta(dir: &Path) -> anyhow::Result<Meta> {
    let meta: Meta = read_json(&dir.join("meta.json"))?;
    anyhow::ensure!(
        meta.format <= FORMAT,
        "{}: finding format {} (this oatest reads up to {FORMAT})",
        dir.join("meta.json").display(),
        meta.format
    );
    Ok(meta)
}

/// Reads a finding directory.
pub fn load(dir: &Path) -> anyhow::Result<Loaded> {
    let meta = load_meta(dir)?;
    let outcomes: Vec<OutcomeRecord> = read_json(&dir.join("outcome.json"))?;
    let (payload, model) = crate::case::Payload::read(&dir.join(&meta.test_file))?;
    let inputs = inputs::read(dir, &model.graph)?;
    Ok(Loaded { dir: dir.to_path_buf(), meta, outcomes, payload, model, inputs })
}

/// The file that marks a finding triaged: what triage concluded about it (written by triage through
/// [`write_triaged`], read back with [`read_triaged`]).
pub const TRIAGE_FILE: &str = "triage.json";

/// Records what triage concluded about the finding in `dir` (atomically): a resumed triage skips it.
pub fn write_triaged<T: serde::Serialize>(dir: &Path, triaged: &T) -> anyhow::Result<()> {
    crate::util::write_atomic(&dir.join(TRIAGE_FILE), serde_json::to_string_pretty(triaged)?.as_bytes())
}

/// What triage concluded about the finding in `dir`, when it has a readable record.
pub fn read_triaged<T: serde::de::DeserializeOwned>(dir: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(dir.join(TRIAGE_FILE)).ok()?).ok()
}

/// Finding directories of a run, sorted; `pending_only`: those without triage.json.
pub fn finding_dirs(run: &Path, pending_only: bool) -> anyhow::Result<Vec<PathBuf>> {
    let findings = run.join("findings");
    if !findings.exists() {
        return Ok(Vec::new());
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&findings)
        .with_context(|| format!("cannot list {}", findings.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .filter(|p| !pending_only || !p.join(TRIAGE_FILE).exists())
        .collect();
    dirs.sort();
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_of_format_1_still_loads() {
        let v1 = r#"{"target":"ort","target_version":"1.31.1","campaign_seed":1,"test_id":7,"origin":"seedgen",
            "symptom":"error","signature":"abc","verdicts":[{"symptom":"error","config":"all","detail":"x",
            "max_diff":null}],"reproduce":"oatest run model.onnx --target ort --inputs . --judge"}"#;
        let m: Meta = serde_json::from_str(v1).unwrap();
        assert_eq!((m.format, m.test_file.as_str()), (1, "model.onnx"));
        assert_eq!(m.primary().unwrap().config, "all");
        let back: Meta = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
    }

    /// A 10-minute TVM campaign kept 152 findings of 16 keys as directories, most of them FuseTransposeMatmul's one
    /// error behind as many sets of passes that fired before it, and triage ran each to attach it.
    #[test]
    fn an_error_raised_in_a_pass_is_keyed_by_that_pass_alone() {
        use crate::compiler::{Config, Level, Status};
        let test = Test {
            id: 7,
            payload: crate::case::Payload::Onnx(vec![]),
            inputs: vec![],
            origin: "seedgen".into(),
            target_pass: Some("FuseTransposeMatmul".into()),
            extra: None,
            asks: None,
            variations: vec![],
        };
        let fired = |level: Level, passes: &[&str]| {
            let mut o = Outcome::failed(&Config::level(level), Status::Ok, 0.0);
            o.passes_fired = passes.iter().map(|p| p.to_string()).collect();
            o
        };
        let outcomes = [fired(Level::Disable, &[]), fired(Level::All, &["CanonicalizeBindings", "ConvertToDataflow"])];
        let verdict = |detail: &str| Verdict {
            symptom: Symptom::Error,
            config: outcomes[1].config.to_string(),
            detail: detail.into(),
            max_diff: None,
            measure: None,
        };
        let raised = verdict("[raised in FuseTransposeMatmul] AttributeError: 'TupleType' object has no attribute");
        assert_eq!(source_key("tvm", &test, &outcomes, &raised).passes, ["FuseTransposeMatmul"]);
        let plain = source_key("tvm", &test, &outcomes, &verdict("InternalError: CodeGenVM cannot emit"));
        assert_eq!(plain.passes, ["CanonicalizeBindings", "ConvertToDataflow"], "the passes that fired");
    }

    /// A review of invalid/ found "disable: " and nothing else for tests whose unoptimized run breaks the model's
    /// declared output shapes (a Range of 0 elements where 3 are declared).
    #[test]
    fn an_invalid_test_says_how_it_breaks_its_declared_types() {
        use crate::graph::{DType, Graph, Model, Node, OpId, Tensor, TensorType};
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[3]));
        g.add_node(Node::new("n", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[3]));
        let model = crate::graph::onnx::encode_model(&Model::new(g));
        let test = Test {
            id: 7,
            payload: crate::case::Payload::Onnx(model),
            inputs: vec![],
            origin: "seedgen".into(),
            target_pass: None,
            extra: None,
            asks: None,
            variations: vec!["attr"],
        };
        let mut run = Outcome::failed(
            &crate::compiler::Config::level(crate::compiler::Level::Disable),
            crate::compiler::Status::Ok,
            0.0,
        );
        run.outputs = vec![NamedTensor { name: "y".into(), tensor: Tensor::from_f32(&[0], &[]) }];
        let dir = tempfile::tempdir().unwrap();
        write_invalid(dir.path(), &test, &[run]).unwrap();
        let reason = std::fs::read_to_string(dir.path().join("invalid/00000007/reason.txt")).unwrap();
        assert!(reason.starts_with("disable: the unoptimized run gives output 'y' as float32[0]"), "{reason}");
        assert!(reason.ends_with("variations: attr\n"), "{reason}");
    }
}
