//! What upstream knows about an entry: the known upstream issue it matches ([`super::known`]), and the affected
//! versions: the minimized test re-run with other builds of its compiler (ORT libraries, `--also-ort-lib`;
//! apache-tvm installations, `--also-tvm`; one worker process each, since a worker loads one build), and the
//! version that fixed it when the newest given build no longer shows it.

use super::known::{Facts, Known, KnownBugs};
use crate::compiler::worker::Worker;
use crate::compiler::{Config, Status};
use crate::triage::dd::Probe;
use crate::triage::{Minimized, Reproducer, Triaged};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A version's state when the minimized test shows the bug's symptom there.
pub const REPRODUCES: &str = "reproduces";
/// A version's state when both runs are clean and agree.
pub const NO: &str = "no";

/// bug.json's upstream fields (flattened into it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Upstream {
    /// The known upstream issue this entry matches (none: a new bug).
    #[serde(default)]
    pub known: Option<Known>,
    /// Per library version: `reproduces`, `no`, or what happened instead (another failure). Empty when no other
    /// build was given.
    #[serde(default)]
    pub versions: BTreeMap<String, String>,
    /// The oldest of the newest versions that no longer show it, when the newest given build does not.
    #[serde(default)]
    pub fixed_upstream: Option<String>,
}

impl Upstream {
    /// `known: <link>` or `new`.
    pub fn known_label(&self) -> String {
        match &self.known {
            Some(k) => format!("known: {} ({})", k.link, k.status),
            None => "new".into(),
        }
    }

    /// The index's cell: `fixed upstream in X`, `still in X` (the newest build shows it), or `-`.
    pub fn upstream_cell(&self) -> String {
        if let Some(v) = &self.fixed_upstream {
            return format!("fixed upstream in {v}");
        }
        let newest = self.versions.iter().max_by_key(|(k, _)| version_key(k));
        match newest {
            Some((v, s)) if s == REPRODUCES => format!("still in {v}"),
            Some((v, s)) => format!("{v}: {s}"),
            None => "-".into(),
        }
    }

    /// `1.19.2 reproduces, 1.31.1 no`, oldest first.
    pub fn versions_line(&self) -> String {
        let mut v: Vec<(&String, &String)> = self.versions.iter().collect();
        v.sort_by_key(|(k, _)| version_key(k));
        v.iter().map(|(k, s)| format!("{k} {s}")).collect::<Vec<_>>().join(", ")
    }
}

/// A version string as numbers, for ordering (`1.19.2` < `1.31.1`); text that is not a number sorts first.
fn version_key(v: &str) -> Vec<u64> {
    v.split(['.', '-', '+']).map_while(|p| p.parse().ok()).collect()
}

/// The version that fixed the bug: when the newest version does not show it and an older one does, the oldest
/// version of the clean run at the top.
pub fn fixed_upstream(versions: &BTreeMap<String, String>) -> Option<String> {
    let mut v: Vec<(&String, &String)> = versions.iter().filter(|(k, _)| !version_key(k).is_empty()).collect();
    v.sort_by_key(|(k, _)| version_key(k));
    if !v.iter().any(|(_, s)| *s == REPRODUCES) {
        return None;
    }
    let mut fixed = None;
    for (k, s) in v.iter().rev() {
        if *s != NO {
            break;
        }
        fixed = Some(k.to_string());
    }
    fixed
}

/// Another build of a compiler and its worker (started on first use).
struct Build {
    /// The target it is a build of: `ort` (an ONNX Runtime library) or `tvm` (a directory holding apache-tvm).
    target: &'static str,
    path: PathBuf,
    worker: Option<Worker>,
    /// Why its worker could not start (then it is not tried again).
    failed: Option<String>,
}

/// Labels filed entries with what upstream knows: the known-bugs file and the other builds.
#[derive(Default)]
pub struct Labeler {
    pub known: KnownBugs,
    builds: Vec<Build>,
}

/// The op of every node of `g` and of its control-flow bodies: one root cause, whether its nodes sit in the main
/// graph or in a Loop's body (the int32 zero point of #25001 inside a Loop was labelled new).
pub fn all_ops(g: &crate::graph::Graph) -> Vec<String> {
    let mut ops = Vec::new();
    for n in g.nodes_in_order().unwrap_or_default() {
        ops.push(n.op.name.clone());
        for (_, body) in n.subgraphs() {
            ops.extend(all_ops(body));
        }
    }
    ops
}

impl Labeler {
    /// `also_ort_libs`: other ONNX Runtime libraries; `also_tvm`: directories each holding another apache-tvm.
    pub fn new(known: KnownBugs, also_ort_libs: &[PathBuf], also_tvm: &[PathBuf]) -> Labeler {
        let build = |target, p: &PathBuf| Build { target, path: p.clone(), worker: None, failed: None };
        let ort = also_ort_libs.iter().map(|l| build("ort", l));
        let builds = ort.chain(also_tvm.iter().map(|d| build("tvm", d))).collect();
        Labeler { known, builds }
    }

