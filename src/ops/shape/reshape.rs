//! Reshape, Transpose and Flatten: the same elements under new dims or a new dim order.

use super::{checked_numel, const_1d, finish, int_const, pick_static};
use crate::graph::{Attr, Attrs, DType, TensorType};
use crate::ops::elementwise::ALL;
use crate::ops::{attr_int, attr_ints, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::seq::SliceRandom;
use rand::Rng as _;

use DType::*;

// ---- Reshape ----

/// Reshape(data, shape): `0` copies the input dim (unless allowzero=1), one `-1` is inferred.
pub struct Reshape;

impl OpSpec for Reshape {
    fn name(&self) -> &'static str {
        "Reshape"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Reshape", x, ALL)?;
        let xd = dims_of(x, "Reshape data")?;
        let shape = const_1d(input(ins, 1)?, "Reshape shape", &[I64])?;
        let allowzero = attr_int(attrs, "allowzero", 0)? != 0;
        let mut out = Vec::with_capacity(shape.len());
        let mut infer_at = None;
        for (i, &s) in shape.iter().enumerate() {
            match s {
                -1 => {
                    if infer_at.is_some() {
                        reject!("Reshape shape {shape:?} has more than one -1");
                    }
                    infer_at = Some(i);
                    out.push(1);
                }
                0 if !allowzero => match xd.get(i) {
                    Some(&d) => out.push(d),
                    None => reject!("Reshape shape {shape:?} copies dim {i} of a rank-{} input", xd.len()),
                },
                s if s >= 0 => out.push(s as usize),
                _ => reject!("Reshape shape {shape:?} has the invalid value {s}"),
            }
        }
        if allowzero && infer_at.is_some() && shape.contains(&0) {
            reject!("Reshape with allowzero=1 cannot have both 0 and -1 in {shape:?}");
        }
        let total = checked_numel(&xd)?;
        let known = checked_numel(&out)?;
        match infer_at {
            Some(i) => {
                if known == 0 || total % known != 0 {
                    reject!("Reshape cannot infer the -1 of {shape:?} for input {:?}", xd);
                }
                out[i] = total / known;
            }
            None if known != total => {
                reject!("Reshape of {:?} to {shape:?} changes the element count", xd)
            }
            None => {}
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=5, |s| s.iter().all(|&v| v >= 1))?;
        let xd = x.ty.dims().unwrap();
        let n: usize = xd.iter().product();
        let rank = rng.random_range(if n == 1 { 0 } else { 1 }..=5);
        let mut target = vec![1usize; rank];
        for p in prime_factors(n) {
            target[rng.random_range(0..rank)] *= p;
        }
        let mut vals: Vec<i64> = target.iter().map(|&t| t as i64).collect();
        for (i, v) in vals.iter_mut().enumerate() {
            if xd.get(i) == Some(&target[i]) && rng.random_bool(0.3) {
                *v = 0;
            }
        }
        if rank > 0 && rng.random_bool(0.5) {
            vals[rng.random_range(0..rank)] = -1;
        }
        let shape = int_const(d, &vals);
        finish(self, d, Proposal::new(vec![x.name, shape], Attrs::new()))
    }
}

fn prime_factors(mut n: usize) -> Vec<usize> {
    let mut f = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            f.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        f.push(n);
    }
    f
}

// ---- Transpose ----

/// Transpose(data) with attribute `perm` (default: reversed dims).
pub struct Transpose;

