//! Triage beyond one search: a finding two passes each show on their own gets an entry for each, and one no
//! culprit search explains on its original model is triaged again as its minimized one.

use super::classify::Class;
use super::reduce::{Case, Limits};
use super::{triage, Minimized, Reproducer, Triaged};
use crate::graph::onnx;

/// [`triage`], and for a finding that two passes each show on their own an entry for each. The first search
/// names one of them, whose disabling with the other passes on leaves the symptom (the filing gate makes that
/// `unattributed`): the finding is then triaged again with it disabled, which names the other, and once more
/// with the other disabled. Each entry names the other pass in `also_faulty`.
pub fn triage_all(r: &mut Reproducer, limits: Limits) -> Vec<(Triaged, Minimized)> {
    let first = triage(r, limits);
    let first = again_minimized(r, limits, first);
    if first.0.class != Class::Unattributed || first.0.culprits.is_empty() {
        return vec![first];
    }
    let one = first.0.culprits.clone();
    let mut second = triage_without(r, limits, &one);
    if second.0.class != Class::Optimizer || second.0.culprits.iter().any(|p| one.contains(p)) {
        return vec![first];
    }
    let two = second.0.culprits.clone();
    second.0.also_faulty = one.clone();
    let mut again = triage_without(r, limits, &two);
    if again.0.class != Class::Optimizer || again.0.culprits != one {
        return vec![second];
    }
    again.0.also_faulty = two;
    vec![again, second]
}

/// A finding no culprit search explains on its original model, triaged again as its minimized one, where fewer
/// passes fire (a review found LayerNormFusionL1's type error unattributed: other fusions failed alike in the
/// original, only its pattern was left in the minimized model).
fn again_minimized(r: &mut Reproducer, limits: Limits, first: (Triaged, Minimized)) -> (Triaged, Minimized) {
    let nodes = |c: &Case| c.model.graph.node_ids().count();
    let fewer = nodes(&first.1.case) < nodes(&r.finding.case) && r.finding.relax.is_none();
    if first.0.class != Class::Unattributed || !first.0.culprits.is_empty() || !fewer {
        return first;
    }
    let saved = (r.finding.case.clone(), r.finding.fired.clone(), r.keep_class.take());
    let bytes = onnx::encode_model(&first.1.case.model);
    r.finding.fired = r.run(&bytes, &first.1.case.feeds, &r.finding.config.clone()).passes_fired;
    r.finding.case = first.1.case.clone();
    let again = triage(r, limits);
    (r.finding.case, r.finding.fired, r.keep_class) = saved;
    if again.0.class == Class::Optimizer {
        again
    } else {
        first
    }
}

/// [`triage`] with `disabled` off in the finding's configuration (and no longer among the passes it fired).
fn triage_without(r: &mut Reproducer, limits: Limits, disabled: &[String]) -> (Triaged, Minimized) {
    let (config, fired) = (r.finding.config.clone(), r.finding.fired.clone());
    r.finding.config.disabled.extend(disabled.iter().cloned());
    r.finding.fired.retain(|p| !disabled.contains(p));
    r.keep_class = None;
    let out = triage(r, limits);
    (r.finding.config, r.finding.fired) = (config, fired);
    out
}
