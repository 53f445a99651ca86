//! Gather along one axis (constant indices are range-checked).

use super::{finish, maybe_neg, pick_static, INDEX};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use crate::ops::draft::random_dims;
use crate::ops::elementwise::ALL;
use crate::ops::{
    attr_int, check_dtype, const_ints, dims_of, input, norm_axis, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng,
};
use rand::Rng as _;

use DType::*;

// ---- Gather ----

/// Gather(data, indices) along `axis`: out = data[:axis] + indices.shape + data[axis+1:].
pub struct Gather;

impl OpSpec for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, idx) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("Gather", x, ALL)?;
        check_dtype("Gather indices", idx, INDEX)?;
        let xd = dims_of(x, "Gather data")?;
        if xd.is_empty() {
            reject!("Gather needs data of rank >= 1");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, xd.len(), "Gather axis")?;
        let id = dims_of(idx, "Gather indices")?;
        if idx.value.is_some() {
            let dim = xd[axis] as i64;
            let vals = const_ints(idx, "Gather indices")?;
            if let Some(v) = vals.iter().find(|&&v| v < -dim || v >= dim) {
                reject!("Gather index {v} is out of range for dim {dim}");
            }
        }
        let out: Vec<usize> = xd[..axis].iter().chain(&id).chain(&xd[axis + 1..]).copied().collect();
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=4, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let axis = rng.random_range(0..r);
        let dim = xd[axis] as i64;
        if dim == 0 {
            reject!("Gather on an empty axis");
        }
        let irank = rng.random_range(0..=2);
        let id = random_dims(rng, irank, 4, 16);
        let n: usize = id.iter().product();
        let vals: Vec<f64> = (0..n)
            .map(|_| {
                let v = rng.random_range(0..dim);
                (if rng.random_bool(0.25) { v - dim } else { v }) as f64
            })
            .collect();
        let dtype = if rng.random_bool(0.8) { I64 } else { I32 };
        let c = d.constant(Tensor::from_f64s(dtype, &id, &vals));
        let mut attrs = Attrs::new();
        if axis != 0 || rng.random_bool(0.3) {
            attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
        }
        finish(self, d, Proposal::new(vec![x.name, c], attrs))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{a, cfact, fact, one};
    use super::*;

    #[test]
    fn gather_with_scalar_indices_drops_a_dim() {
        let i = Tensor::from_i64(&[], &[-2]);
        let ax = a(vec![("axis", Attr::Int(1))]);
        assert_eq!(one("Gather", &[fact(F32, &[2, 3, 4]), cfact(&i)], &ax).unwrap(), TensorType::new(F32, &[2, 4]));
        let i2 = Tensor::from_f64s(I32, &[2, 2], &[0.0, 1.0, 2.0, 0.0]);
        assert_eq!(
            one("Gather", &[fact(F32, &[3, 4]), cfact(&i2)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[2, 2, 4])
        );
        let bad = Tensor::from_i64(&[], &[3]);
        assert!(one("Gather", &[fact(F32, &[2, 3, 4]), cfact(&bad)], &ax).is_err());
        assert!(one("Gather", &[fact(F32, &[]), cfact(&i)], &Attrs::new()).is_err());
    }
}