    /// The known issue the minimized entry matches, and (confirmed entries) its state in every given build of its
    /// compiler.
    pub fn label(&mut self, r: &Reproducer, t: &Triaged, m: &Minimized) -> Upstream {
        let faulty = t.faulty();
        let ops = all_ops(&m.case.model.graph);
        let graph = super::words::node_list(&m.case.model);
        let known = self.known.find(&Facts {
            target: &r.finding.target,
            symptom: r.finding.symptom,
            faulty: &faulty,
            messages: &[t.detail.as_str(), r.finding.message.as_str()],
            ops: &ops,
            graph: &graph,
        });
        let mut versions = BTreeMap::new();
        let target = r.finding.target.as_str();
        if t.confirmed && self.builds.iter().any(|b| b.target == target) {
            versions.insert(r.finding.target_version.clone(), REPRODUCES.to_string());
            for b in self.builds.iter_mut().filter(|b| b.target == target) {
                let (version, state) = b.check(r, t, m);
                versions.entry(version).or_insert(state);
            }
        }
        let fixed_upstream = fixed_upstream(&versions);
        Upstream { known, versions, fixed_upstream }
    }
}

impl Build {
    /// (the build's version, whether the minimized test shows the symptom there).
    fn check(&mut self, r: &Reproducer, t: &Triaged, m: &Minimized) -> (String, String) {
        let name = self.path.display().to_string();
        if self.worker.is_none() && self.failed.is_none() {
            let mut spec = r.worker.spec().clone();
            match self.target {
                "tvm" => spec.python_path = Some(self.path.clone()),
                _ => spec.ort_lib = Some(self.path.clone()),
            }
            match Worker::start(spec) {
                Ok(w) => self.worker = Some(w),
                Err(e) => self.failed = Some(format!("cannot start a worker with {name}: {e:#}")),
            }
        }
        let Some(w) = self.worker.as_mut() else {
            return (name, self.failed.clone().unwrap_or_default());
        };
        let version = w.info.version.clone();
        let config = match Config::parse(&t.config) {
            Ok(c) => c,
            Err(e) => return (version, format!("cannot parse configuration {}: {e:#}", t.config)),
        };
        let reference = w.run(&m.model_bytes, &m.case.feeds, &r.finding.reference);
        if reference.status != Status::Ok {
            let why = reference.status.message().chars().take(120).collect::<String>();
            return (version, format!("the unoptimized run fails too ({}: {why})", reference.status.kind()));
        }
        let shown = w.run(&m.model_bytes, &m.case.feeds, &config);
        let state = match r.classify(&shown, Some(&reference)) {
            Probe::Symptom => REPRODUCES.to_string(),
            Probe::Clean => NO.to_string(),
            Probe::Unresolved => {
                let why = shown.status.message().chars().take(120).collect::<String>();
                format!("another symptom ({}: {why})", shown.status.kind())
            }
        };
        (version, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_fix_is_the_oldest_clean_version_above_the_last_one_that_shows_it() {
        assert_eq!(fixed_upstream(&map(&[("1.19.2", REPRODUCES), ("1.31.1", NO)])).as_deref(), Some("1.31.1"));
        // numeric order, not text order (1.9 < 1.19)
        let m = map(&[("1.9.0", REPRODUCES), ("1.19.2", REPRODUCES), ("1.20.1", NO), ("1.31.1", NO)]);
        assert_eq!(fixed_upstream(&m).as_deref(), Some("1.20.1"));
        // the newest still shows it, or no version shows it, or the newest fails otherwise: not fixed
        assert_eq!(fixed_upstream(&map(&[("1.19.2", NO), ("1.31.1", REPRODUCES)])), None);
        assert_eq!(fixed_upstream(&map(&[("1.19.2", NO), ("1.31.1", NO)])), None);
        assert_eq!(fixed_upstream(&map(&[("1.19.2", REPRODUCES), ("1.31.1", "another symptom (crash: x)")])), None);
        let u = Upstream { fixed_upstream: fixed_upstream(&m), versions: m, ..Default::default() };
        assert_eq!(u.versions_line(), "1.9.0 reproduces, 1.19.2 reproduces, 1.20.1 no, 1.31.1 no");
        assert_eq!(u.known_label(), "new");
        assert_eq!(u.upstream_cell(), "fixed upstream in 1.20.1");
        let still = Upstream { versions: map(&[("1.19.2", NO), ("1.31.1", REPRODUCES)]), ..Default::default() };
        assert_eq!(still.upstream_cell(), "still in 1.31.1");
        assert_eq!(Upstream::default().upstream_cell(), "-");
    }

    #[test]
    fn ops_inside_control_flow_bodies_count() {
        use crate::graph::{DType, Graph, Node, OpId, TensorType};
        let mut body = Graph::new("body");
        body.add_input("x", TensorType::new(DType::I32, &[2]));
        let dq = Node::new("dq", OpId::onnx("DequantizeLinear"), vec!["x".into(), "s".into()], vec!["y".into()]);
        body.add_node(dq).unwrap();
        body.add_output("y", TensorType::new(DType::F32, &[2]));
        let mut g = crate::ops::testutil::if_of(body);
        g.add_output("o", TensorType::new(DType::F32, &[2]));
        assert_eq!(all_ops(&g), ["If", "DequantizeLinear", "DequantizeLinear"]);
    }
}
