//! Squeeze, Unsqueeze, Expand and Tile: drop or insert size-1 dims, broadcast or repeat dims.

use super::{checked_numel, const_1d, finish, int_const, maybe_neg, norm_axes, opt_input, pick_static};
use crate::graph::{Attrs, DType, TensorType};
use crate::ops::draft::random_type;
use crate::ops::elementwise::ALL;
use crate::ops::{broadcast, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::seq::SliceRandom;
use rand::Rng as _;

use DType::*;

// ---- Squeeze / Unsqueeze ----

/// Squeeze(data, axes?): removes the given size-1 dims, or all of them when axes is omitted or empty.
pub struct Squeeze;

impl OpSpec for Squeeze {
    fn name(&self) -> &'static str {
        "Squeeze"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 2), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Squeeze", x, ALL)?;
        let xd = dims_of(x, "Squeeze data")?;
        let axes = match opt_input(ins, 1) {
            Some(f) => norm_axes(&const_1d(f, "Squeeze axes", &[I64])?, xd.len(), "Squeeze axes")?,
            None => vec![],
        };
        for &a in &axes {
            if xd[a] != 1 {
                reject!("Squeeze axis {a} has size {}", xd[a]);
            }
        }
        let out: Vec<usize> = if axes.is_empty() {
            xd.iter().copied().filter(|&v| v != 1).collect()
        } else {
            xd.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &v)| v).collect()
        };
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let fits = |t: &TensorType| ALL.contains(&t.dtype) && t.dims().is_some_and(|s| s.contains(&1));
        let x = d.pick_or_input(rng, fits, |r| {
            let mut t = random_type(r, ALL, 1..=5, max);
            let rank = t.rank().unwrap();
            let mut dims = t.dims().unwrap();
            dims[r.random_range(0..rank)] = 1;
            t = TensorType::new(t.dtype, &dims);
            Some(t)
        })?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let mut inputs = vec![x.name];
        if rng.random_bool(0.8) {
            let mut ones: Vec<usize> = (0..r).filter(|&i| xd[i] == 1).collect();
            ones.shuffle(rng);
            ones.truncate(rng.random_range(1..=ones.len()));
            let ax: Vec<i64> = ones.iter().map(|&a| maybe_neg(rng, a, r)).collect();
            inputs.push(int_const(d, &ax));
        }
        finish(self, d, Proposal::new(inputs, Attrs::new()))
    }
}

/// Unsqueeze(data, axes): inserts size-1 dims at the given positions of the output.
pub struct Unsqueeze;

impl OpSpec for Unsqueeze {
    fn name(&self) -> &'static str {
        "Unsqueeze"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Unsqueeze", x, ALL)?;
        let xd = dims_of(x, "Unsqueeze data")?;
        let axes = const_1d(input(ins, 1)?, "Unsqueeze axes", &[I64])?;
        let out_rank = xd.len() + axes.len();
        let axes = norm_axes(&axes, out_rank, "Unsqueeze axes")?;
        let mut rest = xd.iter();
        let out: Vec<usize> =
            (0..out_rank).map(|i| if axes.contains(&i) { 1 } else { *rest.next().unwrap() }).collect();
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=4, |_| true)?;
        let r = x.ty.rank().unwrap();
        let k = rng.random_range(1..=(5 - r).min(2));
        let out_rank = r + k;
        let mut pos: Vec<usize> = (0..out_rank).collect();
        pos.shuffle(rng);
        let ax: Vec<i64> = pos[..k].iter().map(|&a| maybe_neg(rng, a, out_rank)).collect();
        let axes = int_const(d, &ax);
        finish(self, d, Proposal::new(vec![x.name, axes], Attrs::new()))
    }
}

// ---- Expand / Tile ----

/// Expand(input, shape): bidirectional (numpy) broadcast of the input with a constant shape.
pub struct Expand;

