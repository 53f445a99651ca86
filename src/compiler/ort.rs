//! ONNX Runtime through the `ort` crate (load-dynamic, API 17: any ORT from 1.17 on), with pass-call
//! instrumentation from the session's INFO log (`GraphTransformer <Name> modified: 0|1`).

use super::{Config, Level, NamedTensor, Outcome, Status, Target};
use crate::graph::{DType, Tensor, TensorData};
use anyhow::Context;
use ort::logging::{LogLevel, LoggerFunction};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{OutputSelector, RunOptions, Session, SessionInputValue};
use ort::value::{DynValue, TensorElementType, ValueType};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub struct OrtTarget {
    env: ort::environment::Environment,
    version: String,
    probes: ProbeCache,
}

/// Which rule-attribution sessions fired their container, for the last model: the configurations of a test
/// attribute a rule in the same session (a level-1 rule at level 1 for basic, extended and all), run once.
#[derive(Default)]
struct ProbeCache {
    model: Vec<u8>,
    fired: std::collections::HashMap<Config, bool>,
}

impl ProbeCache {
    /// The answers for `model`, forgetting those of any other model.
    fn of(&mut self, model: &[u8]) -> &mut std::collections::HashMap<Config, bool> {
        if self.model != model {
            self.model = model.to_vec();
            self.fired.clear();
        }
        &mut self.fired
    }
}

/// The longest session config value ORT 1.19 accepts (`Config value is longer than maximum length: 2048`).
const MAX_CONFIG_VALUE: usize = 2048;

/// Where the ONNX Runtime library was found, and how.
#[derive(Clone, Debug)]
pub struct LibraryChoice {
    pub path: PathBuf,
    pub source: &'static str,
}

/// Finds the ONNX Runtime shared library: `--ort-lib`, then `ORT_DYLIB_PATH`, then the onnxruntime wheel in
/// the project's `.venv` (searched from the current directory and the executable's ancestors).
pub fn find_library(explicit: Option<&Path>) -> anyhow::Result<LibraryChoice> {
    if let Some(p) = explicit {
        anyhow::ensure!(p.exists(), "--ort-lib {} does not exist", p.display());
        return Ok(LibraryChoice { path: p.to_path_buf(), source: "--ort-lib" });
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        anyhow::ensure!(p.exists(), "ORT_DYLIB_PATH={} does not exist", p.display());
        return Ok(LibraryChoice { path: p, source: "ORT_DYLIB_PATH" });
    }
    for root in crate::util::search_roots() {
        let lib = root.join(".venv/lib");
        let Ok(pythons) = std::fs::read_dir(&lib) else { continue };
        for py in pythons.flatten() {
            let capi = py.path().join("site-packages/onnxruntime/capi");
            let Ok(files) = std::fs::read_dir(&capi) else { continue };
            let mut found: Vec<PathBuf> = files
                .flatten()
                .map(|f| f.path())
                .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libonnxruntime.so")))
                .collect();
            found.sort();
            if let Some(p) = found.pop() {
                return Ok(LibraryChoice { path: p, source: ".venv onnxruntime wheel" });
            }
        }
    }
    anyhow::bail!(
        "ONNX Runtime library not found. Fix: run `bash scripts/setup.sh` (installs the onnxruntime wheel into .venv), \
         or pass --ort-lib /path/to/libonnxruntime.so, or set ORT_DYLIB_PATH"
    )
}

