//! The faulty pass among several culprits. A 1-minimal culprit set can hold passes that only make the faulty
//! one's pattern appear (EliminateIdentity renaming an output, QDQS8ToU8Transformer converting int8 to uint8).
//! Pass P is an *enabler* when the graph P alone produces (saved by the compiler) is still a correct program
//! and shows the symptom with the other culprits alone: the bug then needs P's output, not P. What is left is
//! the faulty pass. Needs a target that can save its optimized graph (ORT). When the saved graphs tell nothing, a
//! rewiring pass beside one that computes is the enabler ([`REWIRING`]).

use super::dd::Probe;
use super::reduce::Case;
use super::reproduce::Reproducer;
use crate::compiler::{Outcome, Status};

/// The culprits split into the faulty passes and their enablers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    pub faulty: Vec<String>,
    pub enablers: Vec<String>,
    /// Runs spent.
    pub runs: usize,
}

/// ORT passes that rewire consumers to another value (or merge equal values) and change no computation.
pub const REWIRING: &[&str] = &[
    "EliminateIdentity",
    "NoopElimination",
    "CastElimination",
    "CastChainElimination",
    "EliminateDropout",
    "ExpandElimination",
    "UnsqueezeElimination",
    "EliminateSlice",
    "ConstantSharing",
    "CommonSubexpressionElimination",
    "CommonSubexpressionEliminationApplyOnce",
    "RemoveDuplicateCastTransformer",
    "PreShapeNodeElimination",
];

/// The split when the saved graphs tell nothing: beside a pass that computes, a rewiring pass ([`REWIRING`]) is
/// its enabler. A fusion that leaves stale graph edges (DivMulFusion, Pad_Fusion and GemmTransposeFusion rewire an
/// input without its edge) breaks only when a rewiring pass follows the edges in the same session, and a saved
/// graph rebuilds them: a review found three such pairs filed with EliminateIdentity as a faulty pass.
fn rewiring_enablers(culprits: &[String]) -> Split {
    let (mut enablers, mut faulty): (Vec<String>, Vec<String>) =
        culprits.iter().cloned().partition(|p| REWIRING.contains(&p.as_str()));
    if faulty.is_empty() || enablers.is_empty() {
        // computing passes only, or rewiring ones only: the one that leaves a stale edge is faulty, the others
        // follow that edge (MatMul_BatchNormalization_Fusion counting DivMulFusion's stale edge as no reader,
        // folding a batch normalization into a value the Div still reads; EliminateIdentity renaming what
        // PreShapeNodeElimination pointed a Shape at: reviews found both filed with every pass faulty)
        let stale: Vec<&String> = culprits.iter().filter(|p| STALE_EDGES.contains(&p.as_str())).collect();
        if let ([one], true) = (&stale[..], culprits.len() > 1) {
            let others = culprits.iter().filter(|p| p != one).cloned().collect();
            return Split { faulty: vec![(*one).clone()], enablers: others, runs: 0 };
        }
        return Split { faulty: culprits.to_vec(), enablers: Vec::new(), runs: 0 };
    }
    // a rewiring pass that moves an input without its edge is the faulty one, and the pass that trips over the
    // stale edge its victim (PreShapeNodeElimination pointing a Shape at a Transpose that GemmTransposeFusion then
    // deletes as unread: a review)
    let stale: Vec<&String> = enablers.iter().filter(|p| STALE_EDGES.contains(&p.as_str())).collect();
    if let [one] = stale[..] {
        let one = one.clone();
        let others = culprits.iter().filter(|p| **p != one).cloned().collect();
        return Split { faulty: vec![one], enablers: others, runs: 0 };
    }
    // a stale edge is left by a pass that rewires an input without its edge; the other computing passes only
    // built what it rewrote (MatMulAddFusion making the Gemm that GemmTransposeFusion rewires: a review)
    let stale: Vec<String> = faulty.iter().filter(|p| STALE_EDGES.contains(&p.as_str())).cloned().collect();
    if stale.len() == 1 && faulty.len() > 1 {
        enablers.extend(faulty.iter().filter(|p| **p != stale[0]).cloned());
        faulty = stale;
    }
    Split { faulty, enablers, runs: 0 }
}

