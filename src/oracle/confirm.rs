//! Judging with confirmation, the one policy the campaign and `oatest reduce`/`run --judge` share: run a test's
//! configurations (the reference first) through a runner closure, judge, re-confirm crashes and hangs (two more
//! runs: the majority of three must fail the same way), and drop inconsistencies that a re-run shows to be
//! nondeterministic (the reference itself changes) or flaky (they do not come back), unless the deviation is far
//! beyond a noisy reference's own spread. What is dropped comes back with its re-runs.

use super::{Hints, Judgement, Oracle, Rerun, Symptom, Verdict};
use crate::compiler::{Config, Outcome, Status};

/// What [`judge`] concluded.
pub struct Confirmed {
    /// The first runs, one per configuration.
    pub outcomes: Vec<Outcome>,
    /// The verdicts that stand.
    pub judgement: Judgement,
    /// The verdicts a re-run did not confirm, and why.
    pub dropped: Vec<(Verdict, Rerun)>,
    /// The re-runs behind what was dropped.
    pub reruns: Vec<Outcome>,
}

/// Runs `configs` with `run` and judges them with confirmation. `full_hints`: every hint about the test's model,
/// asked for only when an inconsistency shows (decoding a model per test costs); `failures_only`: a test whose
/// configurations change results by design is judged on failures only.
pub fn judge(
    oracle: &Oracle,
    configs: &[Config],
    hints: &Hints,
    run: &mut dyn FnMut(&[Config]) -> Vec<Outcome>,
    full_hints: impl FnOnce() -> Option<Hints>,
    failures_only: bool,
) -> Confirmed {
    let outcomes = run(configs);
    let judge = |hints: &Hints| {
        let mut j = oracle.judge_with(&outcomes, hints);
        if failures_only {
            j.verdicts.retain(|v| v.symptom != Symptom::Inconsistency);
        }
        j
    };
    let mut judgement = judge(hints);
    // an inconsistency is judged again with every hint (precision carried by casts needs the model decoded)
    let decoded;
    let mut hints = hints;
    if judgement.verdicts.iter().any(|v| v.symptom == Symptom::Inconsistency) {
        decoded = full_hints();
        if let Some(full) = decoded.as_ref().filter(|full| *full != hints) {
            hints = full;
            judgement = judge(hints);
        }
    }
    let (mut dropped, mut reruns) = (Vec::new(), Vec::new());
    // crashes and hangs are re-confirmed: the majority of three runs must show the same kind of failure
    let same_kind = |v: &Verdict, o: &Outcome| match v.symptom {
        Symptom::Crash => matches!(o.status, Status::Crash { .. } | Status::Oom { .. }),
        Symptom::Hang => matches!(o.status, Status::Timeout { .. }),
        _ => false,
    };
    let mut confirm_runs: Vec<Outcome> = Vec::new();
    judgement.verdicts.retain(|v| {
        if !matches!(v.symptom, Symptom::Crash | Symptom::Hang) {
            return true;
        }
        let Some(c) = configs.iter().find(|c| c.to_string() == v.config) else { return true };
        let again = run(&[c.clone(), c.clone()]);
        let shown = 1 + again.iter().filter(|o| same_kind(v, o)).count();
        confirm_runs.extend(again);
        if shown >= 2 {
            return true;
        }
        dropped.push((v.clone(), Rerun::Flaky));
        false
    });
    if !dropped.is_empty() {
        reruns.extend(confirm_runs);
    }
    if judgement.verdicts.iter().any(|v| v.symptom == Symptom::Inconsistency) {
        // run the reference and each inconsistent configuration again
        let again: Vec<Config> = std::iter::once(configs[0].clone())
            .chain(
                judgement
                    .verdicts
                    .iter()
                    .filter(|v| v.symptom == Symptom::Inconsistency)
                    .filter_map(|v| configs.iter().find(|c| c.to_string() == v.config).cloned()),
            )
            .collect();
        let rerun = run(&again);
        let repeated = oracle.repeats(&outcomes[0], &rerun[0]);
        // a nondeterministic reference runs three more times: its spread, against which a deviation is weighed
        let more = if repeated { Vec::new() } else { run(&vec![configs[0].clone(); 3]) };
        let references: Vec<&Outcome> =
            [&outcomes[0], &rerun[0]].into_iter().chain(more.iter()).filter(|o| o.status == Status::Ok).collect();
        judgement.verdicts.retain_mut(|v| {
            if v.symptom != Symptom::Inconsistency {
                return true;
            }
            let again = rerun[1..].iter().find(|o| o.config.to_string() == v.config);
            let first = outcomes.iter().find(|o| o.config.to_string() == v.config);
            let after = oracle.after_rerun(repeated, &rerun[0], again, hints);
            // a noisy reference does not hide a deviation far beyond its own spread
            let spread = match (after, first.zip(again)) {
                (Rerun::Nondeterministic, Some((a, b))) if references.len() == 5 => {
                    oracle.beyond_spread(&references, &[a, b], hints)
                }
                _ => None,
            };
            match (after, spread) {
                (Rerun::Stands, _) => true,
                (_, Some(why)) => {
                    v.detail = format!("{} ({why})", v.detail);
                    true
                }
                (why, None) => {
                    dropped.push((v.clone(), why));
                    false
                }
            }
        });
        if dropped.iter().any(|(v, _)| v.symptom == Symptom::Inconsistency) {
            reruns.extend(rerun);
            reruns.extend(more);
        }
    }
    Confirmed { outcomes, judgement, dropped, reruns }
}
