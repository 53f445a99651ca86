//! Pattern repair in extraction: cheap rewrites of a model (python/oatest_repair.py: graph outputs given a
//! consumer, symbolic dims made concrete, the opset upgraded with onnx's version converter, integer scalar
//! constants computed at run time) that make it fire a pass a standard ORT session does not fire on it as it is:
//! the pass its test was written for, or its pass at the campaign's opset.

use super::extract::{extract_model, verify, ModelResult};
use super::{structural_key, Pattern, Provenance};
use crate::compiler::worker::{Pool, Worker};
use crate::compiler::{Config, Level};
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The ORT pass names a test-source hint stands for: hints name classes (`GeluFusion`, `PadFusion`), ORT runs
/// some classes under other names or at two levels.
pub fn pass_names(hint: &str) -> Vec<String> {
    let names: &[&str] = match hint {
        "GeluFusion" => &["GeluFusionL1", "GeluFusionL2"],
        "LayerNormFusion" => &["LayerNormFusionL1", "LayerNormFusionL2"],
        "PadFusion" => &["Pad_Fusion"],
        "MatmulBNFusion" => &["MatMul_BatchNormalization_Fusion"],
        "ClipQuantFusion" => &["ClipQuantRewrite"],
        "ReluQuantFusion" => &["ReluQuantRewrite"],
        "TransposeOptimizer" => &["TransposeOptimizer", "TransposeOptimizer_CPUExecutionProvider"],
        other => return vec![other.to_string()],
    };
    names.iter().map(|n| n.to_string()).collect()
}

/// One rewritten copy of a model.
#[derive(Clone, Debug)]
pub struct Variant {
    pub path: PathBuf,
    /// The rewrites that made it, in the order applied (`consume`, `concrete`, `opset`, `unfold`, ...).
    pub rewrites: Vec<String>,
}

impl Variant {
    /// How provenance names it: `fusion/fast_gelu.onnx (repaired: consume)`.
    pub fn source(&self, original: &str, what: &str) -> String {
        format!("{original} ({what}: {})", self.rewrites.join("+"))
    }
}

/// Writes the variants of `models` into `dir` with the repair script (`combinations`: `all`, every rewrite set
/// in the order to try, or one set such as `opset`) and returns them by model, in that order; models with no
/// variant (every rewrite failed the checker) are absent.
pub fn variants(
    python: &Path,
    dir: &Path,
    opset: i64,
    combinations: &str,
    models: &[PathBuf],
) -> anyhow::Result<BTreeMap<PathBuf, Vec<Variant>>> {
    let mut out: BTreeMap<PathBuf, Vec<Variant>> = BTreeMap::new();
    if models.is_empty() {
        return Ok(out);
    }
    let script = crate::util::project_file("python/oatest_repair.py")
        .context("python/oatest_repair.py not found (run oatest from its project directory)")?;
    let run = std::process::Command::new(python)
        .arg(&script)
        .arg(dir)
        .arg(opset.to_string())
        .arg(combinations)
        .args(models)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {} {}", python.display(), script.display()))?;
    anyhow::ensure!(
        run.status.success(),
        "{} exited with {} (it needs onnx: run scripts/setup.sh)",
        script.display(),
        run.status
    );
    #[derive(serde::Deserialize)]
    struct Row {
        model: PathBuf,
        variant: Option<PathBuf>,
        rewrites: Vec<String>,
    }
    for line in String::from_utf8_lossy(&run.stdout).lines().filter(|l| l.starts_with('{')) {
        let row: Row =
            serde_json::from_str(line).with_context(|| format!("{}: bad output line {line}", script.display()))?;
        if let Some(path) = row.variant {
            out.entry(row.model).or_default().push(Variant { path, rewrites: row.rewrites });
        }
    }
    Ok(out)
}

/// The first variant on which a standard session (`all`, rules attributed) runs cleanly and fires one of
/// `wanted`, with its bytes.
pub fn first_firing(w: &mut Worker, variants: &[Variant], wanted: &[String]) -> Option<(Variant, Vec<u8>)> {
    let mut all = Config::level(Level::All);
    all.attribute_rules = true;
    variants.iter().find_map(|v| {
        let bytes = std::fs::read(&v.path).ok()?;
        let m = crate::graph::onnx::decode_model(&bytes).ok()?;
        let feeds = crate::compiler::inputs::generate(&m.graph, 0).unwrap_or_default();
        let o = w.run(&bytes, &feeds, &all);
        let fires =
            matches!(o.status, crate::compiler::Status::Ok) && o.passes_fired.iter().any(|f| wanted.contains(f));
        fires.then(|| (v.clone(), bytes))
    })
}

/// A corpus model whose test names passes that did not fire on it.
pub struct Miss {
    pub path: PathBuf,
    pub provenance: Provenance,
    /// ORT's names of the passes its test was written for.
    pub wanted: Vec<String>,
}

/// Repairs each missed model: the first variant that fires one of its wanted passes is extracted from, its
/// patterns' provenance naming the rewrites. Returns (model, result) for the repaired models only.
pub fn repair_models(
    pool: &Pool,
    python: &Path,
    opset: i64,
    misses: Vec<Miss>,
    tmp: &Path,
) -> anyhow::Result<Vec<(String, anyhow::Result<ModelResult>)>> {
    let dir = tempfile::tempdir()?;
    let paths: Vec<PathBuf> = misses.iter().map(|m| m.path.clone()).collect();
    let variants = variants(python, dir.path(), opset, "all", &paths)?;
    let results = pool.map(misses, |w, miss| {
        let (v, bytes) = first_firing(w, variants.get(&miss.path)?, &miss.wanted)?;
        let source = v.source(&miss.provenance.source, "repaired");
        let prov = Provenance { source: source.clone(), test: miss.provenance.test.clone() };
        Some((source, extract_model(w, &bytes, &prov, tmp)))
    });
    Ok(results.into_iter().flatten().collect())
}

/// The patterns below ai.onnx `opset` upgraded to it with onnx's version converter, kept when they still fire
/// their pass (a campaign at `opset` can use them; only bumping the opset number breaks ops whose signature
/// changed, such as Unsqueeze's axes or the Reduce ops'), each with the key of the pattern it came from.
pub fn upgrade_patterns(
    pool: &Pool,
    python: &Path,
    opset: i64,
    patterns: Vec<Pattern>,
) -> anyhow::Result<Vec<(String, Pattern)>> {
    let dir = tempfile::tempdir()?;
    let mut paths = Vec::new();
    for (k, p) in patterns.iter().enumerate() {
        let path = dir.path().join(format!("in-{k}.onnx"));
        std::fs::write(&path, p.encode()?).with_context(|| format!("cannot write {}", path.display()))?;
        paths.push(path);
    }
    let out = dir.path().join("out");
    let variants = variants(python, &out, opset, "opset", &paths)?;
    let candidates: Vec<(String, Pattern)> = patterns
        .into_iter()
        .zip(&paths)
        .filter_map(|(p, path)| {
            let v = variants.get(path)?.first()?;
            let mut up = Pattern::load(&v.path).ok()?;
            up.meta.key = structural_key(&p.meta.pass, &up.model.graph);
            for prov in &mut up.meta.provenance {
                prov.source = format!("{} (upgraded: opset {} -> {opset})", prov.source, p.model.opset());
            }
            Some((p.meta.key, up))
        })
        .collect();
    Ok(pool.map(candidates, |w, (from, p)| verify(w, &p).then_some((from, p))).into_iter().flatten().collect())
}
