//! Sampling the quantized ops of [`super`]: per-tensor or per-channel scales (k/128) and zero points as
//! constants, weights as small integer constants, data from the draft or fresh inputs.

use super::{Kind, QOp, Q};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use crate::ops::draft::random_type;
use crate::ops::quant::{scale_value, zero_point_value};
use crate::ops::shape::{finish, pick_static};
use crate::ops::{Draft, Proposal, Reject, Rng};
use rand::seq::IndexedRandom;
use rand::Rng as _;
use DType::*;

/// A scale constant (k/128, per tensor or of length `n`) and a zero point of `q` of the same shape.
fn qparams(d: &mut Draft, rng: &mut Rng, q: DType, n: Option<usize>) -> (String, String) {
    let dims: Vec<usize> = n.into_iter().collect();
    let len = n.unwrap_or(1);
    let scales: Vec<f64> = (0..len).map(|_| scale_value(rng)).collect();
    let zps: Vec<f64> = (0..len).map(|_| zero_point_value(rng, q)).collect();
    (d.constant(Tensor::from_f64s(F32, &dims, &scales)), d.constant(Tensor::from_f64s(q, &dims, &zps)))
}

/// Weights over `q`'s whole range (the draft's `random_tensor` keeps integers small).
fn full_range(rng: &mut Rng, q: DType, dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    let v: Vec<f64> =
        (0..n).map(|_| if q == U8 { rng.random_range(0..=255) } else { rng.random_range(-128..=127) } as f64).collect();
    Tensor::from_f64s(q, dims, &v)
}

/// The right operand's dtype for a left one of `a` (never int8 with uint8).
fn pair(rng: &mut Rng, a: DType) -> DType {
    if a == U8 {
        *Q.choose(rng).unwrap()
    } else {
        I8
    }
}