/// ORT fusions that replace a node's input without moving its graph edge (`graph_utils::ReplaceNodeInput`), found
/// in reviews: the edge goes stale, and a rewiring pass that follows it in the same session breaks the graph.
pub const STALE_EDGES: &[&str] = &["DivMulFusion", "Pad_Fusion", "GemmTransposeFusion", "PreShapeNodeElimination"];

impl Reproducer<'_> {
    /// Splits `culprits` of `case` into faulty passes and enablers. The pass an error was raised in (TVM) is the
    /// faulty one, the others its enablers. Otherwise, with fewer than two culprits, on a target that cannot save
    /// its graph, or when no culprit is an enabler, all are faulty; at least one stays faulty.
    pub fn split_enablers(&mut self, case: &Case, culprits: &[String]) -> Split {
        let all = Split { faulty: culprits.to_vec(), enablers: Vec::new(), runs: 0 };
        // the pass an error was raised in is the faulty one: the other culprits make what it fails on
        if let Some(p) = self.raised_in().filter(|p| culprits.contains(p)) {
            let enablers = culprits.iter().filter(|c| **c != p).cloned().collect();
            return Split { faulty: vec![p], enablers, runs: 0 };
        }
        if culprits.len() < 2 || self.finding.target != "ort" || self.finding.relax.is_some() {
            return if self.finding.target == "ort" { rewiring_enablers(culprits) } else { all };
        }
        let before = self.runs;
        let model = self.finding.bytes(case);
        let reference = self.run(&model, &case.feeds, &self.finding.reference.clone());
        if reference.status != Status::Ok {
            return rewiring_enablers(culprits);
        }
        let Ok(tmp) = tempfile::tempdir() else { return rewiring_enablers(culprits) };
        // greedily: take the first culprit that is an enabler on the current graph, continue from the graph
        // it produced with the rest (an enabler may only become one after another has run)
        let (mut graph, mut rest, mut enablers, mut saves) = (model.clone(), culprits.to_vec(), Vec::new(), 0);
        // every pass that runs at the level: a pass that did not fire may still fold what an enabler leaves
        // (a Q that QDQPropagationTransformer inserts, folded before QDQS8ToU8Transformer sees it)
        let level = self.passes_at_level();
        while rest.len() >= 2 {
            let mut found = None;
            for (p, only) in rest.iter().flat_map(|p| [(p, false), (p, true)]) {
                saves += 1;
                let path = tmp.path().join(format!("after-{saves}.onnx"));
                let others: Vec<String> = rest.iter().filter(|q| *q != p).cloned().collect();
                let mut c = self.config_enabling(std::slice::from_ref(p));
                if only {
                    let more: Vec<String> =
                        level.iter().filter(|q| *q != p && !c.disabled.contains(q)).cloned().collect();
                    c.disabled.extend(more);
                }
                if let Some(after) = self.enabled_graph(&graph, &case.feeds, c, &others, &path, &reference) {
                    found = Some((p.clone(), after));
                    break;
                }
            }
            let Some((p, after)) = found else { break };
            rest.retain(|q| *q != p);
            enablers.push(p);
            graph = after;
        }
        // a pass that changes the graph without saying so leaves it unresolved for the next one, which trips
        let silent = self.silent(&model, &case.feeds, &rest);
        if !silent.is_empty() && silent.len() < rest.len() {
            enablers.extend(rest.iter().filter(|p| !silent.contains(p)).cloned());
            rest = silent;
        }
        let runs = self.runs - before;
        if enablers.is_empty() {
            return Split { runs, ..rewiring_enablers(culprits) };
        }
        Split { faulty: rest, enablers, runs }
    }

    /// The graph a pass alone makes of `graph` under `c` (saved to `path`) when the pass is an enabler there: that
    /// graph runs unoptimized as the original does, and `others` alone show the symptom on it.
    fn enabled_graph(
        &mut self,
        graph: &[u8],
        feeds: &[crate::compiler::NamedTensor],
        mut c: crate::compiler::Config,
        others: &[String],
        path: &std::path::Path,
        reference: &Outcome,
    ) -> Option<Vec<u8>> {
        c.save_optimized = Some(path.to_path_buf());
        if self.run(graph, feeds, &c).status != Status::Ok {
            return None;
        }
        let after = std::fs::read(path).ok()?;
        let plain = self.run(&after, feeds, &self.finding.reference.clone());
        if !self.equivalent(reference, &plain) {
            return None;
        }
        let shown = self.run(&after, feeds, &self.config_enabling(others));
        (self.classify(&shown, Some(&plain)) == Probe::Symptom).then_some(after)
    }

    /// The culprits among `culprits` that change the graph without reporting it: with the other culprits off, the
    /// pass reports no change, yet the graph it saves differs from the one saved with it off too. ORT then skips
    /// resolving the graph the next pass reads, which trips on it (a review found MatmulTransposeFusion's half-done
    /// reorder crashing NchwcTransformer, filed with both as faulty). Such a pass is faulty; the one it trips is not.
    fn silent(&mut self, model: &[u8], feeds: &[crate::compiler::NamedTensor], culprits: &[String]) -> Vec<String> {
        if culprits.len() < 2 {
            return Vec::new();
        }
        let Ok(tmp) = tempfile::tempdir() else { return Vec::new() };
        let saved = |r: &mut Self, off: &[String], name: &str| -> Option<(Outcome, Vec<u8>)> {
            let mut c = r.finding.config.clone();
            c.disabled.extend(off.iter().cloned());
            c.save_optimized = Some(tmp.path().join(name));
            let o = r.run(model, feeds, &c);
            let bytes = std::fs::read(tmp.path().join(name)).ok()?;
            (o.status == Status::Ok).then_some((o, bytes))
        };
        let Some((_, none)) = saved(self, culprits, "none.onnx") else { return Vec::new() };
        let mut silent = Vec::new();
        for p in culprits {
            let others: Vec<String> = culprits.iter().filter(|q| *q != p).cloned().collect();
            let Some((o, bytes)) = saved(self, &others, &format!("{p}.onnx")) else { continue };
            // a pass of several instances (TransposeOptimizer_CPUExecutionProvider) reports for each
            let reported = o.passes_fired.iter().any(|f| f == p || f.starts_with(&format!("{p}_")));
            if o.passes_ran.contains(p) && !reported && bytes != none {
                silent.push(p.clone());
            }
        }
        silent
    }

    /// Whether `other` (a run of a transformed graph) computes what `reference` (the original's) does.
    fn equivalent(&self, reference: &Outcome, other: &Outcome) -> bool {
        other.status == Status::Ok && self.oracle.inconsistency_with(reference, other, &self.hints()).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beside_a_pass_that_computes_a_rewiring_pass_is_the_enabler() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let s = rewiring_enablers(&names(&["DivMulFusion", "EliminateIdentity"]));
        assert_eq!((s.faulty, s.enablers), (names(&["DivMulFusion"]), names(&["EliminateIdentity"])));
        // only rewiring passes, or none: all stay faulty
        let only = names(&["ConstantSharing", "EliminateIdentity"]);
        assert_eq!(rewiring_enablers(&only).faulty, only);
        let none = names(&["ConstantFolding", "LayerNormFusionL1"]);
        assert_eq!((rewiring_enablers(&none).faulty, rewiring_enablers(&none).enablers), (none, vec![]));
        // computing passes only, one leaving a stale edge: it is faulty, the pass following that edge its victim
        let s = rewiring_enablers(&names(&["DivMulFusion", "MatMul_BatchNormalization_Fusion"]));
        assert_eq!((s.faulty, s.enablers), (names(&["DivMulFusion"]), names(&["MatMul_BatchNormalization_Fusion"])));
        // rewiring passes only, one leaving a stale edge: it is faulty
        let s = rewiring_enablers(&names(&["NoopElimination", "EliminateIdentity", "PreShapeNodeElimination"]));
        assert_eq!(s.faulty, names(&["PreShapeNodeElimination"]));
        assert_eq!(s.enablers, names(&["NoopElimination", "EliminateIdentity"]));
    }
}
