//! TVM Relax, embedded: the worker process hosts a Python interpreter (pyo3) that imports apache-tvm once and
//! loads oatest's Relax runner (the modules of [`RUNNER_SOURCES`], compiled into the binary), whose `run` serves
//! every request: ONNX model in, through `relax.frontend.onnx.from_onnx`, an explicit Relax pass pipeline per
//! configuration, the Relax VM, outputs and the passes a PassInstrument saw change the module.
//!
//! The runner's sources are data here whatever the features: the pattern check's cache key
//! ([`runner_fingerprint`]) and a TVM bug's repro.py ([`runner_bundle`]) need them too.

/// The Relax runner's Python modules, (module name, source), in dependency order: each imports only modules
/// before it. The last is the entry module (`run`, `version`, `optional_passes`).
pub const RUNNER_SOURCES: &[(&str, &str)] = &[
    // the pipeline and the placement of inserted passes, as data (python/oatest_tvm_pipeline.json)
    (
        "oatest_tvm_pipeline",
        concat!("DATA = r\"\"\"", include_str!("../../python/oatest_tvm_pipeline.json"), "\"\"\"\n"),
    ),
    // passes as data: recorded arguments rebuilt, placement of a pass outside the pipeline
    ("oatest_tvm_passes", include_str!("../../python/oatest_tvm_passes.py")),
    // what a spliced pattern's entry is called with: tensors, tuples, shapes, scalars
    ("oatest_tvm_feeds", include_str!("../../python/oatest_tvm_feeds.py")),
    // `--vary attr`'s variants of a pattern: one op call's axes written negative
    ("oatest_tvm_vary", include_str!("../../python/oatest_tvm_vary.py")),
    // Relax-level synthesis: a recipe's seed and pattern spliced into one module
    ("oatest_tvm_synth", include_str!("../../python/oatest_tvm_synth.py")),
    // the campaign's pattern check (shrink, splice, the pattern's module as JSON)
    ("oatest_tvm_check", include_str!("../../python/oatest_tvm_check.py")),
    // Relax-level reduction: a recipe as a module test, a module's structure, one edit made (triage's requests)
    ("oatest_tvm_reduce", include_str!("../../python/oatest_tvm_reduce.py")),
    // memos of legalization and TIR lowering (the same op calls and PrimFuncs recur across configurations and tests)
    ("oatest_tvm_memo", include_str!("../../python/oatest_tvm_memo.py")),
    // the pipeline, builds and `run`
    ("oatest_tvm", include_str!("../../python/oatest_tvm.py")),
];

/// A stable hash of every runner module's name and source: any change to the runner changes it.
pub fn runner_fingerprint() -> String {
    let all: String =
        RUNNER_SOURCES.iter().map(|(name, source)| format!("{name}\n{}\n{source}", source.len())).collect();
    crate::util::stable_hash(&all)
}

/// The runner as one self-contained Python text (the start of a TVM bug's repro.py, which then imports `run`
/// from the `oatest_tvm` module): each module's source executed as that module and registered in `sys.modules`
/// before the next, as the worker loads them. Needs only numpy and apache-tvm (and onnx for a test that is an
/// ONNX model or a recipe), no oatest files.
pub fn runner_bundle() -> String {
    bundle(RUNNER_SOURCES, "oatest's Relax runner")
}

/// `sources` ((module name, source), in dependency order) as one self-contained Python text that defines each
/// as its module (what [`runner_bundle`] does for the Relax runner; the ort-transformers runner too).
pub fn bundle(sources: &[(&str, &str)], what: &str) -> String {
    let names: Vec<String> = sources.iter().map(|(name, _)| format!("python/{name}.py")).collect();
    let mut s = format!(
        "# --- {what} ({}) ---\n\
         # each source runs as its module, registered in sys.modules before the next (they import each other)\n\
         import sys as _oatest_sys\n\
         import types as _oatest_types\n\n\n\
         def _oatest_module(name, source):\n    \
             module = _oatest_types.ModuleType(name)\n    \
             module.__file__ = name + \".py\"\n    \
             _oatest_sys.modules[name] = module\n    \
             exec(compile(source, module.__file__, \"exec\", dont_inherit=True), module.__dict__)\n\n\n",
        names.join(", ")
    );
    for (name, source) in sources {
        s += &format!("# --- python/{name}.py ---\n_oatest_module(\"{name}\", {})\n\n", python_str(source));
    }
    s
}

/// A Python string literal of `s`: a raw triple-quoted string (readable) when `s` allows one, else an escaped
/// string (JSON's escapes are Python's).
fn python_str(s: &str) -> String {
    if !s.contains("'''") && !s.ends_with(['\\', '\'']) {
        format!("r'''{s}'''")
    } else {
        serde_json::to_string(s).expect("a string serializes")
    }
}

