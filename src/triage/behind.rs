//! A wrong value behind an error: a kernel that refuses what an optimized graph computed (a Gather index out of
//! range after an integer division was rewritten) is the same root cause as the wrong value itself, which other
//! findings show as a wrong result. When the node the error names, taken out with the values it read returned
//! instead, leaves the culprits computing a value the unoptimized run and onnx.reference disagree with, the
//! entry is keyed as that wrong result (one entry for both symptoms). A node the passes made (a fusion's) is not
//! in the model: the values the model computes are returned one at a time instead.

use super::classify::Class;
use super::reduce::{tidy, Case};
use super::Reproducer;
use crate::compiler::Status;
use crate::graph::onnx;
use crate::oracle::Symptom;

/// The name of the node an ORT run-time error was raised in (the outermost one: a control-flow node for an error
/// inside its body), from `... while running Gather node. Name:'g_3' Status Message: ...`.
pub fn failing_node(message: &str) -> Option<&str> {
    let rest = &message[message.find("while running ")?..];
    let name = &rest[rest.find("Name:'")? + 6..];
    name.split('\'').next().filter(|n| !n.is_empty())
}

/// What the culprits compute wrong before the error `message` of `case`, when they do: the wrong result's
/// detail (the values the failing node reads returned, the node taken out). A failing node the passes made (a
/// fused node: EmbedLayerNormalization refusing an index DivMulFusion computed wrong) is not in the model: each
/// value the model computes is returned in turn instead, at most [`MAX_VALUES`].
pub fn wrong_value(r: &mut Reproducer, case: &Case, culprits: &[String], message: &str) -> Option<String> {
    if r.finding.symptom != Symptom::Error || culprits.is_empty() || r.finding.relax.is_some() {
        return None;
    }
    let name = failing_node(message)?;
    let g = &case.model.graph;
    let types = super::reduce::types_of(&case.model)?;
    let parts: Vec<Case> = match g.node_ids().find(|&id| g.node(id).name == name) {
        Some(id) => {
            let mut part = case.clone();
            let node = part.model.graph.remove_node(id)?;
            let pg = &mut part.model.graph;
            pg.outputs.retain(|o| !node.outputs.contains(o));
            for v in node.reads() {
                let computed = pg.producer(&v).is_some();
                if computed && !pg.outputs.contains(&v) {
                    pg.add_output(&v, types.get(&v)?.clone());
                }
            }
            tidy(&mut part);
            vec![part]
        }
        None => {
            let computed = g.node_ids().flat_map(|id| g.node(id).outputs.clone());
            let values = computed.filter(|v| !v.is_empty() && !g.outputs.contains(v) && types.contains_key(v));
            values
                .take(MAX_VALUES)
                .map(|v| {
                    let mut part = case.clone();
                    part.model.graph.add_output(&v, types[&v].clone());
                    part
                })
                .collect()
        }
    };
    parts.iter().find_map(|part| wrong_in(r, part, culprits))
}

/// How many values of a model are returned in turn to find what a fused node read.
pub const MAX_VALUES: usize = 16;

/// The wrong result the culprits compute in `part`, if they do and the semantic reference blames them.
fn wrong_in(r: &mut Reproducer, part: &Case, culprits: &[String]) -> Option<String> {
    if part.model.graph.outputs.is_empty() {
        return None;
    }
    let bytes = onnx::encode_model(&part.model);
    let reference = r.run(&bytes, &part.feeds, &r.finding.reference.clone());
    let optimized = r.run(&bytes, &part.feeds, &r.config_enabling(culprits));
    if reference.status != Status::Ok || optimized.status != Status::Ok {
        return None;
    }
    let verdict = r.oracle.inconsistency_with(&reference, &optimized, &r.hints())?;
    (r.classify_case(part, &reference, &optimized).class == Class::Optimizer).then_some(verdict.detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_node_is_the_outermost_named_one() {
        let gather = "Non-zero status code returned while running Gather node. Name:'p1_word_gather' Status \
                      Message: indices element out of data bounds, idx=2 must be within the inclusive range [-2,1]";
        assert_eq!(failing_node(gather), Some("p1_word_gather"));
        let nested = "Non-zero status code returned while running Loop node. Name:'n3_Loop' Status Message: \
                      Non-zero status code returned while running Div node. Name:'d' Status Message: oops";
        assert_eq!(failing_node(nested), Some("n3_Loop"));
        assert_eq!(failing_node("Invalid model. Node input 'x' is not a graph input"), None);
    }
}
