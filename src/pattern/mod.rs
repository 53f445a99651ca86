//! Optimization-aware patterns: a closed graph (open inputs as graph inputs, open outputs as graph outputs) plus
//! metadata (compiler, pass, granularity, ports with concrete and abstract types, provenance), stored as one
//! ONNX file whose `metadata_props["oatest.pattern"]` holds the metadata as JSON (format version 1).

pub mod capture;
pub mod extract;
pub mod library;
pub mod repair;

use crate::graph::{onnx, DType, Graph, Model, TensorType};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The metadata key of pattern files, and the format version this oatest writes.
pub const META_KEY: &str = "oatest.pattern";
pub const FORMAT: u32 = 1;

/// How much of the graph around the rewritten region a pattern keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// The region the pass rewrote (with its constants).
    Block,
    /// The region plus its direct producers and consumers: the connected unit with its boundary.
    Subgraph,
    /// The subgraph plus every other reader of its producers' outputs: for fusions that count a value's readers
    /// (AttentionFusion wants a LayerNormalization read by three MatMuls and one residual Add). Cut only when
    /// neither block nor subgraph still fires.
    Context,
    /// A whole model a compiler's test optimized (ort-transformers: the models ORT's transformers tests hand to
    /// `optimize_model`), run as it is; its metadata need not list ports or a key. Extraction cuts the others
    /// from it.
    Model,
}

impl Granularity {
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Block => "block",
            Granularity::Subgraph => "subgraph",
            Granularity::Context => "context",
            Granularity::Model => "model",
        }
    }
}

/// What an op intrinsically needs of an open port: a dtype class and, for rank-sensitive consumers, the rank.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AbstractType {
    /// `float`, `int`, `bool` or the exact dtype name for anything else.
    pub dtype_class: String,
    pub rank: Option<usize>,
}

/// An open input or output of a pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub name: String,
    pub ty: TensorType,
    #[serde(rename = "abstract")]
    pub abstract_ty: AbstractType,
}

/// Where a pattern came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Provenance {
    /// The model file or test that held the graph (relative to its corpus).
    #[serde(default)]
    pub source: String,
    /// The test that loads it, when known.
    pub test: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PatternMeta {
    pub format: u32,
    pub compiler: String,
    pub compiler_version: String,
    pub pass: String,
    pub granularity: Granularity,
    #[serde(default)]
    pub inputs: Vec<Port>,
    #[serde(default)]
    pub outputs: Vec<Port>,
    /// Every source this structure was found in (duplicates are merged).
    pub provenance: Vec<Provenance>,
    /// Structural key: pass + ops + wiring + attributes + port types (what dedup compares).
    #[serde(default)]
    pub key: String,
}

#[derive(Clone, Debug)]
pub struct Pattern {
    pub model: Model,
    pub meta: PatternMeta,
}

/// Whether a model's metadata key is a setting its test optimized it with (`oatest.*` but the pattern's own
/// metadata: ort-transformers' `oatest.model_type`, `oatest.num_heads`, `oatest.hidden_size`), which its patterns
/// and the tests spliced from them keep.
pub fn is_setting(key: &str) -> bool {
    key.starts_with("oatest.") && key != META_KEY
}

/// Ops whose inputs' rank does not matter (elementwise); every other consumer pins the rank in the abstract type.
const RANK_AGNOSTIC: &[&str] = &[
    "Abs",
    "Add",
    "And",
    "Cast",
    "Ceil",
    "Clip",
    "Div",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "Max",
    "Min",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "Pow",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Sigmoid",
    "Sign",
    "Softplus",
    "Sqrt",
    "Sub",
    "Tanh",
    "Where",
    "Xor",
    "QuantizeLinear",
    "DequantizeLinear",
    "Dropout",
];

/// The abstract type of a port read by `consumers` (op types).
pub fn abstract_type(ty: &TensorType, consumers: &[&str]) -> AbstractType {
    let dtype_class = match ty.dtype {
        d if d.is_float() => "float".to_string(),
        d if d.is_int() => "int".to_string(),
        DType::Bool => "bool".to_string(),
        d => d.name(),
    };
    let pinned = consumers.iter().any(|c| !RANK_AGNOSTIC.contains(c));
    AbstractType { dtype_class, rank: if pinned { ty.rank() } else { None } }
}

impl Pattern {
    pub fn encode(&self) -> anyhow::Result<Vec<u8>> {
        let mut m = self.model.clone();
        m.metadata.retain(|(k, _)| k != META_KEY);
        m.metadata.push((META_KEY.into(), serde_json::to_string(&self.meta)?));
        Ok(onnx::encode_model(&m))
    }

    /// Reads a pattern file; errors name the file and what is wrong.
    pub fn load(path: &Path) -> anyhow::Result<Pattern> {
        let model = onnx::load(path)?;
        let json = model
            .metadata
            .iter()
            .find(|(k, _)| k == META_KEY)
            .map(|(_, v)| v.clone())
            .with_context(|| format!("{}: not an oatest pattern (no '{META_KEY}' metadata)", path.display()))?;
        let mut meta: PatternMeta =
            serde_json::from_str(&json).with_context(|| format!("{}: corrupt pattern metadata", path.display()))?;
        anyhow::ensure!(
            meta.format <= FORMAT,
            "{}: pattern format {} is newer than this oatest ({FORMAT})",
            path.display(),
            meta.format
        );
        if meta.granularity == Granularity::Model && meta.inputs.is_empty() && meta.outputs.is_empty() {
            whole_model_ports(&model.graph, &mut meta);
        }
        // the named configuration its pass needs, if any, must be one oatest knows
        crate::compiler::named::asked(&model.metadata)
            .with_context(|| format!("{}: metadata '{}'", path.display(), crate::compiler::named::SETTING))?;
        Ok(Pattern { model, meta })
    }

