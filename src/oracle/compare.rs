//! Chebyshev distance between two runs' outputs, with the NaN/Inf policy: where the reference is NaN or ±Inf
//! the other side must be the same kind (the reference's own NaN/Inf is not a bug); integers compare exactly.

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
/// `tol` for float32/64, and `tol` plus 1% of the magnitude for 16-bit floats (ORT computes many float16
/// ops in float32, and fused kernels round differently).
fn allowed(dtype: DType, tol: f64, r: f64) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => tol + 1e-2 * r.abs().max(1.0),
        d if d.is_float() => tol,
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
        let (Some(rv), Some(ov)) = (rt.to_f64s(), ot.to_f64s()) else {
            return Err(Structural(format!("output '{}' of type {} cannot be compared", r.name, rt.dtype)));
        };
        for (i, (&a, &b)) in rv.iter().zip(&ov).enumerate() {
            let diff = elem_diff(a, b);
            let over = diff > allowed(rt.dtype, tol, a);
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