/// The version string the library reports (`OrtGetApiBase()->GetVersionString()`), without initializing ort.
pub fn library_version(path: &Path) -> anyhow::Result<String> {
    #[repr(C)]
    struct ApiBase {
        get_api: unsafe extern "C" fn(u32) -> *const std::ffi::c_void,
        get_version_string: unsafe extern "C" fn() -> *const std::ffi::c_char,
    }
    // SAFETY: loading ONNX Runtime runs no user code; the symbol has this C signature in every release.
    unsafe {
        let lib = libloading::Library::new(path).with_context(|| format!("cannot load {}", path.display()))?;
        let get: libloading::Symbol<unsafe extern "C" fn() -> *const ApiBase> =
            lib.get(b"OrtGetApiBase").with_context(|| format!("{} has no OrtGetApiBase", path.display()))?;
        let base = get();
        anyhow::ensure!(!base.is_null(), "OrtGetApiBase returned null");
        let v = std::ffi::CStr::from_ptr(((*base).get_version_string)()).to_string_lossy().into_owned();
        std::mem::forget(lib); // keep it loaded: ort may use the same library
        Ok(v)
    }
}

impl OrtTarget {
    pub fn new(explicit: Option<&Path>) -> anyhow::Result<OrtTarget> {
        let choice = find_library(explicit)?;
        let version = library_version(&choice.path)?;
        let env = ort::init_from(&choice.path)
            .map_err(|e| anyhow::anyhow!("cannot load ONNX Runtime from {}: {e}", choice.path.display()))?
            .with_name("oatest")
            .with_telemetry(false)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot create the ONNX Runtime environment: {e}"))?;
        Ok(OrtTarget { env, version, probes: ProbeCache::default() })
    }

    fn session(&self, model: &[u8], config: &Config, log: Arc<Mutex<PassLog>>) -> ort::Result<Session> {
        let level = match config.level {
            Level::Disable => GraphOptimizationLevel::Disable,
            Level::Basic => GraphOptimizationLevel::Level1,
            Level::Extended => GraphOptimizationLevel::Level2,
            Level::Layout => GraphOptimizationLevel::Level3,
            Level::All => GraphOptimizationLevel::All,
        };
        let logger: LoggerFunction = Arc::new(move |_lvl, _cat, _id, _loc, msg: &str| {
            if let Some((name, modified)) = parse_transformer_call(msg) {
                let mut log = log.lock().unwrap();
                if modified && !log.fired.iter().any(|n| n == name) {
                    log.fired.push(name.to_string());
                }
                if !log.ran.iter().any(|n| n == name) {
                    log.ran.push(name.to_string());
                }
            }
        });
        let mut b = Session::builder(&self.env)?
            .with_logger(logger)?
            .with_log_level(LogLevel::Info)?
            .with_optimization_level(level)?
            .with_intra_threads(config.threads)?
            .with_inter_threads(1)?;
        if !config.disabled.is_empty() {
            // a pass is disabled under every name it runs as (TransposeOptimizer runs twice)
            let mut names: Vec<String> = Vec::new();
            for n in config.disabled.iter().flat_map(|d| super::rules::instances(d)) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            // ORT 1.19 refuses a config value over 2048 bytes (1.31 does not): then only the provider instances ORT is
            // known to run are named
            if names.join(";").len() > MAX_CONFIG_VALUE {
                names.retain(|n| {
                    super::rules::canonical(n) == n || super::rules::KNOWN_EP_INSTANCES.contains(&n.as_str())
                });
            }
            b = b.with_disabled_optimizers(names.join(";"))?;
        }
        for (k, v) in config.session_entries() {
            b = b.with_config_entry(k, v)?;
        }
        for (name, size) in config.dim_overrides() {
            b = b.with_dimension_override(name, size)?;
        }
        if let Some(p) = &config.save_optimized {
            b = b.with_optimized_model_path(p)?;
        }
        b.commit_from_memory(model)
    }
}

pub use super::rules::RULE_CONTAINERS;

