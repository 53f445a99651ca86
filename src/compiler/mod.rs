//! Compilers under test behind one trait (`Target`): configurations in, `Outcome`s out; run only inside
//! worker processes (`worker`) so a crash, hang or memory blow-up of the compiler is an outcome, not ours.

pub mod fault;
pub mod inputs;
pub mod named;
#[cfg(feature = "python")]
pub mod onnxref;
#[cfg(feature = "ort")]
pub mod ort;
/// ONNX Runtime's Python transformer optimizer (with the `python` feature) and, whatever the features, its
/// runner's sources.
pub mod ortx;
#[cfg(feature = "python")]
mod python;
pub mod rules;
#[cfg(feature = "tract")]
pub mod tract;
/// The TVM target (with the `tvm` feature) and, whatever the features, its Python runner's sources.
pub mod tvm;
pub mod worker;

use serde::{Deserialize, Serialize};
use std::fmt;

/// How hard the compiler optimizes. Each target maps these to its own levels and refuses those it lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub enum Level {
    /// No optimization: the reference.
    Disable,
    Basic,
    Extended,
    /// ORT's layout level (ORT >= 1.22).
    Layout,
    All,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Disable => "disable",
            Level::Basic => "basic",
            Level::Extended => "extended",
            Level::Layout => "layout",
            Level::All => "all",
        }
    }
}

/// One way to compile a model: a level, passes to disable by name, and the thread count.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Config {
    pub level: Level,
    pub disabled: Vec<String>,
    pub threads: usize,
    /// Also find which rewrite rules inside rule-based passes fired (costs one session per rule).
    pub attribute_rules: bool,
    /// With `attribute_rules`: only these rules (empty: all).
    #[serde(default)]
    pub rules_of_interest: Vec<String>,
    /// Write the optimized graph here (targets that can: ORT).
    #[serde(default)]
    pub save_optimized: Option<std::path::PathBuf>,
    /// Session configuration entries (`key=value`, ORT's `add_session_config_entry`; other targets ignore them).
    /// Always serialized: the worker protocol's binary frames are not self-describing.
    #[serde(default)]
    pub options: Vec<(String, String)>,
}

/// The key prefix of a free-dimension override among a configuration's `options`: `free_dim:NAME=SIZE` is not a
/// session configuration entry but ORT's `AddFreeDimensionOverrideByName(NAME, SIZE)` (what enables its
/// FreeDimensionOverrideTransformer); carried with the entries so that every stage passes it on unchanged.
pub const FREE_DIM: &str = "free_dim:";

impl Config {
    pub fn level(level: Level) -> Config {
        Config {
            level,
            disabled: Vec::new(),
            threads: 1,
            attribute_rules: false,
            rules_of_interest: Vec::new(),
            save_optimized: None,
            options: Vec::new(),
        }
    }

    /// Parses `LEVEL[@THREADS][+NAME...][:-Pass1;-Pass2;key=value...]` (e.g. `all`,
    /// `extended:-ConstantFolding;-GeluFusionL1`, `all:session.x64quantprecision=1` for a session configuration
    /// entry, `all@4` for 4 threads, `all+gelu_approx` for the entries of a named configuration, `named`).
    pub fn parse(s: &str) -> anyhow::Result<Config> {
        let (mut disabled, mut options) = (Vec::new(), Vec::new());
        let head = match s.split_once(':') {
            Some((h, rest)) => {
                for p in rest.split(';').filter(|p| !p.is_empty()) {
                    match (p.strip_prefix('-'), p.split_once('=')) {
                        (Some(pass), _) => disabled.push(pass.to_string()),
                        (None, Some((k, v))) if !k.is_empty() => options.push((k.to_string(), v.to_string())),
                        _ => anyhow::bail!(
                            "config '{s}': '{p}' is neither '-Pass' (a pass to disable) nor 'key=value' (a session \
                             configuration entry)"
                        ),
                    }
                }
                h
            }
            None => s,
        };
        let mut names = head.split('+');
        let head = names.next().unwrap_or_default();
        let mut named_options = Vec::new();
        for name in names {
            let n = named::lookup(name).map_err(|e| anyhow::anyhow!("config '{s}': {e}"))?;
            for p in n.pairs() {
                if !named_options.contains(&p) {
                    named_options.push(p);
                }
            }
        }
        options.splice(0..0, named_options);
        let (lvl, threads) = match head.split_once('@') {
            Some((l, t)) => (l, t.parse().map_err(|_| anyhow::anyhow!("config '{s}': bad thread count '{t}'"))?),
            None => (head, 1),
        };
        let level = match lvl {
            "disable" | "none" | "0" => Level::Disable,
            "basic" | "1" => Level::Basic,
            "extended" | "2" => Level::Extended,
            "layout" | "3" => Level::Layout,
            "all" | "99" => Level::All,
            other => anyhow::bail!("config '{s}': unknown level '{other}' (disable, basic, extended, layout, all)"),
        };
        anyhow::ensure!(threads >= 1, "config '{s}': threads must be >= 1");
        for (k, v) in &options {
            if let Some(name) = k.strip_prefix(FREE_DIM) {
                anyhow::ensure!(
                    !name.is_empty() && v.parse::<i64>().is_ok_and(|n| n >= 0),
                    "config '{s}': '{k}={v}' is no free-dimension override ({FREE_DIM}NAME=SIZE, SIZE >= 0)"
                );
            }
        }
        Ok(Config {
            level,
            disabled,
            threads,
            attribute_rules: false,
            rules_of_interest: Vec::new(),
            save_optimized: None,
            options,
        })
    }
}