/// The runner's pipeline as data (`python/oatest_tvm_pipeline.json`, which the runner itself reads): its passes
/// with the lowest level that runs each, and where a pass outside it is inserted for a test carrying one of its
/// patterns.
pub const PIPELINE_JSON: &str = include_str!("../../python/oatest_tvm_pipeline.json");

/// What a Relax pass is to oatest's TVM pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PassRole {
    /// In the pipeline, run by every configuration (the reference's too).
    Required,
    /// In the pipeline, from some level on; a configuration may leave it out.
    Optional,
    /// Outside the pipeline: inserted at its placement for tests carrying one of its patterns.
    Inserted,
    /// Neither in the pipeline nor placed: nothing runs it.
    Outside,
}

#[derive(Debug, serde::Deserialize)]
struct PlacementGroup {
    passes: std::collections::BTreeMap<String, (String, String)>,
}

#[derive(Debug, serde::Deserialize)]
struct PipelineData {
    pipeline: Vec<(String, String)>,
    placement: Vec<PlacementGroup>,
    #[serde(default)]
    by_design: Vec<ByDesign>,
    #[serde(default)]
    excluded: Vec<Excluded>,
    #[serde(default)]
    unhosted: Vec<ByDesign>,
}

/// A pass whose patterns are not synthesized from, and why (`excluded` in the pipeline data).
#[derive(Debug, serde::Deserialize)]
struct Excluded {
    pass: String,
    why: String,
}

/// A pass named by a list of the pipeline data (`by_design`: its results differ from the model's by design;
/// `unhosted`: its tests are never spliced into a host).
#[derive(Debug, serde::Deserialize)]
struct ByDesign {
    pass: String,
}

/// The pipeline data, parsed.
pub struct Pipeline {
    /// (pass, lowest level or `required`), in pipeline order.
    pub passes: Vec<(String, String)>,
    /// pass -> (`before` | `after`, anchor pass).
    pub placement: std::collections::BTreeMap<String, (String, String)>,
    /// Passes that change results by design (ToMixedPrecision): tests built for them are judged on crashes,
    /// errors and hangs only.
    pub by_design: Vec<String>,
    /// pass -> why its patterns are not synthesized from (TVM misbehaves on them outside any optimization).
    pub excluded: std::collections::BTreeMap<String, String>,
    /// Passes whose tests are never spliced into a host (FastMathTransform: it cannot take a call of a Relax
    /// function, and a host is one).
    pub unhosted: Vec<String>,
}

impl Pipeline {
    pub fn embedded() -> Pipeline {
        let d: PipelineData = serde_json::from_str(PIPELINE_JSON).expect("python/oatest_tvm_pipeline.json parses");
        let placement = d.placement.into_iter().flat_map(|g| g.passes).collect();
        let by_design = d.by_design.into_iter().map(|b| b.pass).collect();
        let excluded = d.excluded.into_iter().map(|e| (e.pass, e.why)).collect();
        let unhosted = d.unhosted.into_iter().map(|b| b.pass).collect();
        Pipeline { passes: d.pipeline, placement, by_design, excluded, unhosted }
    }

    pub fn role(&self, pass: &str) -> PassRole {
        match self.passes.iter().find(|(p, _)| p == pass) {
            Some((_, level)) if level == "required" => PassRole::Required,
            Some(_) => PassRole::Optional,
            None if self.placement.contains_key(pass) => PassRole::Inserted,
            None => PassRole::Outside,
        }
    }
}

/// Whether a test built for `pass` (a Relax pattern's) changes results by design (see [`Pipeline::by_design`]).
pub fn changes_results_by_design(pass: &str) -> bool {
    static BY_DESIGN: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    BY_DESIGN.get_or_init(|| Pipeline::embedded().by_design).iter().any(|p| p == pass)
}

/// Whether a test built for `pass` may be spliced into a host (see [`Pipeline::unhosted`]).
pub fn hostable_pass(pass: &str) -> bool {
    static UNHOSTED: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    !UNHOSTED.get_or_init(|| Pipeline::embedded().unhosted).iter().any(|p| p == pass)
}

/// A configuration option the runner reads (triage's checks of an error raised in a pass): the run stops, with an
/// error of its own, once the named pass ran for the last time without raising (python/oatest_tvm.py STOP_AFTER).
pub const STOP_AFTER: &str = "oatest.stop_after";

/// The configuration pass a runner error was raised in: the runner's PassInstrument names the outermost pipeline
/// or inserted pass running when the exception came out, as the message's prefix `[raised in PASS] `.
pub fn raised_in(message: &str) -> Option<&str> {
    pass_tag(message, "[raised in ").map(|(name, _)| name)
}

/// The Relax pass, run inside the configuration pass the error was raised in, that the error came out of:
/// `[raised in FuseTransposeMatmul] [within FuseOpsByPattern] ...` names FuseOpsByPattern.
pub fn raised_within(message: &str) -> Option<&str> {
    let (_, rest) = pass_tag(message, "[raised in ")?;
    pass_tag(rest, "[within ").map(|(name, _)| name)
}

