//! The distance between two runs' outputs under a [`Tolerance`], with the NaN/Inf policy: where the reference is
//! NaN or ±Inf the other side must be the same kind (the reference's own NaN/Inf is not a bug); integers compare
//! exactly at their full width (64-bit values are never rounded through f64), or in quantization steps for
//! outputs of quantized ops, and floats of dequantized ones in steps of their scale ([`Hints`]); complex values compare on both parts; unknown types byte-wise.

use super::{ulp_distance16, Hints, Tolerance};
use crate::compiler::NamedTensor;
use crate::graph::DType;

/// How far two runs' outputs are apart, and the element that shows it best.
#[derive(Clone, Debug, PartialEq)]
pub struct Distance {
    /// The largest absolute difference over all elements (Chebyshev; infinite for a NaN/Inf-kind mismatch).
    pub max: f64,
    /// The largest relative difference `|a-b|/|ref|` over elements with a nonzero finite reference.
    pub max_rel: f64,
    /// The largest ULP distance over float16/bfloat16 elements (`None`: no such output).
    pub max_ulps: Option<u64>,
    /// The largest difference in quantization steps over quantized and dequantized outputs (`None`: none).
    pub max_steps: Option<u64>,
    /// Elements (complex: values) beyond the tolerance, of `elements` compared.
    pub exceeding: usize,
    pub elements: usize,
    /// The reported element: the first beyond the tolerance with the largest difference (else the largest).
    pub output: String,
    pub index: usize,
    pub expected: f64,
    pub actual: f64,
    /// Some element differs by more than its dtype allows.
    pub exceeds: bool,
}

impl Distance {
    /// The measurement in words: `max |diff| 5e-1, max rel 2.5e-1, 3 ULPs; 2 of 6 elements beyond tolerance`.
    pub fn summary(&self) -> String {
        let mut s = format!("max |diff| {:e}, max rel {:e}", self.max, self.max_rel);
        if let Some(u) = self.max_ulps {
            s += &format!(", {u} ULPs");
        }
        if let Some(k) = self.max_steps {
            s += &format!(", {k} quantization steps");
        }
        s + &format!("; {} of {} elements beyond tolerance", self.exceeding, self.elements)
    }
}

/// The outputs cannot be compared element by element (count, dtype or shape differ).
#[derive(Clone, Debug, PartialEq)]
pub struct Structural(pub String);

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

/// The ULP distance of two finite 16-bit float values (held exactly in f64).
pub fn ulps16(dtype: DType, r: f64, o: f64) -> Option<u64> {
    let bits = |x: f64| match dtype {
        DType::F16 => half::f16::from_f64(x).to_bits(),
        _ => half::bf16::from_f64(x).to_bits(),
    };
    matches!(dtype, DType::F16 | DType::BF16).then(|| ulp_distance16(bits(r), bits(o)))
}

/// One compared element (a part, for complex values).
struct Elem {
    r: f64,
    o: f64,
    diff: f64,
    over: bool,
    ulps: Option<u64>,
    steps: Option<u64>,
}