impl Config {
    /// The session configuration entries proper (`options` without the free-dimension overrides).
    pub fn session_entries(&self) -> impl Iterator<Item = &(String, String)> {
        self.options.iter().filter(|(k, _)| !k.starts_with(FREE_DIM))
    }

    /// The free-dimension overrides, (dim_param name, size), in order.
    pub fn dim_overrides(&self) -> Vec<(String, i64)> {
        self.options
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(FREE_DIM)?.to_string(), v.parse().ok()?)))
            .collect()
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.level.name())?;
        if self.threads != 1 {
            write!(f, "@{}", self.threads)?;
        }
        // entries that make up named configurations print as their names
        let (names, rest) = named::names_of(&self.options);
        for n in names {
            write!(f, "+{n}")?;
        }
        let items: Vec<String> =
            self.disabled.iter().map(|p| format!("-{p}")).chain(rest.iter().map(|(k, v)| format!("{k}={v}"))).collect();
        if !items.is_empty() {
            write!(f, ":{}", items.join(";"))?;
        }
        Ok(())
    }
}

pub use crate::graph::NamedTensor;

/// How a run ended. Derived in the worker for errors; from the wait status in the parent for the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// The compiler refused or failed with a message (load, compile or run).
    Error {
        message: String,
    },
    /// The worker died from a signal (or exited abnormally) while compiling or running.
    Crash {
        signal: Option<i32>,
        message: String,
    },
    /// The per-test time limit passed.
    Timeout {
        limit_ms: u64,
    },
    /// The worker exceeded its memory limit.
    Oom {
        message: String,
    },
}

impl Status {
    pub fn kind(&self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error { .. } => "error",
            Status::Crash { .. } => "crash",
            Status::Timeout { .. } => "timeout",
            Status::Oom { .. } => "oom",
        }
    }

    pub fn message(&self) -> String {
        match self {
            Status::Ok => String::new(),
            Status::Error { message } | Status::Oom { message } => message.clone(),
            Status::Crash { signal: Some(s), message } => {
                format!("killed by signal {s} ({}) {message}", signal_name(*s))
            }
            Status::Crash { signal: None, message } => message.clone(),
            Status::Timeout { limit_ms } => format!("no result within {limit_ms} ms"),
        }
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// What one configuration did with one model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The target that produced it (set by the worker's parent side).
    #[serde(default)]
    pub target: String,
    pub config: Config,
    pub status: Status,
    pub outputs: Vec<NamedTensor>,
    /// Passes that modified the graph, in the order they first did.
    pub passes_fired: Vec<String>,
    /// Passes that ran, whether or not they changed the graph (targets that report it: ORT). A pass that
    /// crashes never says it fired; these are the candidates then.
    #[serde(default)]
    pub passes_ran: Vec<String>,
    pub time_ms: f64,
}

impl Outcome {
    pub fn failed(config: &Config, status: Status, time_ms: f64) -> Outcome {
        Outcome {
            target: String::new(),
            config: config.clone(),
            status,
            outputs: Vec::new(),
            passes_fired: Vec::new(),
            passes_ran: Vec::new(),
            time_ms,
        }
    }
}

