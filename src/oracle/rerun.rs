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

/// Whether two runs gave bit-identical outputs (same names, types, shapes and values).
pub fn same_outputs(a: &Outcome, b: &Outcome) -> bool {
    super::distance(&a.outputs, &b.outputs, Tolerance::EXACT).is_ok_and(|d| d.max == 0.0)
}

impl Oracle {
    /// Whether `again` repeats `first` exactly and without an inconsistency between them.
    pub fn repeats(&self, first: &Outcome, again: &Outcome) -> bool {
        self.inconsistency(first, again).is_none() && same_outputs(first, again)
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
