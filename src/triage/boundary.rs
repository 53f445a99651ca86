//! Integers cast from floats at a rounding boundary: an integer or bool output that a Cast makes of a float value
//! differs by a whole unit when the float value sits on the boundary and the two runs round it one ULP apart (a
//! layer normalization of equal values is exactly 0, or a mean exactly 1, and a fused kernel lands one ULP below).
//! The float values the Casts read decide: returned too (the Casts stay, so the pass sees the graph it rewrote),
//! they are judged against the float64 evaluation ([`super::conditioning::refine_float64`]), and rounding there is
//! rounding here; under a configuration that approximates by design, against the model evaluated with that
//! approximation first.

use super::classify::{Class, Classified};
use super::holds;
use super::reduce::Case;
use super::Reproducer;
use crate::compiler::{Outcome, Status};
use crate::graph::onnx;

/// `c` (an `optimizer` inconsistency of `case`), `precision` when the outputs that differ are integers or bools
/// computed from float values (a Cast, a comparison), or floats, and all those float values differ only by rounding.
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
    let Some((part, followed)) = float_sources(case, unoptimized, optimized) else { return c };
    let bytes = onnx::encode_model(&part.model);
    let u = r.run(&bytes, &part.feeds, &unoptimized.config);
    let o = r.run(&bytes, &part.feeds, &optimized.config);
    let exact = r.semantic.as_mut().map(|s| s.run_float64(&bytes, &part.feeds));
    let (Some(Ok(exact)), Status::Ok, Status::Ok) = (exact, &u.status, &o.status) else { return c };
    // the float values only, not the steps' results (the Casts stay, so the pass sees the graph it rewrote)
    let floats = |run: &Outcome| {
        let mut run = run.clone();
        run.outputs.retain(|t| t.tensor.dtype.is_float() && !followed.contains(&t.name));
        run
    };
    let (u, o, exact) = (floats(&u), floats(&o), floats(&exact));
    // under a configuration that approximates by design, the floats are the approximation's (an approximated Gelu
    // of -5 is -0 where ORT's tanh saturates one ULP early, and its Floor 0 instead of -1)
    let all = crate::compiler::named::approximations(&optimized.config);
    if !all.is_empty() {
        let hints = crate::oracle::Hints::of(&part.model.graph);
        let probe = Classified { class: Class::Optimizer, note: String::new() };
        let semantic = &mut r.semantic;
        let evaluate =
            |names: &[String]| semantic.as_mut()?.run_approximated(&bytes, &part.feeds, names).ok().map(|a| floats(&a));
        let refined = super::approximated::refine_by_approximations(&r.oracle, &hints, probe, [&u, &o], &all, evaluate);
        if refined.class == Class::Approximated {
            return Classified {
                class: Class::Approximated,
                note: format!(
                    "{}; the outputs that differ are steps of floats (Sign, Floor) or integers cast from floats, and \
                     the floats they read: {}",
                    c.note,
                    refined.note.trim_start_matches("; ")
                ),
            };
        }
    }
    let comparable = holds::outputs_without_quantized_ops(&part.model);
    let probe = Classified { class: Class::Optimizer, note: String::new() };
    let refined = super::conditioning::refine_float64(probe, r.oracle.tolerance, &u, &o, &exact, &comparable, None);
    if refined.class != Class::Precision {
        return c;
    }
    let note = refined.note.trim_start_matches("; ");
    Classified {
        class: Class::Precision,
        note: format!(
            "{}; the outputs that differ are integers cast from floats, or steps of floats (Sign, Floor), at a \
             rounding boundary: {note}",
            c.note
        ),
    }
}

/// Whether float value `v` is a whole number of steps: a result of [`holds::FLOAT_STEPS`] (Sign, Floor: one ULP
/// of rounding in the input moves it by a whole unit, as a Cast to an integer does; a review found an approximated
/// Gelu of -1e-6 rounded to -0, and its Sign 0 instead of -1, filed as a bug) or of a DequantizeLinear (a whole
/// number of quantization steps), or one moved (reshaped, sliced) from such a result.
fn discrete(g: &crate::graph::Graph, v: &str, depth: usize) -> bool {
    let Some(at) = g.producer(v) else { return false };
    let n = g.node(at.node);
    holds::FLOAT_STEPS.contains(&n.op.name.as_str())
        || n.op.name == "DequantizeLinear"
        || (depth < 16
            && holds::MOVES.contains(&n.op.name.as_str())
            && n.inputs.first().is_some_and(|x| discrete(g, x, depth + 1)))
}

/// `case` returning also the float values its differing outputs are computed from: following the differing
/// outputs back through integer and bool values (casts, reshapes, slices, pads, integer arithmetic) and the
/// [`discrete`] floats to the float values they read (another differing float output is compared as it is), with the
/// values followed; None when a differing output followed is computed by control flow, or none differs.
fn float_sources(
    case: &Case,
    unoptimized: &Outcome,
    optimized: &Outcome,
) -> Option<(Case, std::collections::HashSet<String>)> {
    let g = &case.model.graph;
    let types = super::reduce::types_of(&case.model)?;
    let is_float = |v: &str| types.get(v).is_some_and(|t| t.dtype.is_float()) && !discrete(g, v, 0);
    let mut todo = Vec::new();
    for (u, o) in unoptimized.outputs.iter().zip(&optimized.outputs) {
        if u.tensor != o.tensor && !is_float(&u.name) {
            todo.push(u.name.clone());
        }
    }
    let (mut floats, mut seen) = (Vec::new(), std::collections::HashSet::new());
    while let Some(v) = todo.pop() {
        if !seen.insert(v.clone()) {
            continue;
        }
        let Some(at) = g.producer(&v) else { continue };
        let n = g.node(at.node);
        if n.subgraphs().next().is_some() {
            return None;
        }
        // a graph input or an initializer (a scale) is the same in both runs
        for x in n.reads().into_iter().filter(|x| g.producer(x).is_some()) {
            if is_float(&x) {
                if !floats.contains(&x) {
                    floats.push(x);
                }
            } else {
                todo.push(x);
            }
        }
    }
    if floats.is_empty() || seen.is_empty() {
        return None;
    }
    let mut part = case.clone();
    for v in floats {
        if !part.model.graph.outputs.contains(&v) {
            part.model.graph.add_output(&v, types.get(&v)?.clone());
        }
    }
    Some((part, seen))
}