/// A compiler under test. Implementations run in a worker process (or in-process for pure-Rust targets in tests).
pub trait Target {
    fn name(&self) -> &'static str;
    /// The compiler's version, e.g. `1.31.1`.
    fn version(&self) -> String;
    /// The default differential configurations; the first is the unoptimized reference.
    fn default_configs(&self) -> Vec<Config>;
    /// The passes a configuration may leave out, where the target lists them (TVM: its pipeline's optional
    /// passes, reported by the Python runner); empty otherwise.
    fn optional_passes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Compiles `model` (ONNX bytes) under `config` and runs it on `inputs`.
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome;
}

/// The semantic reference's (`onnxref`) pseudo-pass: a configuration that disables it evaluates the model with
/// every 16-bit float widened to float32, rounding only the outputs to their declared type.
pub const HALF_ROUNDING: &str = "half-precision-rounding";

/// The semantic reference's (`onnxref`) pseudo-pass of float rounding: a configuration that disables it evaluates
/// the model with every float tensor (float32, float16, bfloat16) float64, its outputs too.
pub const FLOAT_ROUNDING: &str = "float-rounding";

/// The semantic reference's (`onnxref`) pseudo-pass of trusting inferred shapes: a configuration that disables it
/// also checks every value of the main graph against the shape ONNX shape inference gives it, and fails with
/// `inferred shapes: ...` where they contradict (one symbolic dimension holding two sizes).
pub const INFERRED_SHAPES: &str = "inferred-shapes";

/// The semantic reference's pseudo-passes of exact ops: a configuration that disables `exact:NAME` evaluates the
/// model with the approximation NAME of python/oatest_onnxref.py (`gelu`: com.microsoft Gelu and BiasGelu by
/// FastGelu's tanh formula; `erf`: Erf by the same formula), what an optimizer computes by design when a named
/// configuration asks it to approximate (`compiler::named`, `approximates`).
pub const APPROXIMATE: &str = "exact:";

/// Which target a worker hosts, and what it needs to start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TargetKind {
    Ort,
    Tract,
    /// TVM Relax through the embedded Python interpreter.
    Tvm,
    /// Test-only: misbehaves as a model's `oatest.fault` metadata says (crash, abort, hang, oom).
    Fault,
    /// The semantic reference (onnx.reference): no optimizer, the ONNX specification's meaning of a model.
    OnnxRef,
    /// ONNX Runtime's Python graph optimizer (`onnxruntime.transformers.optimize_model`) through the embedded
    /// interpreter, its output run in ONNX Runtime's Python package.
    OrtTransformers,
}

impl TargetKind {
    pub fn parse(s: &str) -> anyhow::Result<TargetKind> {
        Ok(match s {
            "ort" | "onnxruntime" => TargetKind::Ort,
            "tract" => TargetKind::Tract,
            "tvm" => TargetKind::Tvm,
            "fault" => TargetKind::Fault,
            "onnxref" | "onnx-reference" => TargetKind::OnnxRef,
            "ort-transformers" | "ortx" => TargetKind::OrtTransformers,
            other => anyhow::bail!("unknown target '{other}' (ort, tract, tvm, ort-transformers, onnxref)"),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            TargetKind::Ort => "ort",
            TargetKind::Tract => "tract",
            TargetKind::Tvm => "tvm",
            TargetKind::Fault => "fault",
            TargetKind::OnnxRef => "onnxref",
            TargetKind::OrtTransformers => ortx::NAME,
        }
    }
}

/// The targets of a campaign: one, or two whose references are compared with each other (`ort,tract`). Parsed
/// once from `--target`; written as that same text (so checkpoints keep their form).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TargetSet(Vec<TargetKind>);

impl TargetSet {
    pub fn parse(s: &str) -> anyhow::Result<TargetSet> {
        let kinds: Vec<TargetKind> =
            s.split(',').map(|k| TargetKind::parse(k.trim())).collect::<anyhow::Result<_>>()?;
        anyhow::ensure!(kinds.len() <= 2, "--target takes one target or two (e.g. ort,tract)");
        Ok(TargetSet(kinds))
    }

    pub fn kinds(&self) -> &[TargetKind] {
        &self.0
    }

    /// The first target (the one whose patterns and seeds a campaign uses).
    pub fn first(&self) -> &TargetKind {
        &self.0[0]
    }

