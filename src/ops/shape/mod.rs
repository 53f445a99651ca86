//! Shape and data-movement ops (ONNX opset 20), one op family per file, registered here in catalog order; plus
//! the helpers they share with each other and with reduce/quant (constant 1-D operands, axes, `pick_static`, `finish`).
//!
//! Shape-like operands (shape, axes, pads, starts/ends/steps, split, repeats) must be constants so every shape
//! stays static. Dtype lists are what ONNX Runtime 1.31's CPU provider runs (docs/ort-cpu-dtypes.tsv).

mod concat;
mod gather;
mod pad;
mod reshape;
mod slice;
mod space_depth;
mod squeeze_expand;

use super::draft::random_type;
use super::{const_ints, infer_node, names, Draft, Fact, OpSpec, Proposal, Reject, Rng, Value};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use concat::{Concat, Split};
use gather::Gather;
use pad::Pad;
use rand::Rng as _;
use reshape::{Flatten, Reshape, Transpose};
use slice::Slice;
use space_depth::SpaceDepth;
use squeeze_expand::{Expand, Squeeze, Tile, Unsqueeze};
use std::ops::RangeInclusive;

use DType::*;
const INDEX: &[DType] = &[I32, I64];

// ---- helpers shared by the files of this family and by other families (reduce, quant) ----

/// The values of a constant 1-D integer input whose dtype is one of `dtypes`.
pub(super) fn const_1d(f: &Fact, what: &str, dtypes: &[DType]) -> Result<Vec<i64>, Reject> {
    if !dtypes.contains(&f.ty.dtype) {
        reject!("{what} must be {}, got {}", names(dtypes), f.ty.dtype);
    }
    if f.ty.rank() != Some(1) {
        reject!("{what} must be 1-D, got {}", f.ty);
    }
    const_ints(f, what)
}

/// The optional input at `i` (`None` when absent or omitted with `""`).
pub(super) fn opt_input<'a, 'b>(ins: &'a [Option<Fact<'b>>], i: usize) -> Option<&'a Fact<'b>> {
    ins.get(i).and_then(|f| f.as_ref())
}

/// Normalizes axes in [-rank, rank-1], rejecting out-of-range and repeated ones.
pub(super) fn norm_axes(axes: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, Reject> {
    let r = rank as i64;
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        if a < -r || a >= r {
            reject!("{what} {a} is out of range for rank {rank}");
        }
        let n = (if a < 0 { a + r } else { a }) as usize;
        if out.contains(&n) {
            reject!("{what} {axes:?} repeat an axis");
        }
        out.push(n);
    }
    Ok(out)
}

/// Element count, rejecting an overflowing shape.
pub(super) fn checked_numel(dims: &[usize]) -> Result<usize, Reject> {
    dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).ok_or_else(|| Reject(format!("shape {dims:?} is too large")))
}

/// A new constant 1-D int64 tensor.
pub(super) fn int_const(d: &mut Draft, v: &[i64]) -> String {
    d.constant(Tensor::from_i64(&[v.len()], v))
}

/// An axis written as given or (sometimes) in its negative form.
pub(super) fn maybe_neg(rng: &mut Rng, axis: usize, rank: usize) -> i64 {
    if rng.random_bool(0.3) {
        axis as i64 - rank as i64
    } else {
        axis as i64
    }
}

/// An existing value of a static shape with a dtype in `dtypes`, a rank in `ranks` and dims satisfying `pred`,
/// or a fresh graph input made to fit.
pub(super) fn pick_static(
    d: &mut Draft,
    rng: &mut Rng,
    dtypes: &[DType],
    ranks: RangeInclusive<usize>,
    pred: impl Fn(&[usize]) -> bool,
) -> Result<Value, Reject> {
    let max = d.limits.max_elems;
    let fits =
        |t: &TensorType| dtypes.contains(&t.dtype) && t.dims().is_some_and(|s| ranks.contains(&s.len()) && pred(&s));
    d.pick_or_input(rng, fits, |r| {
        (0..16).map(|_| random_type(r, dtypes, ranks.clone(), max)).find(|t| t.dims().is_some_and(|s| pred(&s)))
    })
}

/// Checks a proposal by inferring it against the draft, and keeps every output within 1..=max_elems elements.
pub(super) fn finish(spec: &dyn OpSpec, d: &Draft, p: Proposal) -> Result<Proposal, Reject> {
    let mut facts = Vec::with_capacity(p.inputs.len());
    for i in &p.inputs {
        facts.push(if i.is_empty() {
            None
        } else {
            Some(d.fact(i).ok_or_else(|| Reject(format!("{}: unknown value {i}", spec.name())))?)
        });
    }
    for t in infer_node(spec, &facts, &p.attrs, p.outputs)? {
        if let Some(dims) = t.dims() {
            match checked_numel(&dims) {
                Ok(n) if n >= 1 && n <= d.limits.max_elems => {}
                _ => reject!("{}: output {t} is empty or too large", spec.name()),
            }
        }
    }
    Ok(p)
}

fn attrs_of(items: Vec<(&str, Attr)>) -> Attrs {
    items.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(Reshape));
    v.push(Box::new(Transpose));
    v.push(Box::new(Concat));
    v.push(Box::new(Split));
    v.push(Box::new(Slice));
    v.push(Box::new(Pad));
    v.push(Box::new(Squeeze));
    v.push(Box::new(Unsqueeze));
    v.push(Box::new(Expand));
    v.push(Box::new(Flatten));
    v.push(Box::new(Gather));
    v.push(Box::new(Tile));
    v.push(Box::new(SpaceDepth { to_space: true }));
    v.push(Box::new(SpaceDepth { to_space: false }));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;

    pub(super) fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
        Some(Fact { ty: TensorType::new(d, s), value: None })
    }

    pub(super) fn cfact(t: &Tensor) -> Option<Fact<'_>> {
        Some(Fact { ty: t.ty(), value: Some(t) })
    }

    pub(super) fn ints(v: &[i64]) -> Tensor {
        Tensor::from_i64(&[v.len()], v)
    }

    pub(super) fn run(op: &str, ins: &[Option<Fact>], attrs: &Attrs, n: usize) -> Result<Vec<TensorType>, Reject> {
        infer_node(lookup("", op).unwrap(), ins, attrs, n)
    }

    pub(super) fn one(op: &str, ins: &[Option<Fact>], attrs: &Attrs) -> Result<TensorType, Reject> {
        run(op, ins, attrs, 1).map(|mut v| v.remove(0))
    }

    pub(super) fn a(items: Vec<(&str, Attr)>) -> Attrs {
        attrs_of(items)
    }

    #[test]
    fn every_shape_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
