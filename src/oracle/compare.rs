//! Chebyshev distance between two runs' outputs, with the NaN/Inf policy: where the reference is NaN or ±Inf
//! the other side must be the same kind (the reference's own NaN/Inf is not a bug); integers compare exactly at
//! their full width (64-bit values are never rounded through f64); complex values compare on both parts.

use crate::compiler::NamedTensor;
use crate::graph::DType;

/// The largest absolute difference over all output elements, and where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Distance {
    pub max: f64,
    pub output: String,
    pub index: usize,
    pub expected: f64,
    pub actual: f64,
    /// Some element differs by more than its dtype allows.
    pub exceeds: bool,
}

/// The outputs cannot be compared element by element (count, dtype or shape differ).
#[derive(Clone, Debug, PartialEq)]
pub struct Structural(pub String);

/// What a difference may be for an element of `dtype` with reference value `r`: exact for integers and bool,
/// `tol` for float32/64 and each part of a complex value, and `tol` plus 1% of the magnitude for 16-bit floats (ORT computes many float16
/// ops in float32, and fused kernels round differently).
fn allowed(dtype: DType, tol: f64, r: f64) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => tol + 1e-2 * r.abs().max(1.0),
        d if d.is_float() || matches!(d, DType::C64 | DType::C128) => tol,
        _ => 0.0,
    }
}

fn elem_diff(r: f64, o: f64) -> f64 {
    if r.is_nan() {
        return if o.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if r.is_infinite() {
        return if o == r { 0.0 } else { f64::INFINITY };
    }
    if !o.is_finite() {
        return f64::INFINITY;
    }
    (r - o).abs()
}

/// An output's element values for comparison: floats (complex as interleaved real and imaginary parts), or
/// integers at full width.
enum Values {
    Float(Vec<f64>),
    Int(Vec<i128>),
}

fn values(t: &crate::graph::Tensor) -> Option<Values> {
    match t.dtype {
        DType::C64 | DType::C128 => {
            let raw = t.raw()?;
            let part = if t.dtype == DType::C64 { 4 } else { 8 };
            (raw.len() == 2 * part * t.numel()).then(|| {
                Values::Float(
                    raw.chunks_exact(part)
                        .map(|c| match part {
                            4 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
                            _ => f64::from_le_bytes(c.try_into().unwrap()),
                        })
                        .collect(),
                )
            })
        }
        DType::U64 => {
            let raw = t.raw()?;
            (raw.len() == 8 * t.numel()).then(|| {
                Values::Int(raw.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()) as i128).collect())
            })
        }
        DType::I64 => t.to_i64s().map(|v| Values::Int(v.into_iter().map(i128::from).collect())),
        d if d.is_float() => t.to_f64s().map(Values::Float),
        // the other integer types and bool fit f64 exactly
        _ => t.to_f64s().map(|v| Values::Int(v.into_iter().map(|x| x as i128).collect())),
    }
}

pub fn distance(reference: &[NamedTensor], other: &[NamedTensor], tol: f64) -> Result<Distance, Structural> {
    if reference.len() != other.len() {
        return Err(Structural(format!("{} outputs, reference has {}", other.len(), reference.len())));
    }
    let mut d = Distance { max: 0.0, output: String::new(), index: 0, expected: 0.0, actual: 0.0, exceeds: false };
    for (r, o) in reference.iter().zip(other) {
        let (rt, ot) = (&r.tensor, &o.tensor);
        if rt.dtype != ot.dtype || rt.dims != ot.dims {
            return Err(Structural(format!(
                "output '{}' is {}{:?}, reference has {}{:?}",
                r.name, ot.dtype, ot.dims, rt.dtype, rt.dims
            )));
        }
        if rt.dtype == DType::Str {
            if rt.data != ot.data {
                return Err(Structural(format!("string output '{}' differs", r.name)));
            }
            continue;
        }
        let pairs: Vec<(f64, f64, f64, bool)> = match (values(rt), values(ot)) {
            (Some(Values::Float(rv)), Some(Values::Float(ov))) => rv
                .iter()
                .zip(&ov)
                .map(|(&a, &b)| {
                    let diff = elem_diff(a, b);
                    (a, b, diff, diff > allowed(rt.dtype, tol, a))
                })
                .collect(),
            (Some(Values::Int(rv)), Some(Values::Int(ov))) => {
                rv.iter().zip(&ov).map(|(&a, &b)| (a as f64, b as f64, (a - b).abs() as f64, a != b)).collect()
            }
            // element types without a numeric reading (unknown to oatest): equal bytes, or a difference
            _ => match (rt.raw(), ot.raw()) {
                (Some(x), Some(y)) if x == y => continue,
                (Some(_), Some(_)) => {
                    return Err(Structural(format!(
                        "output '{}' of type {} differs (compared byte-wise)",
                        r.name, rt.dtype
                    )))
                }
                _ => return Err(Structural(format!("output '{}' of type {} cannot be compared", r.name, rt.dtype))),
            },
        };
        // complex values are compared part by part; an element's index is that of its value
        let per_element = if matches!(rt.dtype, DType::C64 | DType::C128) { 2 } else { 1 };
        for (k, (a, b, diff, over)) in pairs.into_iter().enumerate() {
            let i = k / per_element;
            // report the first exceeding element with the largest difference
            if (over && !d.exceeds) || (over == d.exceeds && diff > d.max) {
                d = Distance {
                    max: d.max.max(diff),
                    output: r.name.clone(),
                    index: i,
                    expected: a,
                    actual: b,
                    exceeds: over || d.exceeds,
                };
            }
            d.max = d.max.max(diff);
        }
    }
    Ok(d)
}