impl OrtTarget {
    /// The rewrite rules that fired, for each rule container in `fired`: one extra session per rule, with every
    /// other rule of the container disabled (one per model: another configuration that needs the same session
    /// reads its answer).
    fn fired_rules(&mut self, model: &[u8], config: &Config, fired: &[String]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (container, rules) in RULE_CONTAINERS.iter().filter(|(c, _)| fired.iter().any(|f| f == c)) {
            let wanted =
                |r: &&&str| config.rules_of_interest.is_empty() || config.rules_of_interest.iter().any(|w| w == **r);
            for rule in rules.iter().filter(|r| !config.disabled.iter().any(|d| d == **r)).filter(wanted) {
                let mut c = config.clone();
                c.save_optimized = None;
                c.attribute_rules = false;
                c.rules_of_interest.clear();
                c.level = attribution_level(container, config.level);
                c.disabled.extend(rules.iter().filter(|r| *r != rule).map(|r| r.to_string()));
                let fires = match self.probes.of(model).get(&c) {
                    Some(&known) => known,
                    None => {
                        let probe = Arc::new(Mutex::new(PassLog::default()));
                        let fires = self.session(model, &c, probe.clone()).is_ok()
                            && probe.lock().unwrap().fired.iter().any(|p| p == container);
                        self.probes.of(model).insert(c, fires);
                        fires
                    }
                };
                if fires && !out.iter().any(|o| o == rule) {
                    out.push(rule.to_string());
                }
            }
        }
        out
    }
}

/// The level of a session that attributes the rules of `container` for a session at `level`: ORT applies level 1
/// before partitioning and each higher level after it, once, so whether a rule of the level-1 container fires is
/// decided in a level-1 session, one of the level-2 container in a level-2 session (no fusions, layout changes or
/// NCHWc transformers after it, which a session at a higher level spends its creation time on too).
fn attribution_level(container: &str, level: Level) -> Level {
    match (container, level) {
        ("Level1_RuleBasedTransformer", Level::Extended | Level::Layout | Level::All) => Level::Basic,
        ("Level2_RuleBasedTransformer", Level::Layout | Level::All) => Level::Extended,
        (_, level) => level,
    }
}

/// The passes a session's log reported: every one that ran, and those that modified the graph.
#[derive(Default)]
struct PassLog {
    fired: Vec<String>,
    ran: Vec<String>,
}

/// `Some((name, modified))` for a log line reporting a call of transformer `name`.
pub fn parse_transformer_call(msg: &str) -> Option<(&str, bool)> {
    let rest = msg.trim().strip_prefix("GraphTransformer ")?;
    let (name, modified) = rest.split_once(" modified: ")?;
    Some((name.trim(), modified.split_whitespace().next()? == "1"))
}

/// `Some(name)` for a log line saying transformer `name` modified the graph.
pub fn parse_transformer_line(msg: &str) -> Option<&str> {
    parse_transformer_call(msg).and_then(|(name, modified)| modified.then_some(name))
}

impl Target for OrtTarget {
    fn name(&self) -> &'static str {
        "ort"
    }
    fn version(&self) -> String {
        self.version.clone()
    }
    fn default_configs(&self) -> Vec<Config> {
        vec![
            Config::level(Level::Disable),
            Config::level(Level::Basic),
            Config::level(Level::Extended),
            Config::level(Level::All),
        ]
    }
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let start = Instant::now();
        let log = Arc::new(Mutex::new(PassLog::default()));
        // the ort binding asserts on values ORT should never return (e.g. an output without a value): such a
        // panic is ORT misbehaving, reported as an error of this configuration in words that say what happened
        let result = caught(|| self.session(model, config, log.clone()).map_err(|e| e.to_string()))
            .unwrap_or_else(|p| Err(format!("session creation failed: the ort binding panicked: {p}")))
            .and_then(|mut s| match caught(|| run_session(&mut s, inputs)) {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(p) => Err(run_panic(&mut s, inputs, &p.0)),
            });
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        let PassLog { fired: mut passes_fired, ran: passes_ran } = std::mem::take(&mut *log.lock().unwrap());
        if config.attribute_rules {
            let rules = self.fired_rules(model, config, &passes_fired);
            passes_fired.extend(rules);
        }
        match result {
            Ok(outputs) => Outcome {
                target: "ort".into(),
                config: config.clone(),
                status: Status::Ok,
                outputs,
                passes_fired,
                passes_ran: passes_ran.clone(),
                time_ms,
            },
            Err(message) => Outcome {
                target: "ort".into(),
                config: config.clone(),
                status: Status::Error { message },
                outputs: Vec::new(),
                passes_fired,
                passes_ran: passes_ran.clone(),
                time_ms,
            },
        }
    }
}

