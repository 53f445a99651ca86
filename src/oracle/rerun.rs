//! The re-run judgement, in one place: whether a test's runs repeat exactly (determinism), and whether an
//! inconsistency survives running the reference and the configuration again (else it is nondeterministic or
//! flaky). Used by the campaign, triage and the pattern checks.

use super::{Hints, Oracle, Tolerance};
use crate::compiler::Outcome;

/// What running again says about an inconsistency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rerun {
    /// The reference repeated exactly and the configuration still differs from it: a finding.
    Stands,
    /// The reference itself changed between runs: the test cannot be judged.
    Nondeterministic,
    /// The reference repeated, but the difference did not come back.
    Flaky,
}

/// How many times the reference's own run-to-run spread an optimized run must deviate by to be believed when
/// the reference is nondeterministic.
pub const SPREAD_FACTOR: f64 = 10.0;

/// Whether two runs gave bit-identical outputs (same names, types, shapes and values).
pub fn same_outputs(a: &Outcome, b: &Outcome) -> bool {
    super::distance(&a.outputs, &b.outputs, Tolerance::EXACT).is_ok_and(|d| d.max == 0.0)
}

impl Oracle {
    /// Whether `again` repeats `first` exactly and without an inconsistency between them.
    pub fn repeats(&self, first: &Outcome, again: &Outcome) -> bool {
        self.inconsistency(first, again).is_none() && same_outputs(first, again)
    }

    /// When the reference is nondeterministic (its `references` runs differ), whether the `optimized` runs still
    /// clearly show an inconsistency: each is beyond the tolerance of every reference run, and by more than
    /// [`SPREAD_FACTOR`] times the references' own largest pairwise difference (their spread; the more
    /// reference runs, the safer the estimate: the campaign takes five). `Some(why)` when they do: a race or an
    /// uninitialized read in a fused kernel is then not hidden behind a slightly noisy reference.
    pub fn beyond_spread(&self, references: &[&Outcome], optimized: &[&Outcome], hints: &Hints) -> Option<String> {
        if references.len() < 2 || optimized.is_empty() {
            return None;
        }
        let mut spread: f64 = 0.0;
        for (i, a) in references.iter().enumerate() {
            for b in &references[i + 1..] {
                spread = spread.max(super::distance_with(&a.outputs, &b.outputs, Tolerance::EXACT, hints).ok()?.max);
            }
        }
        if !spread.is_finite() {
            return None;
        }
        let mut least = f64::INFINITY;
        for o in optimized {
            for r in references {
                self.inconsistency_with(r, o, hints)?;
                least = least.min(super::distance_with(&r.outputs, &o.outputs, self.tolerance, hints).ok()?.max);
            }
        }
        (least > SPREAD_FACTOR * spread).then(|| {
            format!(
                "the reference is nondeterministic (its {} runs differ by up to {spread:e}), but the optimized runs \
                 deviate from every one by at least {least:e}, more than {SPREAD_FACTOR} times as much",
                references.len()
            )
        })
    }

    /// The judgement on an inconsistency after a re-run: `reference_repeated` says whether the reference(s)
    /// repeated; `reference` and `other` are the new runs compared again (`other` absent: it did not run), with
    /// `hints` from the model.
    pub fn after_rerun(
        &self,
        reference_repeated: bool,
        reference: &Outcome,
        other: Option<&Outcome>,
        hints: &Hints,
    ) -> Rerun {
        if !reference_repeated {
            return Rerun::Nondeterministic;
        }
        match other {
            Some(o) if self.inconsistency_with(reference, o, hints).is_some() => Rerun::Stands,
            _ => Rerun::Flaky,
        }
    }
}