impl QOp {
    pub(super) fn sample_q(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let mut attrs = Attrs::new();
        let opt = |rng: &mut Rng, name: String| if rng.random_bool(0.8) { name } else { String::new() };
        let inputs = match self.kind {
            Kind::MatMul | Kind::Gemm | Kind::IntegerToFloat | Kind::DynamicMatMul => {
                let dtypes: &[DType] = if self.kind == Kind::DynamicMatMul { &[F32] } else { Q };
                let ranks = if self.kind == Kind::Gemm { 2..=2 } else { 2..=3 };
                let a = pick_static(d, rng, dtypes, ranks, |s| *s.last().unwrap() <= 16)?;
                let k = *a.ty.dims().unwrap().last().unwrap();
                let qa = if a.ty.dtype == F32 { *Q.choose(rng).unwrap() } else { a.ty.dtype };
                let qb = if self.kind == Kind::DynamicMatMul { qa } else { pair(rng, qa) };
                let cols = rng.random_range(1..=8);
                let trans = self.kind == Kind::Gemm && rng.random_bool(0.3);
                let b = d.constant(full_range(rng, qb, &if trans { [cols, k] } else { [k, cols] }));
                if trans {
                    attrs.insert("transB".into(), Attr::Int(1));
                }
                let per = rng.random_bool(0.3).then_some(cols);
                let (sb, zb) = qparams(d, rng, qb, per);
                match self.kind {
                    Kind::MatMul => {
                        let ((sa, za), (sy, zy)) = (qparams(d, rng, qa, None), qparams(d, rng, qa, None));
                        vec![a.name, sa, za, b, sb, zb, sy, zy]
                    }
                    Kind::Gemm => {
                        let (sa, za) = qparams(d, rng, qa, None);
                        let c = d.constant(Tensor::from_f64s(I32, &[cols], &vec![3.0; cols]));
                        let mut v = vec![a.name, sa, za, b, sb, zb, opt(rng, c)];
                        if rng.random_bool(0.6) {
                            let (sy, zy) = qparams(d, rng, qa, None);
                            v.extend([sy, zy]);
                        }
                        v
                    }
                    Kind::IntegerToFloat => {
                        let (sa, za) = qparams(d, rng, qa, None);
                        let bias = d.random_constant(rng, &TensorType::new(F32, &[cols]))?;
                        vec![a.name, b, sa, sb, opt(rng, za), opt(rng, zb), opt(rng, bias)]
                    }
                    _ => {
                        let bias = d.random_constant(rng, &TensorType::new(F32, &[cols]))?;
                        vec![a.name, b, sb, opt(rng, zb), opt(rng, bias)]
                    }
                }
            }
            Kind::Conv => {
                let x = pick_static(d, rng, Q, 4..=4, |s| s[1] <= 8 && s[2] >= 2 && s[3] >= 2)?;
                let xd = x.ty.dims().unwrap();
                let (qx, qw) = (x.ty.dtype, pair(rng, x.ty.dtype));
                let m = rng.random_range(1..=4);
                let k = rng.random_range(1..=xd[2].min(xd[3]).min(3));
                let w = d.constant(full_range(rng, qw, &[m, xd[1], k, k]));
                if rng.random_bool(0.3) {
                    attrs.insert("pads".into(), Attr::Ints(vec![1; 4]));
                }
                if rng.random_bool(0.3) {
                    attrs.insert("strides".into(), Attr::Ints(vec![2, 2]));
                }
                let (sx, zx) = qparams(d, rng, qx, None);
                let per = rng.random_bool(0.4).then_some(m);
                let (sw, zw) = qparams(d, rng, qw, per);
                let (sy, zy) = qparams(d, rng, qx, None);
                let b = d.constant(Tensor::from_f64s(I32, &[m], &vec![-5.0; m]));
                vec![x.name, sx, zx, w, sw, zw, sy, zy, opt(rng, b)]
            }
            Kind::Binary | Kind::Softmax | Kind::AvgPool | Kind::NhwcMaxPool | Kind::Concat => {
                let spatial = matches!(self.kind, Kind::AvgPool | Kind::NhwcMaxPool);
                let ranks = if spatial { 4..=4 } else { 1..=4 };
                let last = self.kind == Kind::NhwcMaxPool;
                let x = pick_static(d, rng, Q, ranks, |s| {
                    !spatial || (s[if last { 1 } else { 2 }] >= 2 && s[if last { 2 } else { 3 }] >= 2)
                })?;
                let q = x.ty.dtype;
                let (sx, zx) = qparams(d, rng, q, None);
                let (sy, zy) = qparams(d, rng, q, None);
                match self.kind {
                    Kind::Binary => {
                        let xd = x.ty.dims().unwrap();
                        let bd = if rng.random_bool(0.5) { xd.clone() } else { vec![*xd.last().unwrap()] };
                        let b = match d.pick(rng, |t| t.dtype == q && t.dims().as_deref() == Some(&bd[..])) {
                            Some(v) if rng.random_bool(0.5) => v.name,
                            _ => d.constant(full_range(rng, q, &bd)),
                        };
                        let (sb, zb) = qparams(d, rng, q, None);
                        vec![x.name, sx, opt(rng, zx), b, sb, opt(rng, zb), sy, opt(rng, zy)]
                    }
                    Kind::Softmax => {
                        attrs.insert("opset".into(), Attr::Int(13));
                        attrs.insert("axis".into(), Attr::Int(-1));
                        vec![x.name, sx, opt(rng, zx), sy, zy]
                    }
                    Kind::Concat => {
                        let xd = x.ty.dims().unwrap();
                        attrs.insert("axis".into(), Attr::Int(rng.random_range(0..xd.len()) as i64));
                        let other = d.constant(full_range(rng, q, &xd));
                        let (so, zo) = qparams(d, rng, q, None);
                        vec![sy, zy, x.name, sx, zx, other, so, zo]
                    }
                    _ => {
                        attrs.insert("kernel_shape".into(), Attr::Ints(vec![2, 2]));
                        if rng.random_bool(0.3) {
                            attrs.insert("strides".into(), Attr::Ints(vec![2, 2]));
                        }
                        if last {
                            vec![x.name]
                        } else {
                            vec![x.name, sx, opt(rng, zx), sy, opt(rng, zy)]
                        }
                    }
                }
            }
            Kind::SkipLayerNorm => {
                let x = d.pick_or_input(
                    rng,
                    |t| [F32, F16].contains(&t.dtype) && t.rank() == Some(3),
                    |r| Some(random_type(r, &[F32, F16], 3..=3, max)),
                )?;
                let h = TensorType::new(x.ty.dtype, &[x.ty.dims().unwrap()[2]]);
                let skip = match d.pick(rng, |t| *t == x.ty) {
                    Some(v) if rng.random_bool(0.6) => v.name,
                    _ => d.input(x.ty.clone()).name,
                };
                let (gamma, beta, bias) =
                    (d.random_constant(rng, &h)?, d.random_constant(rng, &h)?, d.random_constant(rng, &h)?);
                attrs.insert("epsilon".into(), Attr::Float(*[1e-5f32, 1e-12].choose(rng).unwrap()));
                vec![x.name, skip, gamma, opt(rng, beta), opt(rng, bias)]
            }
        };
        let mut inputs = inputs;
        while inputs.last().is_some_and(|i| i.is_empty()) {
            inputs.pop();
        }
        finish(self, d, Proposal::new(inputs, attrs))
    }
}