/// A panic of the ort binding, by its message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Panicked(String);

/// `f()`, or the message of its panic.
fn caught<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        Panicked(
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        )
    })
}

/// What a panic of the binding while running a created session means. The binding panics reading the type of
/// an output value ORT returned empty: the optimized graph no longer computes that output (its producer was
/// removed); which output is found by running each alone.
fn run_panic(s: &mut Session, inputs: &[NamedTensor], panic: &str) -> String {
    let binding = format!("the ort binding panicked: {panic}");
    if !panic.contains("typeinfo_ptr") {
        return format!("the session was created, but running it failed: {binding}");
    }
    let names: Vec<String> = s.outputs().iter().map(|o| o.name().to_string()).collect();
    let empty = names.into_iter().find(|name| {
        let alone = || -> anyhow::Result<()> {
            let opts = RunOptions::new()?.with_outputs(OutputSelector::no_default().with(name.as_str()));
            s.run_with_options(feeds(inputs)?, &opts)?;
            Ok(())
        };
        caught(alone).is_err()
    });
    match empty {
        Some(name) => format!(
            "the session was created, but output '{name}' came back without a value or type information: the \
             optimized graph no longer produces it (its producer was removed) [{binding}]"
        ),
        None => format!(
            "the session was created, but an output came back without a value or type information: the optimized \
             graph no longer produces it [{binding}]"
        ),
    }
}

fn feeds(inputs: &[NamedTensor]) -> anyhow::Result<Vec<(Cow<'_, str>, SessionInputValue<'static>)>> {
    let mut values: Vec<(Cow<str>, SessionInputValue)> = Vec::with_capacity(inputs.len());
    for t in inputs {
        let v = to_ort(&t.tensor).map_err(|e| anyhow::anyhow!("input '{}': {e}", t.name))?;
        values.push((Cow::Borrowed(t.name.as_str()), v.into()));
    }
    Ok(values)
}

fn run_session(s: &mut Session, inputs: &[NamedTensor]) -> anyhow::Result<Vec<NamedTensor>> {
    let outputs = s.run(feeds(inputs)?)?;
    let mut out = Vec::new();
    for (name, v) in outputs.iter() {
        out.push(NamedTensor {
            name: name.to_string(),
            tensor: from_ort(&v).map_err(|e| anyhow::anyhow!("output '{name}': {e}"))?,
        });
    }
    Ok(out)
}

macro_rules! le_vec {
    ($raw:expr, $t:ty) => {
        $raw.chunks_exact(std::mem::size_of::<$t>())
            .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
            .collect::<Vec<$t>>()
    };
}

fn to_ort(t: &Tensor) -> anyhow::Result<DynValue> {
    use ort::value::Tensor as T;
    let shape = t.dims.clone();
    if let TensorData::Strings(s) = &t.data {
        let v: Vec<String> = s.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect();
        return Ok(T::from_string_array((shape, v.as_slice()))?.into_dyn());
    }
    let raw = t.raw().context("no raw data")?;
    Ok(match t.dtype {
        DType::F32 => T::from_array((shape, le_vec!(raw, f32)))?.into_dyn(),
        DType::F64 => T::from_array((shape, le_vec!(raw, f64)))?.into_dyn(),
        DType::F16 => T::from_array((shape, le_vec!(raw, half::f16)))?.into_dyn(),
        DType::I8 => T::from_array((shape, le_vec!(raw, i8)))?.into_dyn(),
        DType::U8 => T::from_array((shape, raw.to_vec()))?.into_dyn(),
        DType::I16 => T::from_array((shape, le_vec!(raw, i16)))?.into_dyn(),
        DType::U16 => T::from_array((shape, le_vec!(raw, u16)))?.into_dyn(),
        DType::I32 => T::from_array((shape, le_vec!(raw, i32)))?.into_dyn(),
        DType::U32 => T::from_array((shape, le_vec!(raw, u32)))?.into_dyn(),
        DType::I64 => T::from_array((shape, le_vec!(raw, i64)))?.into_dyn(),
        DType::U64 => T::from_array((shape, le_vec!(raw, u64)))?.into_dyn(),
        DType::Bool => T::from_array((shape, raw.iter().map(|&b| b != 0).collect::<Vec<bool>>()))?.into_dyn(),
        other => anyhow::bail!("inputs of type {other} are not supported"),
    })
}

