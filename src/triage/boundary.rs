//! Integers cast from floats at a rounding boundary: an integer or bool output that a Cast makes of a float value
//! differs by a whole unit when the float value sits on the boundary and the two runs round it one ULP apart (a
//! layer normalization of equal values is exactly 0, or a mean exactly 1, and a fused kernel lands one ULP below).
//! The float values the Casts read decide: returned too (the Casts stay, so the pass sees the graph it rewrote),
//! they are judged against the float64 evaluation ([`super::conditioning::refine_float64`]), and rounding there is
//! rounding here.

use super::classify::{Class, Classified};
use super::holds;
use super::reduce::Case;
use super::Reproducer;
use crate::compiler::{Outcome, Status};
use crate::graph::onnx;

/// `c` (an `optimizer` inconsistency of `case`), `precision` when every output that differs is an integer or
/// bool Cast of a float value, and those float values differ only by rounding.
pub fn refine(
    r: &mut Reproducer,
    c: Classified,
    case: &Case,
    unoptimized: &Outcome,
    optimized: &Outcome,
) -> Classified {
    if c.class != Class::Optimizer || r.finding.relax.is_some() || r.semantic.is_none() {
        return c;
    }
    let Some(part) = cast_inputs(case, unoptimized, optimized) else { return c };
    let bytes = onnx::encode_model(&part.model);
    let u = r.run(&bytes, &part.feeds, &unoptimized.config);
    let o = r.run(&bytes, &part.feeds, &optimized.config);
    let exact = r.semantic.as_mut().map(|s| s.run_float64(&bytes, &part.feeds));
    let (Some(Ok(exact)), Status::Ok, Status::Ok) = (exact, &u.status, &o.status) else { return c };
    // the float values only (the Casts stay, so the pass sees the graph it rewrote)
    let floats = |run: &Outcome| {
        let mut run = run.clone();
        run.outputs.retain(|t| !case.model.graph.outputs.contains(&t.name));
        run
    };
    let (u, o, exact) = (floats(&u), floats(&o), floats(&exact));
    let comparable = holds::outputs_without_quantized_ops(&part.model);
    let probe = Classified { class: Class::Optimizer, note: String::new() };
    let refined = super::conditioning::refine_float64(probe, r.oracle.tolerance, &u, &o, &exact, &comparable);
    if refined.class != Class::Precision {
        return c;
    }
    let note = refined.note.trim_start_matches("; ");
    Classified {
        class: Class::Precision,
        note: format!(
            "{}; the outputs that differ are integers cast from floats at a rounding boundary: {note}",
            c.note
        ),
    }
}

/// Ops that only move, repeat or reshape their first input's values.
const LAYOUT: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity", "Expand"];

/// `case` returning also the float value each differing output's Cast reads; None unless every differing output is
/// a non-float Cast of a float value (then maybe reshaped).
fn cast_inputs(case: &Case, unoptimized: &Outcome, optimized: &Outcome) -> Option<Case> {
    let g = &case.model.graph;
    let types = super::reduce::types_of(&case.model)?;
    let mut floats = Vec::new();
    for (u, o) in unoptimized.outputs.iter().zip(&optimized.outputs) {
        if u.tensor == o.tensor {
            continue;
        }
        // the Cast, through ops that only move or reshape its values
        let mut n = g.node(g.producer(&u.name)?.node);
        while LAYOUT.contains(&n.op.name.as_str()) {
            n = g.node(g.producer(n.inputs.first()?)?.node);
        }
        let input = n.inputs.first()?;
        let ty = types.get(input)?;
        if n.op.name != "Cast" || u.tensor.dtype.is_float() || !ty.dtype.is_float() {
            return None;
        }
        floats.push((input.clone(), ty.clone()));
    }
    if floats.is_empty() {
        return None;
    }
    let mut part = case.clone();
    for (v, ty) in floats {
        if !part.model.graph.outputs.contains(&v) {
            part.model.graph.add_output(&v, ty);
        }
    }
    Some(part)
}
