//! Concat and Split along one axis.

use super::{attrs_of, const_1d, finish, int_const, maybe_neg, opt_input, pick_static};
use crate::graph::{Attr, Attrs, DType, TensorType};
use crate::ops::elementwise::ALL;
use crate::ops::{attr_int, check_dtype, dims_of, input, norm_axis, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::seq::SliceRandom;
use rand::Rng as _;

use DType::*;

// ---- Concat ----

/// Concat(inputs...) along attribute `axis` (required); non-axis dims must match.
pub struct Concat;

impl OpSpec for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 64), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let first = input(ins, 0)?;
        check_dtype("Concat", first, ALL)?;
        let mut out = dims_of(first, "Concat input")?;
        if out.is_empty() {
            reject!("Concat needs inputs of rank >= 1");
        }
        if !attrs.contains_key("axis") {
            reject!("Concat needs the attribute 'axis'");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, out.len(), "Concat axis")?;
        for i in 1..ins.len() {
            let f = input(ins, i)?;
            if f.ty.dtype != first.ty.dtype {
                reject!("Concat needs equal dtypes, got {} and {}", first.ty.dtype, f.ty.dtype);
            }
            let fd = dims_of(f, "Concat input")?;
            if fd.len() != out.len() || fd.iter().zip(&out).enumerate().any(|(j, (a, b))| j != axis && a != b) {
                reject!("Concat inputs {:?} and {:?} differ outside axis {axis}", out, fd);
            }
            out[axis] = out[axis].checked_add(fd[axis]).ok_or_else(|| Reject("Concat output is too large".into()))?;
        }
        Ok(vec![TensorType::new(first.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let axis = rng.random_range(0..r);
        let dtype = x.ty.dtype;
        let fits = |t: &TensorType| {
            t.dtype == dtype && t.dims().is_some_and(|s| s.len() == r && (0..r).all(|j| j == axis || s[j] == xd[j]))
        };
        let mut inputs = vec![x.name.clone()];
        for _ in 0..rng.random_range(1..=2) {
            let existing = if rng.random_bool(0.6) { d.pick(rng, fits) } else { None };
            let name = match existing {
                Some(v) => v.name,
                None => {
                    let mut od = xd.clone();
                    od[axis] = rng.random_range(1..=4);
                    let ty = TensorType::new(dtype, &od);
                    if rng.random_bool(0.5) {
                        d.random_constant(rng, &ty)?
                    } else if ty.numel().is_some_and(|n| n <= d.limits.max_elems) {
                        d.input(ty).name
                    } else {
                        reject!("Concat operand {ty} is too large");
                    }
                }
            };
            inputs.push(name);
        }
        inputs[1..].shuffle(rng);
        if rng.random_bool(0.3) {
            inputs.swap(0, 1);
        }
        let attrs = attrs_of(vec![("axis", Attr::Int(maybe_neg(rng, axis, r)))]);
        finish(self, d, Proposal::new(inputs, attrs))
    }
}

// ---- Split ----

/// Split(input, split?) along `axis`, by the constant `split` sizes or into `num_outputs` parts (opset 18).
pub struct Split;

impl OpSpec for Split {
    fn name(&self) -> &'static str {
        "Split"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 2), outputs: (1, 64) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Split", x, ALL)?;
        let xd = dims_of(x, "Split input")?;
        if xd.is_empty() {
            reject!("Split needs an input of rank >= 1");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, xd.len(), "Split axis")?;
        let dim = xd[axis];
        let sizes: Vec<usize> = match (opt_input(ins, 1), attrs.get("num_outputs")) {
            (Some(_), Some(_)) => {
                reject!("Split takes either the 'split' input or 'num_outputs', not both")
            }
            (None, None) => reject!("Split needs the 'split' input or the 'num_outputs' attribute"),
            (Some(s), None) => {
                let s = const_1d(s, "Split split", &[I64])?;
                if s.is_empty() || s.iter().any(|&v| v < 0) || s.iter().map(|&v| v as i128).sum::<i128>() != dim as i128
                {
                    reject!("Split sizes {s:?} do not add up to dim {dim}");
                }
                s.iter().map(|&v| v as usize).collect()
            }
            (None, Some(_)) => {
                let n = attr_int(attrs, "num_outputs", 0)?;
                if n < 1 || n as usize > dim {
                    reject!("Split num_outputs {n} is invalid for dim {dim}");
                }
                let n = n as usize;
                let chunk = dim.div_ceil(n);
                if chunk * (n - 1) >= dim {
                    reject!("Split of dim {dim} into {n} outputs leaves the last one empty");
                }
                let mut v = vec![chunk; n];
                v[n - 1] = dim - chunk * (n - 1);
                v
            }
        };
        Ok(sizes
            .into_iter()
            .map(|s| {
                let mut od = xd.clone();
                od[axis] = s;
                TensorType::new(x.ty.dtype, &od)
            })
            .collect())
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=5, |s| s.iter().any(|&v| v >= 2))?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let cands: Vec<usize> = (0..r).filter(|&i| xd[i] >= 2).collect();
        let axis = cands[rng.random_range(0..cands.len())];
        let dim = xd[axis];
        let k = rng.random_range(2..=dim.min(3));
        let mut attrs = Attrs::new();
        if axis != 0 || rng.random_bool(0.5) {
            attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
        }
        let mut inputs = vec![x.name];
        let chunk = dim.div_ceil(k);
        if chunk * (k - 1) < dim && rng.random_bool(0.5) {
            attrs.insert("num_outputs".into(), Attr::Int(k as i64));
        } else {
            // k positive sizes adding up to dim
            let mut cuts: Vec<usize> = (1..dim).collect();
            cuts.shuffle(rng);
            let mut cuts: Vec<usize> = cuts[..k - 1].to_vec();
            cuts.sort_unstable();
            let mut sizes = Vec::with_capacity(k);
            let mut prev = 0;
            for c in cuts.into_iter().chain([dim]) {
                sizes.push((c - prev) as i64);
                prev = c;
            }
            inputs.push(int_const(d, &sizes));
        }
        let p = Proposal { inputs, attrs, outputs: k };
        finish(self, d, p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{a, cfact, fact, ints, one, run};
    use super::*;

    #[test]
    fn concat_and_split() {
        let ax = a(vec![("axis", Attr::Int(-1))]);
        let out = one("Concat", &[fact(F32, &[2, 3]), fact(F32, &[2, 1]), fact(F32, &[2, 2])], &ax).unwrap();
        assert_eq!(out, TensorType::new(F32, &[2, 6]));
        assert!(one("Concat", &[fact(F32, &[2, 3]), fact(F32, &[3, 3])], &ax).is_err());
        assert!(one("Concat", &[fact(F32, &[2, 3]), fact(F16, &[2, 3])], &ax).is_err());
        assert!(one("Concat", &[fact(F32, &[2, 3])], &Attrs::new()).is_err(), "axis is required");
        let n = a(vec![("axis", Attr::Int(1)), ("num_outputs", Attr::Int(3))]);
        let out = run("Split", &[fact(F32, &[2, 7])], &n, 3).unwrap();
        assert_eq!(out.iter().map(|t| t.dims().unwrap()[1]).collect::<Vec<_>>(), [3, 3, 1]);
        let s = ints(&[1, 4]);
        let out = run("Split", &[fact(F32, &[5, 2]), cfact(&s)], &Attrs::new(), 2).unwrap();
        assert_eq!(out, [TensorType::new(F32, &[1, 2]), TensorType::new(F32, &[4, 2])]);
        assert!(run("Split", &[fact(F32, &[5, 2]), cfact(&s)], &Attrs::new(), 3).is_err());
        let s = ints(&[1, 3]);
        assert!(run("Split", &[fact(F32, &[5, 2]), cfact(&s)], &Attrs::new(), 2).is_err());
        assert!(run("Split", &[fact(F32, &[5, 2])], &Attrs::new(), 2).is_err());
        let n4 = a(vec![("num_outputs", Attr::Int(4))]);
        assert!(run("Split", &[fact(F32, &[5])], &n4, 4).is_err(), "5 into 4 by ceil leaves nothing");
    }
}