    /// The file name inside a library: `<pass>/<granularity>-<key hash>.onnx`.
    pub fn file_name(&self) -> PathBuf {
        PathBuf::from(&self.meta.pass).join(format!(
            "{}-{}.onnx",
            self.meta.granularity.name(),
            short_hash(&self.meta.key)
        ))
    }
}

/// A whole model's ports and key, which its metadata need not list: its graph inputs and outputs, when every one
/// of them has a tensor type (else none, and the model is only run whole).
fn whole_model_ports(g: &Graph, meta: &mut PatternMeta) {
    let consumers = |n: &str| g.consumers(n).into_iter().map(|(id, _)| g.node(id).op.name.clone()).collect();
    let inputs = extract::ports(g, &g.inputs, consumers);
    let outputs = extract::ports(g, &g.outputs, |_| Vec::new());
    if inputs.len() == g.inputs.len() && outputs.len() == g.outputs.len() {
        (meta.inputs, meta.outputs) = (inputs, outputs);
    }
    if meta.key.is_empty() {
        meta.key = structural_key(&meta.pass, g);
    }
}

pub use crate::util::stable_hash as short_hash;

/// The structural key of a pattern graph for pass `pass`: value names are replaced by positions, so two copies
/// of one structure from different models get one key.
pub fn structural_key(pass: &str, g: &Graph) -> String {
    let mut ids: BTreeMap<String, String> = BTreeMap::new();
    for (i, n) in g.inputs.iter().enumerate() {
        let t = g.tensor_type(n).map(|t| t.to_string()).unwrap_or_default();
        ids.insert(n.clone(), format!("in{i}:{t}"));
    }
    for (n, t) in &g.initializers {
        ids.insert(n.clone(), format!("c:{}{:?}", t.dtype, t.dims));
    }
    let mut parts = vec![pass.to_string()];
    for (k, node) in g.nodes_in_order().unwrap_or_default().iter().enumerate() {
        for (s, o) in node.outputs.iter().enumerate() {
            ids.insert(o.clone(), format!("n{k}.{s}"));
        }
        let ins: Vec<String> = node.inputs.iter().map(|i| ids.get(i).cloned().unwrap_or_else(|| "_".into())).collect();
        parts.push(format!("{}({}){:?}", node.op, ins.join(","), node.attrs));
    }
    let outs: Vec<String> = g.outputs.iter().map(|o| ids.get(o).cloned().unwrap_or_default()).collect();
    parts.push(format!("->{}", outs.join(",")));
    parts.join(";")
}

/// Statistics of a pattern library.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LibraryStats {
    pub total: usize,
    pub per_pass: BTreeMap<String, usize>,
    pub per_granularity: BTreeMap<String, usize>,
    pub passes_covered: usize,
    pub per_compiler: BTreeMap<String, usize>,
    /// Files that could not be read as patterns (path: reason).
    pub unreadable: Vec<String>,
    /// TVM Relax patterns: every pass, whether campaigns exercise it and why not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tvm_passes: Vec<relax::PassCoverage>,
}

/// Reads every `*.onnx` below `dir` as a pattern, and every `*.json` that is a TVM Relax pattern.
pub fn library_stats(dir: &Path) -> anyhow::Result<LibraryStats> {
    let mut s = LibraryStats::default();
    let mut relax_patterns = Vec::new();
    for f in crate::util::files_with_ext(dir, "json")? {
        match relax::RelaxPattern::load(&f) {
            Ok(Some(p)) => {
                s.total += 1;
                *s.per_pass.entry(p.pass.clone()).or_default() += 1;
                *s.per_granularity.entry(p.granularity.clone()).or_default() += 1;
                *s.per_compiler.entry("tvm".into()).or_default() += 1;
                relax_patterns.push(p);
            }
            Ok(None) => {}
            Err(e) => s.unreadable.push(format!("{e:#}")),
        }
    }
    for f in crate::util::onnx_files(dir)? {
        match Pattern::load(&f) {
            Ok(p) => {
                s.total += 1;
                *s.per_pass.entry(p.meta.pass.clone()).or_default() += 1;
                *s.per_granularity.entry(p.meta.granularity.name().into()).or_default() += 1;
                *s.per_compiler.entry(p.meta.compiler.clone()).or_default() += 1;
            }
            Err(e) => s.unreadable.push(format!("{e:#}")),
        }
    }
    s.passes_covered = s.per_pass.len();
    s.tvm_passes = relax::coverage(&relax_patterns, &crate::compiler::tvm::Pipeline::embedded());
    Ok(s)
}

/// Loads every pattern of `compiler` below `dir`; files that are not readable patterns are returned as messages.
pub fn load_library(dir: &Path, compiler: &str) -> anyhow::Result<(Vec<Pattern>, Vec<String>)> {
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for f in crate::util::onnx_files(dir)? {
        match Pattern::load(&f) {
            Ok(p) if p.meta.compiler == compiler => ok.push(p),
            Ok(_) => {}
            Err(e) => bad.push(format!("{e:#}")),
        }
    }
    Ok((ok, bad))
}

pub mod relax;

#[cfg(test)]
mod tests;
