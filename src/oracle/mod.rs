//! Judges: turn the outcomes of one test (the unoptimized reference first) into verdicts: crash, error, hang,
//! inconsistency. Observing (targets) and judging (here) stay apart; false-positive filters are data.

mod compare;
pub mod confirm;
pub mod contract;
mod filters;
mod hints;
mod rerun;
mod tolerance;

pub use compare::{distance, distance_with, ulps16, Distance, Structural};
pub use filters::{unsupported_reason, UNSUPPORTED};
pub use hints::{is_quantizing, quantized_outputs, Hints};
pub use rerun::{same_outputs, Rerun};
pub use tolerance::{ulp_distance16, Tolerance, DEFAULTS, DEFAULT_STEPS, DEFAULT_ULPS};

use crate::compiler::{Outcome, Status};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of misbehaviour a finding shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Symptom {
    /// The compiler died (signal, abort, abnormal exit, memory blow-up) while compiling or running.
    Crash,
    /// An optimized configuration failed where the unoptimized one ran.
    Error,
    /// No result within the time limit.
    Hang,
    /// Outputs of an optimized configuration differ from the reference beyond the tolerance.
    Inconsistency,
}

impl Symptom {
    pub const ALL: [Symptom; 4] = [Symptom::Crash, Symptom::Error, Symptom::Hang, Symptom::Inconsistency];

    pub fn name(self) -> &'static str {
        match self {
            Symptom::Crash => "crash",
            Symptom::Error => "error",
            Symptom::Hang => "hang",
            Symptom::Inconsistency => "inconsistency",
        }
    }
}

impl fmt::Display for Symptom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One judged misbehaviour of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub symptom: Symptom,
    /// The configuration that shows it (its display form, e.g. `all`).
    pub config: String,
    /// What happened: the error message, the signal, or where the outputs differ.
    pub detail: String,
    /// Chebyshev distance (the largest absolute difference) for inconsistencies (infinite for a structural or
    /// NaN/Inf-kind mismatch).
    pub max_diff: Option<f64>,
    /// The rest of an inconsistency's measurement (absent for structural mismatches and older findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measure: Option<Measure>,
}

/// How an inconsistency measured, besides its largest absolute difference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// The largest relative difference `|a-b|/|ref|` (over elements with a nonzero finite reference).
    /// Infinite when a value became ±Inf or NaN: JSON writes that as null, which reads back as infinite.
    #[serde(deserialize_with = "null_as_infinite")]
    pub max_rel: f64,
    /// The largest ULP distance over float16/bfloat16 outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ulps: Option<u64>,
    /// The largest difference in quantization steps over quantized integer outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Elements beyond the tolerance, of `elements` compared.
    pub exceeding: usize,
    pub elements: usize,
}

/// A float that JSON may hold as null (serde_json writes non-finite floats so): null reads as +Inf.
fn null_as_infinite<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

/// What the oracle concluded about one test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// The reference configuration ran: the test is a valid program for this compiler.
    pub valid: bool,
    /// Why the reference did not run, when it did not (a filter name, or `reference-error`).
    pub invalid_reason: Option<String>,
    pub verdicts: Vec<Verdict>,
}

/// The invalid reason of a test whose unoptimized run breaks its model's declared output types.
pub const CONTRACT: &str = "breaks-declared-types";

/// The differential oracle. `outcomes[0]` is the reference (unoptimized) run.
#[derive(Clone, Debug)]
pub struct Oracle {
    pub tolerance: Tolerance,
}

impl Oracle {
    /// The judgement without hints about the model (integer outputs compare exactly).
    pub fn judge(&self, outcomes: &[Outcome]) -> Judgement {
        self.judge_with(outcomes, &Hints::default())
    }

    /// The judgement of one test's outcomes, with `hints` from its model ([`Hints::of`]).
    pub fn judge_with(&self, outcomes: &[Outcome], hints: &Hints) -> Judgement {
        let mut verdicts = Vec::new();
        // bug judges first: a dying or hanging compiler is a finding in any configuration
        for o in outcomes {
            let config = o.config.to_string();
            match &o.status {
                Status::Crash { .. } | Status::Oom { .. } => verdicts.push(Verdict {
                    symptom: Symptom::Crash,
                    config,
                    detail: o.status.message(),
                    max_diff: None,
                    measure: None,
                }),
                Status::Timeout { .. } => verdicts.push(Verdict {
                    symptom: Symptom::Hang,
                    config,
                    detail: o.status.message(),
                    max_diff: None,
                    measure: None,
                }),
                _ => {}
            }
        }
        let Some(reference) = outcomes.first() else {
            return Judgement { valid: false, invalid_reason: Some("no outcome".into()), verdicts };
        };
        if let Status::Error { message } = &reference.status {
            let reason = unsupported_reason(message).unwrap_or("reference-error").to_string();
            return Judgement { valid: false, invalid_reason: Some(reason), verdicts };
        }
        if reference.status != Status::Ok {
            return Judgement { valid: false, invalid_reason: Some(reference.status.kind().to_string()), verdicts };
        }
        // inputs that break the model's declared outputs make no test of the optimizer (its passes may rely on them)
        if contract::violation(&hints.declared, &reference.outputs).is_some() {
            return Judgement { valid: false, invalid_reason: Some(CONTRACT.into()), verdicts };
        }
        for o in &outcomes[1..] {
            match &o.status {
                Status::Error { message } => verdicts.push(Verdict {
                    symptom: Symptom::Error,
                    config: o.config.to_string(),
                    detail: message.clone(),
                    max_diff: None,
                    measure: None,
                }),
                // a configuration that changes results by design (`compiler::named`) is judged on failures only
                Status::Ok if !crate::compiler::named::compared(&o.config) => {}
                Status::Ok => {
                    if let Some(v) = self.inconsistency_with(reference, o, hints) {
                        verdicts.push(v);
                    }
                }
                _ => {}
            }
        }
        Judgement { valid: true, invalid_reason: None, verdicts }
    }

    /// An inconsistency verdict when `other`'s outputs differ from `reference`'s beyond the tolerance, without
    /// hints about the model (integer outputs compare exactly).
    pub fn inconsistency(&self, reference: &Outcome, other: &Outcome) -> Option<Verdict> {
        self.inconsistency_with(reference, other, &Hints::default())
    }

    /// An inconsistency verdict when `other`'s outputs differ from `reference`'s beyond the tolerance, with
    /// `hints` from the model ([`Hints::of`]).
    pub fn inconsistency_with(&self, reference: &Outcome, other: &Outcome, hints: &Hints) -> Option<Verdict> {
        let config = other.config.to_string();
        let tolerance = self.tolerance.for_config(&other.config);
        match distance_with(&reference.outputs, &other.outputs, tolerance, hints) {
            Err(s) => Some(Verdict {
                symptom: Symptom::Inconsistency,
                config,
                detail: s.0,
                max_diff: Some(f64::INFINITY),
                measure: None,
            }),
            Ok(d) if d.exceeds => Some(Verdict {
                symptom: Symptom::Inconsistency,
                config,
                detail: format!(
                    "output '{}'[{}]: expected {}, got {} ({})",
                    d.output,
                    d.index,
                    d.expected,
                    d.actual,
                    d.summary()
                ),
                max_diff: Some(d.max),
                measure: Some(Measure {
                    max_rel: d.max_rel,
                    ulps: d.max_ulps,
                    steps: d.max_steps,
                    exceeding: d.exceeding,
                    elements: d.elements,
                }),
            }),
            Ok(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