fn from_ort(v: &DynValue) -> anyhow::Result<Tensor> {
    let ValueType::Tensor { ty, .. } = v.dtype() else { anyhow::bail!("not a tensor ({:?})", v.dtype()) };
    macro_rules! grab {
        ($t:ty, $d:expr) => {{
            let (shape, data) = v.try_extract_tensor::<$t>()?;
            let mut b = Vec::with_capacity(data.len() * std::mem::size_of::<$t>());
            data.iter().for_each(|x| b.extend(x.to_le_bytes()));
            Tensor { dtype: $d, dims: shape.to_vec(), data: TensorData::Raw(b) }
        }};
    }
    Ok(match ty {
        TensorElementType::Float32 => grab!(f32, DType::F32),
        TensorElementType::Float64 => grab!(f64, DType::F64),
        TensorElementType::Float16 => grab!(half::f16, DType::F16),
        TensorElementType::Int8 => grab!(i8, DType::I8),
        TensorElementType::Uint8 => grab!(u8, DType::U8),
        TensorElementType::Int16 => grab!(i16, DType::I16),
        TensorElementType::Uint16 => grab!(u16, DType::U16),
        TensorElementType::Int32 => grab!(i32, DType::I32),
        TensorElementType::Uint32 => grab!(u32, DType::U32),
        TensorElementType::Int64 => grab!(i64, DType::I64),
        TensorElementType::Uint64 => grab!(u64, DType::U64),
        TensorElementType::String => {
            let (shape, data) = v.try_extract_strings()?;
            Tensor {
                dtype: DType::Str,
                dims: shape.to_vec(),
                data: TensorData::Strings(data.into_iter().map(String::into_bytes).collect()),
            }
        }
        TensorElementType::Bool => {
            let (shape, data) = v.try_extract_tensor::<bool>()?;
            Tensor {
                dtype: DType::Bool,
                dims: shape.to_vec(),
                data: TensorData::Raw(data.iter().map(|&b| b as u8).collect()),
            }
        }
        other => anyhow::bail!("outputs of type {other:?} are not supported"),
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_transformer_line, Config, Level, ProbeCache};

    #[test]
    fn probe_answers_are_kept_for_one_model() {
        let mut cache = ProbeCache::default();
        cache.of(b"model a").insert(Config::level(Level::Basic), true);
        assert_eq!(cache.of(b"model a").get(&Config::level(Level::Basic)), Some(&true));
        assert_eq!(cache.of(b"model a").get(&Config::level(Level::Extended)), None);
        assert_eq!(cache.of(b"model b").get(&Config::level(Level::Basic)), None);
        assert_eq!(cache.of(b"model a").get(&Config::level(Level::Basic)), None);
    }

    #[test]
    fn transformer_log_lines_parse() {
        assert_eq!(parse_transformer_line("GraphTransformer ConstantFolding modified: 1"), Some("ConstantFolding"));
        assert_eq!(
            parse_transformer_line("GraphTransformer Level1_RuleBasedTransformer modified: 1 with status: OK"),
            Some("Level1_RuleBasedTransformer")
        );
        assert_eq!(parse_transformer_line("GraphTransformer Level1_RuleBasedTransformer modified: 0"), None);
        assert_eq!(parse_transformer_line("Removing initializer 'x'"), None);
    }
}