/// The pass name of `message`'s leading tag `{open}NAME] ` and the text after the tag.
fn pass_tag<'a>(message: &'a str, open: &str) -> Option<(&'a str, &'a str)> {
    let rest = message.strip_prefix(open)?;
    let end = rest.find("] ")?;
    let name = &rest[..end];
    let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, &rest[end + 2..]))
}

#[cfg(feature = "tvm")]
pub use embedded::TvmTarget;

/// The target: the runner loaded into the worker's interpreter.
#[cfg(feature = "tvm")]
mod embedded {
    use crate::compiler::python::{Runner, RunnerSpec};
    use crate::compiler::{Config, Level, NamedTensor, Outcome, Target};

    pub struct TvmTarget(Runner);

    impl TvmTarget {
        pub fn new() -> anyhow::Result<TvmTarget> {
            // one runtime thread: the campaign parallelizes across workers
            if std::env::var_os("TVM_NUM_THREADS").is_none() {
                std::env::set_var("TVM_NUM_THREADS", "1");
            }
            let spec = RunnerSpec {
                target: "tvm",
                what: "TVM",
                package: "tvm",
                install: "apache-tvm",
                sources: super::RUNNER_SOURCES,
                // the runner reads one option, STOP_AFTER
                options: true,
            };
            Ok(TvmTarget(Runner::load(spec)?))
        }
    }

    impl Target for TvmTarget {
        fn name(&self) -> &'static str {
            "tvm"
        }
        fn version(&self) -> String {
            self.0.version.clone()
        }
        fn default_configs(&self) -> Vec<Config> {
            vec![Config::level(Level::Disable), Config::level(Level::All)]
        }
        /// The pipeline's optional passes, as the runner lists them.
        fn optional_passes(&self) -> Vec<String> {
            self.0.optional_passes.clone()
        }
        fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
            self.0.run(model, inputs, config)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pass_an_error_was_raised_in_is_read_from_its_prefix() {
        let m = "[raised in FuseTIR] TVMError: Tensor constants are not supported";
        assert_eq!(super::raised_in(m), Some("FuseTIR"));
        assert_eq!(super::raised_in("TVMError: [raised in FuseTIR] x"), None);
        assert_eq!(super::raised_in("[raised in a b] x"), None);
        assert_eq!(super::raised_in("[raised in ] x"), None);
        let nested = "[raised in FuseTransposeMatmul] [within FuseOpsByPattern] ValueError: Check failed";
        assert_eq!(super::raised_in(nested), Some("FuseTransposeMatmul"));
        assert_eq!(super::raised_within(nested), Some("FuseOpsByPattern"));
        assert_eq!(super::raised_within(m), None);
    }

    #[test]
    fn the_bundle_defines_every_runner_module_in_order() {
        let bundle = super::runner_bundle();
        let at: Vec<usize> = super::RUNNER_SOURCES
            .iter()
            .map(|(name, _)| bundle.find(&format!("_oatest_module(\"{name}\", r'''")).expect(name))
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "dependency order: {at:?}");
        assert!(super::RUNNER_SOURCES.iter().all(|(_, source)| bundle.contains(source)), "sources kept verbatim");
    }

    #[test]
    fn every_placement_is_anchored_in_the_pipeline() {
        let p = super::Pipeline::embedded();
        assert!(p.passes.len() > 20 && p.placement.len() > 20);
        for (pass, (pos, anchor)) in &p.placement {
            assert!(pos == "before" || pos == "after", "{pass}: {pos}");
            assert!(p.passes.iter().any(|(a, _)| a == anchor), "{pass}: anchor {anchor} is not a pipeline pass");
            assert_eq!(p.role(pass), super::PassRole::Inserted, "{pass} is both placed and in the pipeline");
        }
        assert_eq!(p.role("LegalizeOps"), super::PassRole::Required);
        assert_eq!(p.role("FuseOps"), super::PassRole::Optional);
        assert_eq!(p.role("NoSuchPass"), super::PassRole::Outside);
    }

    #[test]
    fn unhosted_passes_are_placed_passes_and_only_they_refuse_hosts() {
        let p = super::Pipeline::embedded();
        assert!(p.unhosted.contains(&"FastMathTransform".to_string()));
        for pass in &p.unhosted {
            assert_eq!(p.role(pass), super::PassRole::Inserted, "{pass}");
            assert!(!super::hostable_pass(pass), "{pass}");
        }
        assert!(super::hostable_pass("FuseOps") && !super::hostable_pass("MergeCompositeFunctions"));
    }

    #[test]
    fn a_source_a_raw_string_cannot_hold_is_escaped() {
        assert_eq!(super::python_str("a\\b"), "r'''a\\b'''");
        assert_eq!(super::python_str("x = '''q'''\n"), r#""x = '''q'''\n""#);
        assert_eq!(super::python_str("ends with \\"), r#""ends with \\""#);
        assert_eq!(super::python_str("x = 'q'"), r#""x = 'q'""#);
    }
}
