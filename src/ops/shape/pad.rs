//! Pad in mode constant, reflect or edge (wrap is accepted but not sampled).

use super::{const_1d, finish, int_const, maybe_neg, norm_axes, opt_input, pick_static, INDEX};
use crate::graph::{Attr, Attrs, DType, TensorType};
use crate::ops::draft::random_tensor;
use crate::ops::{attr_string, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng as _;

use DType::*;

const PAD_DTYPES: &[DType] = &[F32, F64, F16, I8, U8, I32, I64, U32, U64, Bool];

// ---- Pad ----

/// Pad(data, pads, constant_value?, axes?) in mode constant / reflect / edge (/ wrap, accepted but not sampled).
pub struct Pad;

impl OpSpec for Pad {
    fn name(&self) -> &'static str {
        "Pad"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 4), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Pad", x, PAD_DTYPES)?;
        let xd = dims_of(x, "Pad data")?;
        let r = xd.len();
        let pads = const_1d(input(ins, 1)?, "Pad pads", &[I64])?;
        if let Some(cv) = opt_input(ins, 2) {
            if cv.ty.dtype != x.ty.dtype || cv.ty.numel() != Some(1) || cv.ty.rank().unwrap_or(2) > 1 {
                reject!("Pad constant_value must be a scalar of {}, got {}", x.ty.dtype, cv.ty);
            }
        }
        let axes = match opt_input(ins, 3) {
            Some(f) => norm_axes(&const_1d(f, "Pad axes", INDEX)?, r, "Pad axes")?,
            None => (0..r).collect(),
        };
        let k = axes.len();
        if pads.len() != 2 * k {
            reject!("Pad pads {pads:?} must have 2 x {k} values");
        }
        let mode = attr_string(attrs, "mode", "constant")?;
        if !["constant", "reflect", "edge", "wrap"].contains(&mode.as_str()) {
            reject!("Pad mode '{mode}' is unknown");
        }
        let mut out = xd.clone();
        for (i, &a) in axes.iter().enumerate() {
            let (pb, pe, dim) = (pads[i], pads[i + k], xd[a] as i64);
            let padded = pb > 0 || pe > 0;
            let ok = match mode.as_str() {
                "reflect" => !padded || (pb < dim && pe < dim),
                "edge" => !padded || dim > 0,
                "wrap" => !padded || (pb <= dim && pe <= dim),
                _ => true,
            };
            if !ok {
                reject!("Pad {mode} cannot pad dim {dim} by ({pb}, {pe})");
            }
            let n = (dim as i128) + (pb as i128) + (pe as i128);
            if n < 0 || n > i64::MAX as i128 {
                reject!("Pad of dim {dim} by ({pb}, {pe}) gives size {n}");
            }
            out[a] = n as usize;
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, PAD_DTYPES, 1..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let mode = *["constant", "constant", "reflect", "edge"].choose(rng).unwrap();
        let mut axes: Vec<usize> = (0..r).collect();
        let use_axes = rng.random_bool(0.3);
        if use_axes {
            axes.shuffle(rng);
            axes.truncate(rng.random_range(1..=r));
        }
        let k = axes.len();
        let mut pads = vec![0i64; 2 * k];
        for (i, &a) in axes.iter().enumerate() {
            let dim = xd[a] as i64;
            for j in [i, i + k] {
                pads[j] = match mode {
                    "reflect" => rng.random_range(0..=(dim - 1).min(2)),
                    "constant" if dim >= 2 && rng.random_bool(0.1) => -1,
                    _ => rng.random_range(0..=2),
                };
            }
            if pads[i] < 0 && pads[i + k] < 0 && dim < 3 {
                pads[i] = 0;
            }
        }
        let mut inputs = vec![x.name.clone(), int_const(d, &pads)];
        if mode == "constant" && rng.random_bool(0.5) {
            let cv = random_tensor(rng, x.ty.dtype, &[]);
            inputs.push(d.constant(cv));
        } else if use_axes {
            inputs.push(String::new());
        }
        if use_axes {
            let ax: Vec<i64> = axes.iter().map(|&a| maybe_neg(rng, a, r)).collect();
            inputs.push(int_const(d, &ax));
        }
        let mut attrs = Attrs::new();
        if mode != "constant" || rng.random_bool(0.3) {
            attrs.insert("mode".into(), Attr::str(mode));
        }
        finish(self, d, Proposal::new(inputs, attrs))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{a, cfact, fact, ints, one};
    use super::*;
    use crate::graph::Tensor;

    #[test]
    fn pad_modes() {
        let p = ints(&[1, 2, 0, 1]);
        let refl = a(vec![("mode", Attr::str("reflect"))]);
        let out = one("Pad", &[fact(F32, &[3, 3]), cfact(&p)], &refl).unwrap();
        assert_eq!(out, TensorType::new(F32, &[4, 6]));
        assert!(one("Pad", &[fact(F32, &[3, 2]), cfact(&p)], &refl).is_err(), "reflect pad 2 on dim 2");
        let cv = Tensor::from_f64s(F32, &[], &[1.5]);
        let ax = ints(&[-1]);
        let p2 = ints(&[1, -1]);
        let out = one("Pad", &[fact(F32, &[3, 2]), cfact(&p2), cfact(&cv), cfact(&ax)], &Attrs::new()).unwrap();
        assert_eq!(out, TensorType::new(F32, &[3, 2]));
        assert!(one("Pad", &[fact(F32, &[3, 2]), cfact(&p2)], &Attrs::new()).is_err(), "pads length");
        let cv64 = Tensor::from_f64s(F64, &[], &[1.5]);
        assert!(one("Pad", &[fact(F32, &[3, 2]), cfact(&p), cfact(&cv64)], &Attrs::new()).is_err());
        assert!(one("Pad", &[fact(I16, &[3, 2]), cfact(&p)], &Attrs::new()).is_err(), "ORT has no int16 Pad");
    }
}