impl OpSpec for Expand {
    fn name(&self) -> &'static str {
        "Expand"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Expand", x, ALL)?;
        let xd = dims_of(x, "Expand input")?;
        let shape = const_1d(input(ins, 1)?, "Expand shape", &[I64])?;
        if shape.iter().any(|&v| v < 0) {
            reject!("Expand shape {shape:?} has a negative dim");
        }
        let out = broadcast(&[xd, shape.iter().map(|&v| v as usize).collect()])?;
        checked_numel(&out)?;
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=4, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let extra = rng.random_range(0..=(5 - xd.len()).min(2));
        let mut shape: Vec<i64> = (0..extra).map(|_| rng.random_range(1..=3)).collect();
        for &v in &xd {
            shape.push(match v {
                1 if rng.random_bool(0.6) => rng.random_range(1..=4),
                _ if rng.random_bool(0.3) => 1,
                v => v as i64,
            });
        }
        if rng.random_bool(0.2) {
            let drop = rng.random_range(0..=shape.len());
            shape.drain(..drop);
        }
        let s = int_const(d, &shape);
        finish(self, d, Proposal::new(vec![x.name, s], Attrs::new()))
    }
}

/// Tile(input, repeats): each dim multiplied by its constant repeat count.
pub struct Tile;

impl OpSpec for Tile {
    fn name(&self) -> &'static str {
        "Tile"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Tile", x, ALL)?;
        let xd = dims_of(x, "Tile input")?;
        let reps = const_1d(input(ins, 1)?, "Tile repeats", &[I64])?;
        if reps.len() != xd.len() || reps.iter().any(|&v| v < 0) {
            reject!("Tile repeats {reps:?} do not fit rank {}", xd.len());
        }
        let mut out = Vec::with_capacity(xd.len());
        for (&v, &rep) in xd.iter().zip(&reps) {
            out.push(
                v.checked_mul(rep as usize)
                    .ok_or_else(|| Reject(format!("Tile of {xd:?} by {reps:?} is too large")))?,
            );
        }
        checked_numel(&out)?;
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=4, |_| true)?;
        let r = x.ty.rank().unwrap();
        let reps: Vec<i64> = (0..r).map(|_| if rng.random_bool(0.5) { 1 } else { rng.random_range(1..=3) }).collect();
        let c = int_const(d, &reps);
        finish(self, d, Proposal::new(vec![x.name, c], Attrs::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cfact, fact, ints, one};
    use super::*;

    #[test]
    fn squeeze_unsqueeze_expand_tile() {
        let ax = ints(&[0, -1]);
        assert_eq!(
            one("Squeeze", &[fact(F32, &[1, 1]), cfact(&ax)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[])
        );
        assert_eq!(one("Squeeze", &[fact(F32, &[1, 3, 1])], &Attrs::new()).unwrap(), TensorType::new(F32, &[3]));
        assert!(one("Squeeze", &[fact(F32, &[2, 1]), cfact(&ax)], &Attrs::new()).is_err());
        assert_eq!(
            one("Unsqueeze", &[fact(F32, &[]), cfact(&ax)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[1, 1])
        );
        let ax2 = ints(&[1, -1]);
        assert_eq!(
            one("Unsqueeze", &[fact(F32, &[3, 4]), cfact(&ax2)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[3, 1, 4, 1])
        );
        let dup = ints(&[2, -1]);
        assert!(one("Unsqueeze", &[fact(F32, &[3]), cfact(&dup)], &Attrs::new()).is_err());
        let s = ints(&[2, 1, 4]);
        assert_eq!(
            one("Expand", &[fact(F32, &[3, 1]), cfact(&s)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[2, 3, 4])
        );
        let s = ints(&[2]);
        assert!(one("Expand", &[fact(F32, &[3]), cfact(&s)], &Attrs::new()).is_err());
        let r = ints(&[2, 1]);
        assert_eq!(
            one("Tile", &[fact(I64, &[3, 4]), cfact(&r)], &Attrs::new()).unwrap(),
            TensorType::new(I64, &[6, 4])
        );
        assert!(one("Tile", &[fact(I64, &[3]), cfact(&r)], &Attrs::new()).is_err());
    }
}
