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

fn raw_output(dtype: DType, n: usize, bytes: Vec<u8>) -> Vec<NamedTensor> {
    let tensor = Tensor { dtype, dims: vec![n as i64], data: crate::graph::TensorData::Raw(bytes) };
    vec![NamedTensor { name: "y".into(), tensor }]
}

#[test]
fn int64_outputs_compare_exactly_at_full_width() {
    // 2^62 and 2^62 + 1 are the same f64: a comparison through f64 would call them equal
    let a = raw_output(DType::I64, 1, (1i64 << 62).to_le_bytes().to_vec());
    let b = raw_output(DType::I64, 1, ((1i64 << 62) + 1).to_le_bytes().to_vec());
    let d = distance(&a, &b, 1e-3).unwrap();
    assert!(d.exceeds && d.max == 1.0, "{d:?}");
    assert!(!distance(&a, &a, 0.0).unwrap().exceeds);
    let big = raw_output(DType::U64, 1, u64::MAX.to_le_bytes().to_vec());
    let big1 = raw_output(DType::U64, 1, (u64::MAX - 1).to_le_bytes().to_vec());
    assert!(distance(&big, &big1, 1e-3).unwrap().exceeds);
}

#[test]
fn complex_outputs_compare_on_both_parts() {
    let c = |re: f32, im: f32| raw_output(DType::C64, 1, [re.to_le_bytes(), im.to_le_bytes()].concat());
    let d = distance(&c(1.0, 2.0), &c(1.0, 3.0), 1e-3).unwrap();
    assert!(d.exceeds && d.index == 0 && d.max == 1.0, "the imaginary part differs: {d:?}");
    assert!(!distance(&c(1.0, 2.0), &c(1.0, 2.0 + 1e-5), 1e-3).unwrap().exceeds, "within tolerance");
}

#[test]
fn unknown_element_types_compare_byte_wise() {
    let a = raw_output(DType::Other(99), 1, vec![1, 2]);
    assert!(distance(&a, &a, 0.0).is_ok_and(|d| !d.exceeds));
    assert!(distance(&a, &raw_output(DType::Other(99), 1, vec![1, 3]), 0.0).is_err());
}