    /// Exactly this one target.
    pub fn is(&self, kind: TargetKind) -> bool {
        self.0 == [kind]
    }
}

impl fmt::Display for TargetSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.iter().map(|k| k.name()).collect::<Vec<_>>().join(","))
    }
}

impl TryFrom<String> for TargetSet {
    type Error = anyhow::Error;
    fn try_from(s: String) -> anyhow::Result<TargetSet> {
        TargetSet::parse(&s)
    }
}

impl From<TargetSet> for String {
    fn from(t: TargetSet) -> String {
        t.to_string()
    }
}

/// Builds the target a worker hosts. `ort_lib` is the ONNX Runtime library to load (ort only).
pub fn open(kind: &TargetKind, ort_lib: Option<&std::path::Path>) -> anyhow::Result<Box<dyn Target>> {
    match kind {
        #[cfg(feature = "ort")]
        TargetKind::Ort => Ok(Box::new(ort::OrtTarget::new(ort_lib)?)),
        #[cfg(not(feature = "ort"))]
        TargetKind::Ort => {
            let _ = ort_lib;
            anyhow::bail!("this oatest was built without the `ort` feature")
        }
        #[cfg(feature = "tract")]
        TargetKind::Tract => Ok(Box::new(tract::TractTarget::new())),
        #[cfg(not(feature = "tract"))]
        TargetKind::Tract => anyhow::bail!("this oatest was built without the `tract` feature"),
        #[cfg(feature = "tvm")]
        TargetKind::Tvm => Ok(Box::new(tvm::TvmTarget::new()?)),
        #[cfg(not(feature = "tvm"))]
        TargetKind::Tvm => anyhow::bail!("this oatest was built without the `tvm` feature"),
        TargetKind::Fault => Ok(Box::new(fault::FaultTarget::default())),
        #[cfg(feature = "python")]
        TargetKind::OnnxRef => Ok(Box::new(onnxref::OnnxRefTarget::new()?)),
        #[cfg(not(feature = "python"))]
        TargetKind::OnnxRef => anyhow::bail!("this oatest was built without the `python` feature"),
        #[cfg(feature = "python")]
        TargetKind::OrtTransformers => Ok(Box::new(ortx::OrtxTarget::new()?)),
        #[cfg(not(feature = "python"))]
        TargetKind::OrtTransformers => anyhow::bail!("this oatest was built without the `python` feature"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_and_print() {
        let c = Config::parse("extended:-ConstantFolding;-GeluFusionL1").unwrap();
        assert_eq!(c.level, Level::Extended);
        assert_eq!(c.disabled, ["ConstantFolding", "GeluFusionL1"]);
        assert_eq!(Config::parse(&c.to_string()).unwrap(), c);
        assert_eq!(Config::parse("all@4").unwrap().threads, 4);
        assert!(Config::parse("max").is_err());
        assert!(Config::parse("all:ConstantFolding").is_err());
        assert!(Config::parse("all@0").is_err());
        let o = Config::parse("all:-NchwcTransformer;session.x64quantprecision=1").unwrap();
        assert_eq!(o.options, [("session.x64quantprecision".to_string(), "1".to_string())]);
        assert_eq!(o.disabled, ["NchwcTransformer"]);
        assert_eq!(o.to_string(), "all+x64_precise:-NchwcTransformer");
        assert_eq!(Config::parse(&o.to_string()).unwrap(), o);
        assert!(Config::parse("all:=1").is_err());
        let n = Config::parse("all@2+gelu_approx+no_qdq:-ConstantFolding;a=b").unwrap();
        assert_eq!(n.options.len(), 3);
        assert_eq!(n.to_string(), "all@2+gelu_approx+no_qdq:-ConstantFolding;a=b");
        assert_eq!(Config::parse(&n.to_string()).unwrap(), n);
        let spelled = Config::parse("all:optimization.enable_gelu_approximation=1").unwrap();
        assert_eq!(spelled.to_string(), "all+gelu_approx");
        assert!(Config::parse("all+nonexistent").is_err());
        let d = Config::parse("all:free_dim:n2=2;a=b").unwrap();
        assert_eq!(d.dim_overrides(), [("n2".to_string(), 2)]);
        assert_eq!(d.session_entries().collect::<Vec<_>>(), [&("a".to_string(), "b".to_string())]);
        assert_eq!(Config::parse(&d.to_string()).unwrap(), d);
        assert!(Config::parse("all:free_dim:n2=two").is_err());
        assert!(Config::parse("all:free_dim:=2").is_err());
    }
}