/// The elements of one output pair, or why they cannot be compared element by element (`Ok(None)`: equal bytes
/// of a type without a numeric reading).
fn elements(r: &NamedTensor, o: &NamedTensor, tol: Tolerance, hints: &Hints) -> Result<Option<Vec<Elem>>, Structural> {
    let (rt, ot) = (&r.tensor, &o.tensor);
    // a float output that carries a narrower type's precision is judged as that type
    let dtype = match hints.precision.get(&r.name) {
        Some(&p) if rt.dtype.is_float() && super::hints::less_precise(p, rt.dtype) => p,
        _ => rt.dtype,
    };
    // a dequantized output: one quantization step is this much; levels cast to a float: one
    let levels = || hints.quantized.contains(&r.name).then_some(1.0);
    let step = hints.dequantized.get(&r.name).copied().or_else(levels).filter(|_| dtype.is_float());
    Ok(Some(match (values(rt), values(ot)) {
        (Some(Values::Float(rv)), Some(Values::Float(ov))) => rv
            .iter()
            .zip(&ov)
            .map(|(&a, &b)| {
                let diff = elem_diff(a, b);
                let finite = a.is_finite() && b.is_finite();
                let ulps = ulps16(dtype, a, b).filter(|_| finite);
                let in_steps = step.is_some_and(|s| finite && tol.allows_steps(dtype, a, b, s));
                let over = if finite { !(tol.allows(dtype, a, b, ulps) || in_steps) } else { diff > 0.0 };
                let steps = step.filter(|_| finite).map(|s| (diff / s + 0.5).floor() as u64);
                Elem { r: a, o: b, diff, over, ulps, steps }
            })
            .collect(),
        (Some(Values::Int(rv)), Some(Values::Int(ov))) => {
            let quantized = dtype != DType::Bool && hints.quantized.contains(&r.name);
            rv.iter()
                .zip(&ov)
                .map(|(&a, &b)| {
                    let gap = a.abs_diff(b);
                    let over = if quantized { gap > u128::from(tol.steps) } else { gap != 0 };
                    let steps = quantized.then(|| u64::try_from(gap).unwrap_or(u64::MAX));
                    Elem { r: a as f64, o: b as f64, diff: gap as f64, over, ulps: None, steps }
                })
                .collect()
        }
        // element types without a numeric reading (unknown to oatest): equal bytes, or a difference
        _ => match (rt.raw(), ot.raw()) {
            (Some(x), Some(y)) if x == y => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(Structural(format!("output '{}' of type {} differs (compared byte-wise)", r.name, dtype)))
            }
            _ => return Err(Structural(format!("output '{}' of type {} cannot be compared", r.name, dtype))),
        },
    }))
}

/// The distance without hints: integer outputs compare exactly.
pub fn distance(reference: &[NamedTensor], other: &[NamedTensor], tol: Tolerance) -> Result<Distance, Structural> {
    distance_with(reference, other, tol, &Hints::default())
}

/// The distance of `other`'s outputs from `reference`'s under `tol`, with `hints` about the model.
pub fn distance_with(
    reference: &[NamedTensor],
    other: &[NamedTensor],
    tol: Tolerance,
    hints: &Hints,
) -> Result<Distance, Structural> {
    if reference.len() != other.len() {
        return Err(Structural(format!("{} outputs, reference has {}", other.len(), reference.len())));
    }
    let mut d = Distance {
        max: 0.0,
        max_rel: 0.0,
        max_ulps: None,
        max_steps: None,
        exceeding: 0,
        elements: 0,
        output: String::new(),
        index: 0,
        expected: 0.0,
        actual: 0.0,
        exceeds: false,
    };
    // the difference of the reported element
    let mut best = 0.0;
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
        let Some(elems) = elements(r, o, tol, hints)? else { continue };
        // complex values are compared part by part; an element's index is that of its value
        let per_element = if matches!(rt.dtype, DType::C64 | DType::C128) { 2 } else { 1 };
        d.elements += elems.len() / per_element;
        let mut counted = usize::MAX;
        for (k, e) in elems.into_iter().enumerate() {
            let i = k / per_element;
            if e.over && counted != i {
                d.exceeding += 1;
                counted = i;
            }
            if e.r != 0.0 && e.r.is_finite() {
                d.max_rel = d.max_rel.max(e.diff / e.r.abs());
            }
            if let Some(u) = e.ulps {
                d.max_ulps = Some(d.max_ulps.unwrap_or(0).max(u));
            }
            if let Some(s) = e.steps {
                d.max_steps = Some(d.max_steps.unwrap_or(0).max(s));
            }
            // report the first exceeding element with the largest difference
            if (e.over && !d.exceeds) || (e.over == d.exceeds && e.diff > best) {
                (d.output, d.index, d.expected, d.actual) = (r.name.clone(), i, e.r, e.o);
                d.exceeds |= e.over;
                best = e.diff;
            }
            d.max = d.max.max(e.diff);
        }
    }
    Ok(d)
}
