//! Known upstream bugs: the data file `data/known-bugs.toml` (or `--known FILE`), one entry per reported
//! issue, and the match of a filed entry against it (target, faulty passes, symptom, message and graph
//! patterns), so that triage labels an entry `known: <link>` instead of new.

use crate::finding::signature::pass_class;
use crate::oracle::Symptom;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The project's known-bugs file, relative to the project root.
pub const DEFAULT_FILE: &str = "data/known-bugs.toml";

/// One entry of the file, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// `ort`, `tvm` or `tract`.
    target: String,
    /// The faulty passes (ORT transformer or rewrite-rule names): each must be among the entry's faulty
    /// culprits (its culprits minus enablers); other culprits may come with them.
    culprits: Vec<String>,
    /// `crash`, `error`, `hang` or `inconsistency` (any when absent).
    #[serde(default)]
    symptom: Option<Symptom>,
    /// A regular expression searched in the entry's message (the detail triage recorded, else the finding's).
    #[serde(default)]
    message: Option<String>,
    /// Ops that must all appear in the minimized graph.
    #[serde(default)]
    ops: Vec<String>,
    /// A regular expression searched in the minimized graph's listing (`report::node_list`: one line per input,
    /// constant, node and output, e.g. `input  x: int8[2]` or `y = DequantizeLinear(x, s)`).
    #[serde(default)]
    graph: Option<String>,
    /// The upstream issue (or pull request) that reports it.
    link: String,
    /// `open`, `closed` (closed without a fix) or `fixed in X.Y.Z`.
    status: String,
    /// A one-line summary of the upstream report.
    #[serde(default)]
    title: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    bug: Vec<Entry>,
}

/// A compiled entry.
#[derive(Clone, Debug)]
struct Rule {
    entry: Entry,
    message: Option<regex::Regex>,
    graph: Option<regex::Regex>,
}

/// What a matched entry tells about a bug (bug.json's `known`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Known {
    pub link: String,
    pub status: String,
    #[serde(default)]
    pub title: String,
}

/// What an entry is matched on.
pub struct Facts<'a> {
    pub target: &'a str,
    pub symptom: Symptom,
    /// The faulty culprits (enablers left out).
    pub faulty: &'a [String],
    /// Messages the `message` pattern is searched in (any may match).
    pub messages: &'a [&'a str],
    pub ops: &'a [String],
    /// The minimized graph's listing.
    pub graph: &'a str,
}

/// The known bugs of one file.
#[derive(Clone, Debug, Default)]
pub struct KnownBugs {
    rules: Vec<Rule>,
    pub source: Option<PathBuf>,
}

impl KnownBugs {
    /// Reads and checks a known-bugs file; errors name the file and the entry.
    pub fn load(path: &Path) -> anyhow::Result<KnownBugs> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: not a valid known-bugs file", path.display())).map(|mut k| {
            k.source = Some(path.to_path_buf());
            k
        })
    }

    /// `path` when given, else the project's `data/known-bugs.toml` when there is one, else no known bugs.
    pub fn load_or_default(path: Option<&Path>) -> anyhow::Result<KnownBugs> {
        match path {
            Some(p) => Self::load(p),
            None => match crate::util::project_file(DEFAULT_FILE) {
                Some(p) => Self::load(&p),
                None => Ok(KnownBugs::default()),
            },
        }
    }

    pub fn parse(text: &str) -> anyhow::Result<KnownBugs> {
        let file: File = toml::from_str(text)?;
        let mut rules = Vec::new();
        for (i, e) in file.bug.into_iter().enumerate() {
            let at = format!("entry {} ({})", i + 1, e.link);
            anyhow::ensure!(!e.target.is_empty() && !e.link.is_empty(), "{at}: target and link are required");
            anyhow::ensure!(!e.culprits.is_empty(), "{at}: name the faulty pass(es) in `culprits`");
            anyhow::ensure!(
                e.message.is_some() || e.graph.is_some() || !e.ops.is_empty(),
                "{at}: give a `message` regex, `ops` or a `graph` regex (culprits alone match too much)"
            );
            anyhow::ensure!(
                e.status == "open"
                    || e.status == "closed"
                    || e.status.strip_prefix("fixed in ").is_some_and(|v| !v.is_empty()),
                "{at}: status must be `open`, `closed` or `fixed in <version>`, not `{}`",
                e.status
            );
            let compile = |what: &str, re: &Option<String>| -> anyhow::Result<Option<regex::Regex>> {
                re.as_deref().map(regex::Regex::new).transpose().with_context(|| format!("{at}: bad `{what}` regex"))
            };
            let (message, graph) = (compile("message", &e.message)?, compile("graph", &e.graph)?);
            rules.push(Rule { entry: e, message, graph });
        }
        Ok(KnownBugs { rules, source: None })
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first entry every given condition of which holds for `f`.
    pub fn find(&self, f: &Facts) -> Option<Known> {
        self.rules.iter().find(|r| r.matches(f)).map(|r| Known {
            link: r.entry.link.clone(),
            status: r.entry.status.clone(),
            title: r.entry.title.clone(),
        })
    }
}