impl OpSpec for Transpose {
    fn name(&self) -> &'static str {
        "Transpose"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Transpose", x, ALL)?;
        let xd = dims_of(x, "Transpose data")?;
        let r = xd.len();
        let perm = match attr_ints(attrs, "perm")? {
            Some(p) => p,
            None => (0..r as i64).rev().collect(),
        };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..r as i64).collect::<Vec<_>>() {
            reject!("Transpose perm {perm:?} is not a permutation of 0..{r}");
        }
        let out: Vec<usize> = perm.iter().map(|&p| xd[p as usize]).collect();
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=5, |_| true)?;
        let r = x.ty.rank().unwrap();
        let mut attrs = Attrs::new();
        if r >= 2 && rng.random_bool(0.8) {
            let mut perm: Vec<i64> = (0..r as i64).collect();
            perm.shuffle(rng);
            attrs.insert("perm".into(), Attr::Ints(perm));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

// ---- Flatten ----

/// Flatten(input) at `axis` in [-r, r] into a 2-D tensor.
pub struct Flatten;

impl OpSpec for Flatten {
    fn name(&self) -> &'static str {
        "Flatten"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Flatten", x, ALL)?;
        let xd = dims_of(x, "Flatten input")?;
        let r = xd.len() as i64;
        let axis = attr_int(attrs, "axis", 1)?;
        if axis < -r || axis > r {
            reject!("Flatten axis {axis} is out of range for rank {r}");
        }
        let axis = (if axis < 0 { axis + r } else { axis }) as usize;
        let out = [checked_numel(&xd[..axis])?, checked_numel(&xd[axis..])?];
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=5, |_| true)?;
        let r = x.ty.rank().unwrap();
        let axis = rng.random_range(0..=r);
        let mut attrs = Attrs::new();
        if axis != 1 || rng.random_bool(0.3) {
            let a = if axis > 0 && rng.random_bool(0.3) { axis as i64 - r as i64 } else { axis as i64 };
            attrs.insert("axis".into(), Attr::Int(a));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{a, cfact, fact, ints, one};
    use super::*;
    use crate::graph::Tensor;

    #[test]
    fn reshape_copies_zero_and_infers_minus_one() {
        let s = ints(&[0, -1, 2]);
        let out = one("Reshape", &[fact(F32, &[2, 3, 4]), cfact(&s)], &Attrs::new()).unwrap();
        assert_eq!(out, TensorType::new(F32, &[2, 6, 2]));
        let s = Tensor::from_i64(&[0], &[]);
        assert_eq!(one("Reshape", &[fact(I8, &[1, 1]), cfact(&s)], &Attrs::new()).unwrap(), TensorType::new(I8, &[]));
        for bad in [&[-1, -1][..], &[5], &[0, 0, 0, 0], &[-2, 12], &[7, -1]] {
            let s = ints(bad);
            assert!(one("Reshape", &[fact(F32, &[2, 3, 4]), cfact(&s)], &Attrs::new()).is_err(), "{bad:?}");
        }
        assert!(
            one("Reshape", &[fact(F32, &[2, 3]), fact(I64, &[2])], &Attrs::new()).is_err(),
            "shape must be constant"
        );
    }

    #[test]
    fn transpose_and_flatten() {
        let out = one("Transpose", &[fact(F32, &[2, 3, 4])], &Attrs::new()).unwrap();
        assert_eq!(out, TensorType::new(F32, &[4, 3, 2]));
        let p = a(vec![("perm", Attr::Ints(vec![1, 0, 2]))]);
        assert_eq!(one("Transpose", &[fact(F32, &[2, 3, 4])], &p).unwrap(), TensorType::new(F32, &[3, 2, 4]));
        let p = a(vec![("perm", Attr::Ints(vec![1, 1, 2]))]);
        assert!(one("Transpose", &[fact(F32, &[2, 3, 4])], &p).is_err());
        let f = one("Flatten", &[fact(F32, &[2, 3, 4])], &a(vec![("axis", Attr::Int(-1))])).unwrap();
        assert_eq!(f, TensorType::new(F32, &[6, 4]));
        let f = one("Flatten", &[fact(F32, &[2, 3])], &a(vec![("axis", Attr::Int(2))])).unwrap();
        assert_eq!(f, TensorType::new(F32, &[6, 1]));
        let f = one("Flatten", &[fact(F32, &[])], &a(vec![("axis", Attr::Int(0))])).unwrap();
        assert_eq!(f, TensorType::new(F32, &[1, 1]));
        assert!(one("Flatten", &[fact(F32, &[])], &Attrs::new()).is_err(), "default axis 1 > rank 0");
    }
}
