//! Slice with constant starts/ends/axes/steps, clamped as ONNX specifies.

use super::{const_1d, finish, maybe_neg, norm_axes, opt_input, pick_static, INDEX};
use crate::graph::{Attrs, DType, Tensor, TensorType};
use crate::ops::elementwise::ALL;
use crate::ops::{check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng as _;

use DType::*;

// ---- Slice ----

/// Slice(data, starts, ends, axes?, steps?) with constant index inputs, clamped as ONNX specifies.
pub struct Slice;

/// The length of one sliced dim (ONNX clamping; negative steps walk backwards).
fn slice_len(dim: usize, start: i64, end: i64, step: i64) -> usize {
    let (d, step) = (dim as i128, step as i128);
    let fix = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (s, e) = if step > 0 {
        (fix(start).clamp(0, d), fix(end).clamp(0, d))
    } else {
        (fix(start).max(0).min(d - 1), fix(end).max(-1).min(d - 1))
    };
    let n = if step > 0 { (e - s + step - 1) / step } else { (s - e - step - 1) / -step };
    n.max(0) as usize
}

impl OpSpec for Slice {
    fn name(&self) -> &'static str {
        "Slice"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (3, 5), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Slice", x, ALL)?;
        let xd = dims_of(x, "Slice data")?;
        let (sf, ef) = (input(ins, 1)?, input(ins, 2)?);
        let tind = sf.ty.dtype;
        let same = |f: &Fact, what: &str| -> Result<Vec<i64>, Reject> {
            if f.ty.dtype != tind {
                reject!("Slice {what} must have the dtype of starts ({tind}), got {}", f.ty.dtype);
            }
            const_1d(f, &format!("Slice {what}"), INDEX)
        };
        let starts = const_1d(sf, "Slice starts", INDEX)?;
        let ends = same(ef, "ends")?;
        let n = starts.len();
        let axes = match opt_input(ins, 3) {
            Some(f) => same(f, "axes")?,
            None => (0..n as i64).collect(),
        };
        let steps = match opt_input(ins, 4) {
            Some(f) => same(f, "steps")?,
            None => vec![1; n],
        };
        if ends.len() != n || axes.len() != n || steps.len() != n {
            reject!(
                "Slice starts/ends/axes/steps lengths differ: {n}, {}, {}, {}",
                ends.len(),
                axes.len(),
                steps.len()
            );
        }
        let axes = norm_axes(&axes, xd.len(), "Slice axes")?;
        let mut out = xd.clone();
        for i in 0..n {
            if steps[i] == 0 {
                reject!("Slice step cannot be 0");
            }
            out[axes[i]] = slice_len(xd[axes[i]], starts[i], ends[i], steps[i]);
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let mut axes: Vec<usize> = (0..r).collect();
        axes.shuffle(rng);
        axes.truncate(rng.random_range(1..=r));
        let wide = rng.random_bool(0.8);
        let (big, small) = if wide { (i64::MAX, i64::MIN) } else { (i32::MAX as i64, i32::MIN as i64) };
        let (mut starts, mut ends, mut steps) = (Vec::new(), Vec::new(), Vec::new());
        for &a in &axes {
            let dim = xd[a] as i64;
            if dim == 0 {
                reject!("Slice of an empty axis");
            }
            let step: i64 = *[1, 1, 1, 2, 3, -1, -1, -2].choose(rng).unwrap();
            let s = rng.random_range(0..dim);
            let neg = |rng: &mut Rng, v: i64| if rng.random_bool(0.3) { v - dim } else { v };
            let (start, end) = if step > 0 {
                let e = rng.random_range(s + 1..=dim);
                let end =
                    if e == dim { *[dim, dim + rng.random_range(1..5), big].choose(rng).unwrap() } else { neg(rng, e) };
                let start = if s == 0 && rng.random_bool(0.2) { -dim - rng.random_range(0..5) } else { neg(rng, s) };
                (start, end)
            } else {
                let e = rng.random_range(-1..s);
                let end = if e == -1 { *[-dim - 1, small].choose(rng).unwrap() } else { neg(rng, e) };
                let start =
                    if s == dim - 1 && rng.random_bool(0.3) { *[dim, big].choose(rng).unwrap() } else { neg(rng, s) };
                (start, end)
            };
            starts.push(start);
            ends.push(end);
            steps.push(step);
        }
        let dtype = if wide { I64 } else { I32 };
        let mut c = |v: &[i64]| {
            d.constant(Tensor::from_f64s(dtype, &[v.len()], &v.iter().map(|&x| x as f64).collect::<Vec<_>>()))
        };
        let mut inputs = vec![x.name.clone(), c(&starts), c(&ends)];
        let default_axes = axes.iter().enumerate().all(|(i, &a)| i == a);
        let default_steps = steps.iter().all(|&s| s == 1);
        let need_steps = !default_steps || rng.random_bool(0.3);
        if !default_axes || need_steps || rng.random_bool(0.5) {
            let ax: Vec<i64> = axes.iter().map(|&a| maybe_neg(rng, a, r)).collect();
            inputs.push(c(&ax));
        }
        if need_steps {
            inputs.push(c(&steps));
        }
        finish(self, d, Proposal::new(inputs, Attrs::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cfact, fact, ints, one};
    use super::*;

    #[test]
    fn slice_clamps_and_walks_backwards() {
        // dim 10: start -1 (=9), end -100 (clamped to -1), step -3 → 9, 6, 3, 0
        let (st, en, ax, sp) = (ints(&[-1, 1]), ints(&[-100, i64::MAX]), ints(&[1, -3]), ints(&[-3, 2]));
        let out =
            one("Slice", &[fact(F32, &[4, 10, 5]), cfact(&st), cfact(&en), cfact(&ax), cfact(&sp)], &Attrs::new())
                .unwrap();
        assert_eq!(out, TensorType::new(F32, &[2, 4, 5]));
        assert_eq!(slice_len(5, 10, -10, -1), 5);
        assert_eq!(slice_len(5, 2, 2, 1), 0);
        assert_eq!(slice_len(5, -2, 100, 1), 2);
        assert_eq!(slice_len(5, 0, -1, -1), 0);
        let zero = ints(&[0]);
        let one_ = ints(&[1]);
        assert!(
            one("Slice", &[fact(F32, &[4]), cfact(&zero), cfact(&one_), None, cfact(&zero)], &Attrs::new()).is_err(),
            "step 0"
        );
        let e32 = Tensor::from_f64s(I32, &[1], &[1.0]);
        assert!(
            one("Slice", &[fact(F32, &[4]), cfact(&zero), cfact(&e32)], &Attrs::new()).is_err(),
            "mixed index dtypes"
        );
        let far = ints(&[3]);
        assert!(one("Slice", &[fact(F32, &[4]), cfact(&zero), cfact(&one_), cfact(&far)], &Attrs::new()).is_err());
    }
}
