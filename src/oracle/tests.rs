//! Each judge on crafted outcomes.

use super::*;
use crate::compiler::{Config, Level, NamedTensor, Outcome, Status};
use crate::graph::{DType, Tensor};

fn out(level: Level, status: Status, vals: &[f32]) -> Outcome {
    let outputs = if status == Status::Ok {
        vec![NamedTensor { name: "y".into(), tensor: Tensor::from_f32(&[vals.len()], vals) }]
    } else {
        Vec::new()
    };
    Outcome {
        target: "t".into(),
        config: Config::level(level),
        status,
        outputs,
        passes_fired: vec![],
        passes_ran: vec![],
        time_ms: 1.0,
    }
}

fn oracle() -> Oracle {
    Oracle { tolerance: 1e-3 }
}

fn symptoms(j: &Judgement) -> Vec<(Symptom, String)> {
    j.verdicts.iter().map(|v| (v.symptom, v.config.clone())).collect()
}

#[test]
fn equal_runs_are_clean_and_small_differences_are_tolerated() {
    let j =
        oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0, 2.0]), out(Level::All, Status::Ok, &[1.0005, 2.0])]);
    assert!(j.valid && j.verdicts.is_empty(), "{j:?}");
}

#[test]
fn chebyshev_distance_above_tolerance_is_an_inconsistency() {
    let j = oracle().judge(&[
        out(Level::Disable, Status::Ok, &[1.0, 2.0, 3.0]),
        out(Level::Basic, Status::Ok, &[1.0, 2.0, 3.0]),
        out(Level::All, Status::Ok, &[1.0, 2.5, 3.002]),
    ]);
    assert_eq!(symptoms(&j), [(Symptom::Inconsistency, "all".to_string())]);
    let v = &j.verdicts[0];
    assert_eq!(v.max_diff, Some(0.5));
    assert!(v.detail.contains("'y'[1]"), "{}", v.detail);
}

#[test]
fn nan_and_inf_in_the_reference_must_match_in_kind() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    // the reference's own NaN/Inf is not a bug when the other side agrees
    let same = oracle()
        .judge(&[out(Level::Disable, Status::Ok, &[nan, inf, -inf]), out(Level::All, Status::Ok, &[nan, inf, -inf])]);
    assert!(same.verdicts.is_empty());
    for other in [[1.0, inf, -inf], [nan, -inf, -inf], [nan, inf, 0.0]] {
        let j =
            oracle().judge(&[out(Level::Disable, Status::Ok, &[nan, inf, -inf]), out(Level::All, Status::Ok, &other)]);
        assert_eq!(j.verdicts.len(), 1, "{other:?}");
        assert_eq!(j.verdicts[0].max_diff, Some(f64::INFINITY));
    }
    // a NaN appearing only in the optimized run is an inconsistency too
    let j = oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0]), out(Level::All, Status::Ok, &[nan])]);
    assert_eq!(symptoms(&j), [(Symptom::Inconsistency, "all".to_string())]);
}

#[test]
fn integers_compare_exactly_and_structure_must_match() {
    let int = |level, v: &[f64]| Outcome {
        target: "t".into(),
        config: Config::level(level),
        status: Status::Ok,
        outputs: vec![NamedTensor { name: "k".into(), tensor: Tensor::from_f64s(DType::I64, &[v.len()], v) }],
        passes_fired: vec![],
        passes_ran: vec![],
        time_ms: 0.0,
    };
    let o = Oracle { tolerance: 10.0 };
    assert_eq!(o.judge(&[int(Level::Disable, &[1.0, 2.0]), int(Level::All, &[1.0, 3.0])]).verdicts.len(), 1);
    assert!(o.judge(&[int(Level::Disable, &[1.0, 2.0]), int(Level::All, &[1.0, 2.0])]).verdicts.is_empty());
    let j = oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0, 2.0]), out(Level::All, Status::Ok, &[1.0])]);
    assert!(j.verdicts[0].detail.contains("reference has"), "{:?}", j.verdicts);
}

#[test]
fn float16_allows_rounding_but_not_real_differences() {
    let h = |level, v: &[f64]| Outcome {
        target: "t".into(),
        config: Config::level(level),
        status: Status::Ok,
        outputs: vec![NamedTensor { name: "h".into(), tensor: Tensor::from_f64s(DType::F16, &[v.len()], v) }],
        passes_fired: vec![],
        passes_ran: vec![],
        time_ms: 0.0,
    };
    assert!(oracle().judge(&[h(Level::Disable, &[100.0]), h(Level::All, &[100.0625])]).verdicts.is_empty());
    assert_eq!(oracle().judge(&[h(Level::Disable, &[100.0]), h(Level::All, &[104.0])]).verdicts.len(), 1);
}

#[test]
fn crash_hang_and_oom_are_findings_in_any_configuration() {
    let crash = Status::Crash { signal: Some(11), message: String::new() };
    let j = oracle().judge(&[
        out(Level::Disable, Status::Ok, &[1.0]),
        out(Level::Basic, crash, &[]),
        out(Level::Extended, Status::Timeout { limit_ms: 10 }, &[]),
        out(Level::All, Status::Oom { message: "memory allocation of 8 bytes failed".into() }, &[]),
    ]);
    assert_eq!(
        symptoms(&j),
        [(Symptom::Crash, "basic".into()), (Symptom::Hang, "extended".into()), (Symptom::Crash, "all".into())]
    );
    // a crash of the reference itself is still a crash finding, but the test is not valid
    let j = oracle().judge(&[out(Level::Disable, Status::Crash { signal: Some(6), message: String::new() }, &[])]);
    assert!(!j.valid);
    assert_eq!(symptoms(&j), [(Symptom::Crash, "disable".into())]);
}

#[test]
fn optimized_errors_are_findings_and_reference_errors_make_the_test_invalid() {
    let err = |m: &str| Status::Error { message: m.into() };
    let j = oracle().judge(&[out(Level::Disable, Status::Ok, &[1.0]), out(Level::All, err("FusedConv failed"), &[])]);
    assert_eq!(symptoms(&j), [(Symptom::Error, "all".into())]);
    let j = oracle().judge(&[
        out(Level::Disable, err("Could not find an implementation for Foo(1)"), &[]),
        out(Level::All, err("Could not find an implementation for Foo(1)"), &[]),
    ]);
    assert!(!j.valid && j.verdicts.is_empty());
    assert_eq!(j.invalid_reason.as_deref(), Some("no-kernel"));
    let j = oracle().judge(&[out(Level::Disable, err("Invalid rank"), &[])]);
    assert_eq!(j.invalid_reason.as_deref(), Some("reference-error"));
}

#[test]
fn unsupported_filters_are_named() {
    assert_eq!(unsupported_reason("[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : x"), Some("no-kernel"));
    assert_eq!(unsupported_reason("op Foo is unsupported"), Some("unsupported"));
    assert_eq!(unsupported_reason("shape mismatch"), None);
}
