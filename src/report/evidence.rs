//! What ties two entries to one root cause whatever their symptoms ([`super::related`] weighs it): the upstream
//! report both match, the ops of the minimized model, the producer of a value the failure lost, the reader where a
//! Relax error surfaced, and whether the failing value is returned and read.

use super::record::BugRecord;
use std::path::Path;

/// What ties two entries to one root cause whatever their symptoms: the upstream report both match, and the ops
/// of the minimized model (sorted, with repeats; none for a test that is no ONNX model).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    pub known: Option<String>,
    pub ops: Option<Vec<String>>,
    /// For an error that names a lost value (a node reads it, or an output was, but nothing produces it any more):
    /// the op type that produced it in the minimized model (the node the pass removed but should have kept).
    pub lost: Option<String>,
    /// For a Relax module test: the op of main's last binding, the reader where an error of the pass surfaced.
    pub reader: Option<String>,
    /// The failure is on a value the minimized model both returns and reads (an intermediate the pass consumed):
    /// lost, or wrong.
    pub returned: bool,
}

impl Evidence {
    /// The evidence of a minimized `model` that fails with `detail` (classified with `note`), whose upstream report
    /// is `known`. A wrong result whose optimized graph reads a value nothing defines lost that value too (the note
    /// names it): EmbedLayerNormFusion's removed Add, returned from a Scan body, was an entry beside its error.
    pub fn of(model: Option<&crate::graph::Model>, detail: &str, note: &str, known: Option<String>) -> Evidence {
        let named = crate::finding::signature::lost_value(detail).or(crate::finding::signature::lost_value(note));
        let lost = named.and_then(|v| producer_op(&model?.graph, v));
        let failing =
            crate::finding::signature::lost_value(detail).or(crate::finding::signature::deviating_output(detail));
        let returned = match (model, failing) {
            (Some(m), Some(v)) => returned_and_read(&m.graph, v),
            _ => false,
        };
        Evidence { known, ops: model.map(|m| ops_of(&m.graph)), lost, reader: None, returned }
    }

    /// The evidence of a minimized Relax module test (its TVMScript `script`): the Relax ops its bindings call.
    pub fn of_module(script: &str, known: Option<String>) -> Evidence {
        // main's body: up to the next function's decorator
        let main = script.split_once("def main(").map(|(_, m)| m.split("\n    @").next().unwrap_or(m));
        let reader = main.and_then(|m| binding_ops(m).last().cloned());
        Evidence { known, ops: Some(relax_ops(script)), lost: None, reader, returned: false }
    }

    /// The ops without the reader (one of it), when there is one.
    pub(super) fn before_reader(&self) -> Option<Vec<String>> {
        let mut ops = self.ops.clone()?;
        let at = ops.iter().position(|o| Some(o) == self.reader.as_ref())?;
        ops.remove(at);
        Some(ops)
    }

    /// The evidence of the entry in `dir`: its bug.json's known report, its model.onnx's ops (or its module.py's).
    pub(super) fn of_entry(dir: &Path, rec: &BugRecord) -> Evidence {
        let known = rec.upstream.known.as_ref().map(|k| k.link.clone());
        if let Ok(script) = std::fs::read_to_string(dir.join("module.py")) {
            return Evidence::of_module(&script, known);
        }
        let model = crate::graph::onnx::load(&dir.join("model.onnx")).ok();
        Evidence::of(model.as_ref(), &rec.triage.detail, &rec.triage.class_note, known)
    }
}

/// Whether `g` returns `v` and a node reads it too, in `g` or, for an output of a control-flow node, in the body
/// that computes it (MatMul_BatchNormalization_Fusion losing a returned Transpose output inside an If branch).
fn returned_and_read(g: &crate::graph::Graph, v: &str) -> bool {
    if !g.outputs.iter().any(|o| o == v) {
        return false;
    }
    if !g.consumers(v).is_empty() {
        return true;
    }
    let Some(at) = g.producer(v) else { return false };
    let n = g.node(at.node);
    let Some(slot) = n.body_output(at.slot) else { return false };
    n.subgraphs().any(|(_, b)| b.outputs.get(slot).is_some_and(|inner| returned_and_read(b, inner)))
}

/// The Relax ops the bindings of a TVMScript module call (`v: T = R.nn.conv2d(...)` gives `nn.conv2d`), sorted,
/// with repeats: a binding's value is the first `R.` call after its ` = `.
pub fn relax_ops(script: &str) -> Vec<String> {
    let mut ops = binding_ops(script);
    ops.sort();
    ops
}

/// The Relax ops of `script`'s bindings in their order.
fn binding_ops(script: &str) -> Vec<String> {
    script
        .lines()
        .filter_map(|l| {
            let value = l.split_once(" = ")?.1.trim_start();
            let call = value.strip_prefix("R.")?;
            let name = &call[..call.find('(')?];
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.').then(|| name.to_string())
        })
        .collect()
}

/// The op type of the node of `g` (or of a body in it, however deep) that produces `value`; for an output of a
/// control-flow node, the op that computes it in a body (not an Identity returning a constant): a fusion removes a
/// node inside a branch, and the If's output is lost with it (EmbedLayerNormFusion's Add, lost as an If output and
/// as a node's input, was two entries).
fn producer_op(g: &crate::graph::Graph, value: &str) -> Option<String> {
    if let Some(at) = g.producer(value) {
        let n = g.node(at.node);
        let inner = n.body_output(at.slot).and_then(|slot| {
            n.subgraphs().filter_map(|(_, b)| producer_op(b, b.outputs.get(slot)?)).find(|op| op != "Identity")
        });
        return Some(inner.unwrap_or_else(|| n.op.name.clone()));
    }
    g.node_ids()
        .flat_map(|id| g.node(id).subgraphs().map(|(_, b)| b).collect::<Vec<_>>())
        .find_map(|b| producer_op(b, value))
}

/// The op types of `g`'s nodes, sorted, with repeats.
pub fn ops_of(g: &crate::graph::Graph) -> Vec<String> {
    let mut ops: Vec<String> = g.node_ids().map(|id| g.node(id).op.name.clone()).collect();
    ops.sort();
    ops
}