impl Rule {
    fn matches(&self, f: &Facts) -> bool {
        let e = &self.entry;
        e.target == f.target
            // one pass's levels are one pass (LayerNormFusionL1 and L2)
            && e.culprits.iter().all(|c| f.faulty.iter().any(|p| pass_class(p) == pass_class(c)))
            && e.symptom.is_none_or(|s| s == f.symptom)
            && self.message.as_ref().is_none_or(|re| f.messages.iter().any(|m| re.is_match(m)))
            && e.ops.iter().all(|op| f.ops.contains(op))
            && self.graph.as_ref().is_none_or(|re| re.is_match(f.graph))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = r#"
[[bug]]
target = "ort"
culprits = ["FuseReluClip"]
symptom = "error"
message = "Unexpected data type for Clip 'min' input of 11"
ops = ["Relu", "Clip"]
link = "https://example.org/1"
status = "open"

[[bug]]
target = "ort"
culprits = ["QDQPropagationTransformer"]
graph = 'DequantizeLinear\(\w+, \w+\)'
link = "https://example.org/2"
status = "fixed in 1.20.0"
"#;

    fn facts<'a>(faulty: &'a [String], messages: &'a [&'a str], ops: &'a [String], graph: &'a str) -> Facts<'a> {
        Facts { target: "ort", symptom: Symptom::Error, faulty, messages, ops, graph }
    }

    #[test]
    fn entries_match_on_every_condition_they_give() {
        let k = KnownBugs::parse(FIXTURE).unwrap();
        assert_eq!(k.len(), 2);
        let relu = vec!["FuseReluClip".to_string()];
        let ops = vec!["Relu".to_string(), "Clip".to_string()];
        let msg = ["relu_clip_fusion.cc:83 Unexpected data type for Clip 'min' input of 11"];
        assert_eq!(k.find(&facts(&relu, &msg, &ops, "")).unwrap().link, "https://example.org/1");
        // another message, another op set, another pass, another symptom: no match
        assert!(k.find(&facts(&relu, &["of 10"], &ops, "")).is_none());
        // the project's file knows #23116 by its root cause, whatever the element type (int32 was labelled new)
        let project = KnownBugs::load(&crate::util::project_file(DEFAULT_FILE).unwrap()).unwrap();
        let int32 = ["relu_clip_fusion.cc:83 Unexpected data type for Clip 'min' input of 6"];
        assert!(project.find(&facts(&relu, &int32, &ops, "")).unwrap().link.ends_with("/23116"));
        assert!(k.find(&facts(&relu, &msg, &ops[..1], "")).is_none());
        assert!(k.find(&facts(&["Other".to_string()], &msg, &ops, "")).is_none());
        assert!(k.find(&Facts { symptom: Symptom::Crash, ..facts(&relu, &msg, &ops, "") }).is_none());
        assert!(k.find(&Facts { target: "tvm", ..facts(&relu, &msg, &ops, "") }).is_none());
        // an entry's passes may come with others; the graph pattern decides
        let qdq = vec!["QDQPropagationTransformer".to_string(), "QDQS8ToU8Transformer".to_string()];
        let hit = k.find(&facts(&qdq, &[], &[], "t = DequantizeLinear(x, s)\n")).unwrap();
        assert_eq!((hit.link.as_str(), hit.status.as_str()), ("https://example.org/2", "fixed in 1.20.0"));
        assert!(k.find(&facts(&qdq, &[], &[], "t = DequantizeLinear(x, s, z)\n")).is_none());
    }

    #[test]
    fn bad_files_are_refused_with_the_entry_named() {
        let no_pattern = "[[bug]]\ntarget = \"ort\"\nculprits = [\"A\"]\nlink = \"L\"\nstatus = \"open\"\n";
        assert!(format!("{:#}", KnownBugs::parse(no_pattern).unwrap_err()).contains("entry 1 (L)"));
        let status = FIXTURE.replace("fixed in 1.20.0", "done");
        assert!(format!("{:#}", KnownBugs::parse(&status).unwrap_err()).contains("status must be"));
        let regex = FIXTURE.replace(r"\w+, \w+\)", "(");
        assert!(format!("{:#}", KnownBugs::parse(&regex).unwrap_err()).contains("bad `graph` regex"));
        assert!(KnownBugs::parse("[[bug]]\ntarget = 1\n").is_err());
        assert!(KnownBugs::parse(
            &FIXTURE.replace("title", "x").replace("status = \"open\"", "status = \"open\"\nextra = 1")
        )
        .is_err());
    }

    #[test]
    fn the_projects_file_loads() {
        let path = crate::util::project_file(DEFAULT_FILE).expect("data/known-bugs.toml is part of the project");
        let k = KnownBugs::load(&path).unwrap();
        assert!(!k.is_empty());
    }

    /// #27845's uint8 default clamps a DequantizeLinear of any signed integers without a zero point: a review found
    /// the int32 form (seed 281) labelled new beside #25001's int32 zero point.
    #[test]
    fn the_projects_file_knows_a_uint8_default_clamping_int32_values() {
        let k = KnownBugs::load(&crate::util::project_file(DEFAULT_FILE).unwrap()).unwrap();
        let pass = vec!["QDQPropagationTransformer".to_string()];
        fn wrong<'a>(pass: &'a [String], graph: &'a str) -> Facts<'a> {
            Facts { target: "ort", symptom: Symptom::Inconsistency, faulty: pass, messages: &[], ops: &[], graph }
        }
        for dtype in ["int8", "int32"] {
            let graph = format!("input  x1: {dtype}[3,1,2,1]\nt = DequantizeLinear(x1, c6)\ny = Reshape(t, c4)\n");
            assert!(k.find(&wrong(&pass, &graph)).unwrap().link.ends_with("/27845"), "{dtype}");
        }
        let with_zero_point = "input  x1: int32[3,1,2,1]\nt = DequantizeLinear(x1, c6, z)\ny = Reshape(t, c4)\n";
        assert!(k.find(&wrong(&pass, with_zero_point)).is_none());
    }

    /// #15021 is a layer normalization fusion taking in the Cast to float before it (of float16, or float64 at level
    /// 2: seed 283), not any model holding a float16 value and a Cast (a broadcast-scale error was labelled so).
    #[test]
    fn the_projects_file_knows_a_leading_cast_by_what_reads_it() {
        let k = KnownBugs::load(&crate::util::project_file(DEFAULT_FILE).unwrap()).unwrap();
        let l2 = vec!["LayerNormFusionL2".to_string()];
        let ops: Vec<String> = ["Cast", "ReduceMean", "Sqrt"].map(String::from).to_vec();
        let msg = ["Failed to find kernel for LayerNormalization(1) (node:'/LayerNormFusion/')"];
        let absorbed = "c = Cast(x) {to=1}\nm = ReduceMean(c) {axes=[-1]}\nd = Sub(c, m)\n";
        assert!(k.find(&facts(&l2, &msg, &ops, absorbed)).unwrap().link.ends_with("/15021"));
        let elsewhere = "const k: float16[2]\nm = ReduceMean(x) {axes=[-1]}\nc = Cast(k) {to=1}\n";
        assert!(k.find(&facts(&l2, &msg, &ops, elsewhere)).is_none());
    }

    /// TVM entries are known by the pass that raised and its message (apache/tvm#20197: CombineParallelMatmul on
    /// 1-D operands); the other CombineParallelMatmul failure (a constant LHS) has no upstream report.
    #[test]
    fn the_projects_file_knows_a_tvm_bug_by_the_pass_that_raised() {
        let k = KnownBugs::load(&crate::util::project_file(DEFAULT_FILE).unwrap()).unwrap();
        let pass = vec!["CombineParallelMatmul".to_string()];
        let tvm = |m| Facts { target: "tvm", ..facts(&pass, m, &[], "") };
        let one_d = ["[raised in CombineParallelMatmul] IndexError: Index 1 out of bounds 1"];
        assert!(k.find(&tvm(&one_d)).unwrap().link.ends_with("apache/tvm/issues/20197"));
        let constant = ["[raised in CombineParallelMatmul] TypeError: Cannot treat type `ir.GenericConst` as type"];
        assert!(k.find(&tvm(&constant)).is_none());
        assert!(k.find(&Facts { target: "ort", ..tvm(&one_d) }).is_none());
    }
}
