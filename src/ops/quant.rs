//! Type conversion and quantization: Cast, QuantizeLinear, DequantizeLinear (opset 19 forms, as in opset 20);
//! DequantizeLinear also in opset 21's blocked form (`block_size`, 4-bit inputs), which only patterns written at
//! opset 21 bring (seeds never draw it). Dtype lists are what ONNX Runtime 1.31's CPU provider runs
//! (docs/ort-cpu-dtypes.tsv).

use super::draft::random_type;
use super::elementwise::{ALL, F32_16};
use super::shape::{finish, maybe_neg, opt_input, pick_static};
use super::{
    attr_int, check_dtype, const_ints, input, names, norm_axis, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng,
};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use rand::seq::IndexedRandom;
use rand::Rng as _;

use DType::*;
const QUANT: &[DType] = &[I8, U8];
const DEQUANT_IN: &[DType] = &[I8, U8, I32];
/// ONNX's 4-bit integers (opset 21), which the op catalog does not otherwise model.
const U4: DType = Other(21);
const I4: DType = Other(22);
/// What DequantizeLinear takes: [`DEQUANT_IN`] and, as opset 21 has it, the 4-bit integers.
const DEQUANT_TAKES: &[DType] = &[I8, U8, I32, U4, I4];

/// Cast(input) to the ONNX dtype code in attribute `to`.
pub struct Cast;

impl OpSpec for Cast {
    fn name(&self) -> &'static str {
        "Cast"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        // from a string: ORT parses it as a number and fails on any other text (`stod`), such as a label
        check_dtype("Cast", x, ALL)?;
        if !attrs.contains_key("to") {
            reject!("Cast needs the attribute 'to'");
        }
        let code = attr_int(attrs, "to", 0)?;
        let to = DType::from_onnx(i32::try_from(code).unwrap_or(0));
        // to a string from every other type (ORT's CPU Cast, measured with 1.31.1); seeds never draw it
        if !ALL.contains(&to) && to != Str {
            reject!("Cast to ONNX type {code} is not supported (allowed: {}, string)", names(ALL));
        }
        Ok(vec![x.ty.with_dtype(to)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| ALL.contains(&t.dtype), |r| Some(random_type(r, ALL, 0..=5, max)))?;
        let to = *ALL.choose(rng).unwrap();
        let attrs = Attrs::from([("to".to_string(), Attr::Int(to.onnx() as i64))]);
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

/// Checks scale/zero-point shapes: per-tensor (a scalar or one-element 1-D scale), per-axis (a 1-D scale as
/// long as x's dim at attribute `axis`, default 1) or, with a positive `block_size` (opset 21), blocked (the
/// scale of x's rank, its dim at `axis` x's divided by the block size and rounded up, the others x's); the zero
/// point has the scale's shape.
fn check_qparams(op: &str, x: &Fact, scale: &Fact, zp: Option<&Fact>, attrs: &Attrs) -> Result<(), Reject> {
    let Some(sd) = scale.ty.dims() else { reject!("{op} scale needs a static shape") };
    let block = attr_int(attrs, "block_size", 0)?;
    let per_tensor = block == 0 && (sd.is_empty() || sd == [1]);
    if block < 0 {
        reject!("{op} block_size must not be negative, got {block}");
    } else if block > 0 {
        let Some(xd) = x.ty.dims() else { reject!("{op} blocked quantization needs a static input shape") };
        let axis = norm_axis(attr_int(attrs, "axis", 1)?, xd.len(), &format!("{op} axis"))?;
        let want: Vec<usize> =
            xd.iter().enumerate().map(|(i, &d)| if i == axis { d.div_ceil(block as usize) } else { d }).collect();
        if sd != want {
            reject!(
                "{op} blocked scale {} does not match input {} in blocks of {block} on axis {axis}",
                scale.ty,
                x.ty
            );
        }
    } else if !per_tensor {
        if sd.len() != 1 {
            reject!("{op} scale must be a scalar or 1-D (blocked quantization is opset 21), got {}", scale.ty);
        }
        let Some(xd) = x.ty.dims() else { reject!("{op} per-axis quantization needs a static input shape") };
        if xd.is_empty() {
            reject!("{op} per-axis quantization needs an input of rank >= 1");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 1)?, xd.len(), &format!("{op} axis"))?;
        if xd[axis] != sd[0] {
            reject!("{op} scale of length {} does not match dim {} of axis {axis}", sd[0], xd[axis]);
        }
    }
    if let Some(z) = zp {
        let zd = z.ty.dims();
        let ok = if per_tensor { zd.is_some_and(|z| z.is_empty() || z == [1]) } else { zd.as_deref() == Some(&sd[..]) };
        if !ok {
            reject!("{op} zero point {} does not match scale {}", z.ty, scale.ty);
        }
    }
    Ok(())
}

/// A positive scale value that is exact in float16 (k/128).
pub(super) fn scale_value(rng: &mut Rng) -> f64 {
    rng.random_range(1..=25) as f64 / 128.0
}

/// A zero point of `dt` near its range's middle (uint8 96..=160, int8 -16..=16; 0 for int32).
pub(super) fn zero_point_value(rng: &mut Rng, dt: DType) -> f64 {
    match dt {
        U8 => rng.random_range(96..=160) as f64,
        I8 => rng.random_range(-16..=16) as f64,
        _ => 0.0,
    }
}

/// QuantizeLinear(x, y_scale, y_zero_point?): float32/16 to int8/uint8 (the zero point's dtype; uint8 without one).
pub struct Quantize;

impl OpSpec for Quantize {
    fn name(&self) -> &'static str {
        "QuantizeLinear"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 3), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, s) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("QuantizeLinear", x, F32_16)?;
        if s.ty.dtype != x.ty.dtype {
            reject!("QuantizeLinear y_scale must be {}, got {}", x.ty.dtype, s.ty.dtype);
        }
        let zp = opt_input(ins, 2);
        let out = match zp {
            Some(z) => {
                check_dtype("QuantizeLinear y_zero_point", z, QUANT)?;
                z.ty.dtype
            }
            None => U8,
        };
        check_qparams("QuantizeLinear", x, s, zp, attrs)?;
        Ok(vec![x.ty.with_dtype(out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, F32_16, 0..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let mut attrs = Attrs::new();
        let per_axis = r >= 1 && rng.random_bool(0.3);
        let qd: Vec<usize> = if per_axis {
            let axis = rng.random_range(0..r);
            if axis != 1 || rng.random_bool(0.3) {
                attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
            }
            vec![xd[axis]]
        } else if rng.random_bool(0.2) {
            vec![1]
        } else {
            vec![]
        };
        let n: usize = qd.iter().product();
        let scales: Vec<f64> = (0..n).map(|_| scale_value(rng)).collect();
        let scale = d.constant(Tensor::from_f64s(x.ty.dtype, &qd, &scales));
        let mut inputs = vec![x.name, scale];
        if rng.random_bool(0.85) {
            let dt = *QUANT.choose(rng).unwrap();
            let zps: Vec<f64> = (0..n)
                .map(|_| match (dt, rng.random_bool(0.3)) {
                    (U8, true) => 128.0,
                    (U8, false) => rng.random_range(96..=160) as f64,
                    (_, true) => 0.0,
                    _ => rng.random_range(-16..=16) as f64,
                })
                .collect();
            inputs.push(d.constant(Tensor::from_f64s(dt, &qd, &zps)));
        }
        finish(self, d, Proposal::new(inputs, attrs))
    }
}

/// DequantizeLinear(x, x_scale, x_zero_point?): int8/uint8/int32 (and, from opset 21's patterns, 4-bit integers)
/// to the scale's dtype (float32 or float16).
pub struct Dequantize;

impl OpSpec for Dequantize {
    fn name(&self) -> &'static str {
        "DequantizeLinear"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 3), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, s) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("DequantizeLinear", x, DEQUANT_TAKES)?;
        check_dtype("DequantizeLinear x_scale", s, F32_16)?;
        let zp = opt_input(ins, 2);
        if let Some(z) = zp {
            if z.ty.dtype != x.ty.dtype {
                reject!("DequantizeLinear x_zero_point must be {}, got {}", x.ty.dtype, z.ty.dtype);
            }
            if x.ty.dtype == I32 && const_ints(z, "DequantizeLinear int32 x_zero_point")?.iter().any(|&v| v != 0) {
                reject!("DequantizeLinear on int32 needs a zero x_zero_point");
            }
        }
        check_qparams("DequantizeLinear", x, s, zp, attrs)?;
        Ok(vec![x.ty.with_dtype(s.ty.dtype)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        // int8/uint8 values are preferred (e.g. QuantizeLinear outputs, making Q-DQ chains); int32 only sometimes
        let dtypes: &[DType] = if rng.random_bool(0.15) { DEQUANT_IN } else { QUANT };
        let x = pick_static(d, rng, dtypes, 0..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let dt = x.ty.dtype;
        let mut attrs = Attrs::new();
        let qd: Vec<usize> = if r >= 1 && rng.random_bool(0.3) {
            let axis = rng.random_range(0..r);
            if axis != 1 || rng.random_bool(0.3) {
                attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
            }
            vec![xd[axis]]
        } else if rng.random_bool(0.2) {
            vec![1]
        } else {
            vec![]
        };
        let n: usize = qd.iter().product();
        let sdt = if rng.random_bool(0.85) { F32 } else { F16 };
        let scales: Vec<f64> = (0..n).map(|_| scale_value(rng)).collect();
        let scale = d.constant(Tensor::from_f64s(sdt, &qd, &scales));
        let mut inputs = vec![x.name, scale];
        if rng.random_bool(0.8) {
            let zps: Vec<f64> = (0..n).map(|_| zero_point_value(rng, dt)).collect();
            inputs.push(d.constant(Tensor::from_f64s(dt, &qd, &zps)));
        }
        finish(self, d, Proposal::new(inputs, attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(Cast));
    v.push(Box::new(Quantize));
    v.push(Box::new(Dequantize));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;

    fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
        Some(Fact { ty: TensorType::new(d, s), value: None })
    }

    fn cfact(t: &Tensor) -> Option<Fact<'_>> {
        Some(Fact { ty: t.ty(), value: Some(t) })
    }

    fn one(op: &str, ins: &[Option<Fact>], attrs: &[(&str, i64)]) -> Result<TensorType, Reject> {
        let attrs: Attrs = attrs.iter().map(|(k, v)| (k.to_string(), Attr::Int(*v))).collect();
        infer_node(lookup("", op).unwrap(), ins, &attrs, 1).map(|mut v| v.remove(0))
    }

    #[test]
    fn cast_changes_only_the_dtype() {
        let out = one("Cast", &[fact(F32, &[2, 3])], &[("to", 10)]).unwrap();
        assert_eq!(out, TensorType::new(F16, &[2, 3]));
        assert_eq!(one("Cast", &[fact(Bool, &[])], &[("to", 7)]).unwrap(), TensorType::new(I64, &[]));
        // to a string (ORT's CPU Cast formats numbers), never from one (ORT fails parsing a label)
        assert_eq!(one("Cast", &[fact(F32, &[2])], &[("to", 8)]).unwrap(), TensorType::new(Str, &[2]));
        let text = Some(Fact { ty: TensorType::new(Str, &[2]), value: None });
        assert!(one("Cast", &[text], &[("to", 1)]).is_err(), "no cast from strings");
        assert!(one("Cast", &[fact(F32, &[2])], &[]).is_err(), "'to' is required");
        assert!(one("Cast", &[fact(BF16, &[2])], &[("to", 1)]).is_err());
    }

    #[test]
    fn quantize_per_tensor_and_per_axis() {
        let s = Tensor::from_f32(&[], &[0.1]);
        let z = Tensor::from_f64s(I8, &[], &[3.0]);
        let out = one("QuantizeLinear", &[fact(F32, &[2, 3]), cfact(&s), cfact(&z)], &[]).unwrap();
        assert_eq!(out, TensorType::new(I8, &[2, 3]));
        assert_eq!(one("QuantizeLinear", &[fact(F32, &[2, 3]), cfact(&s)], &[]).unwrap(), TensorType::new(U8, &[2, 3]));
        // per-axis: axis 0 has 2 entries (default axis 1 would need 3)
        let s2 = Tensor::from_f32(&[2], &[0.1, 0.2]);
        let z2 = Tensor::from_f64s(U8, &[2], &[128.0, 100.0]);
        let out = one("QuantizeLinear", &[fact(F32, &[2, 3]), cfact(&s2), cfact(&z2)], &[("axis", 0)]).unwrap();
        assert_eq!(out, TensorType::new(U8, &[2, 3]));
        assert!(one("QuantizeLinear", &[fact(F32, &[2, 3]), cfact(&s2), cfact(&z2)], &[]).is_err());
        assert!(
            one("QuantizeLinear", &[fact(F32, &[2, 3]), cfact(&s2), cfact(&z)], &[("axis", 0)]).is_err(),
            "zp shape"
        );
        assert!(one("QuantizeLinear", &[fact(F16, &[2, 3]), cfact(&s)], &[]).is_err(), "scale dtype = x dtype");
        assert!(one("QuantizeLinear", &[fact(F64, &[2, 3]), fact(F64, &[])], &[]).is_err());
        let zi32 = Tensor::from_f64s(I32, &[], &[0.0]);
        assert!(one("QuantizeLinear", &[fact(F32, &[2]), cfact(&s), cfact(&zi32)], &[]).is_err());
    }

    #[test]
    fn dequantize_gives_the_scale_dtype() {
        let s = Tensor::from_f64s(F16, &[], &[0.125]);
        let z = Tensor::from_f64s(U8, &[], &[128.0]);
        let out = one("DequantizeLinear", &[fact(U8, &[4]), cfact(&s), cfact(&z)], &[]).unwrap();
        assert_eq!(out, TensorType::new(F16, &[4]));
        assert!(one("DequantizeLinear", &[fact(I8, &[4]), cfact(&s), cfact(&z)], &[]).is_err(), "zp dtype = x dtype");
        let s32 = Tensor::from_f32(&[], &[0.5]);
        assert_eq!(one("DequantizeLinear", &[fact(I32, &[4]), cfact(&s32)], &[]).unwrap(), TensorType::new(F32, &[4]));
        let zn = Tensor::from_f64s(I32, &[], &[2.0]);
        assert!(one("DequantizeLinear", &[fact(I32, &[4]), cfact(&s32), cfact(&zn)], &[]).is_err());
        assert!(one("DequantizeLinear", &[fact(I32, &[4]), cfact(&s32), fact(I32, &[])], &[]).is_err());
        assert!(one("DequantizeLinear", &[fact(F32, &[4]), cfact(&s32)], &[]).is_err());
        let s3 = Tensor::from_f32(&[3], &[0.5, 0.25, 0.125]);
        assert_eq!(
            one("DequantizeLinear", &[fact(I8, &[2, 3]), cfact(&s3)], &[]).unwrap(),
            TensorType::new(F32, &[2, 3])
        );
        assert!(one("DequantizeLinear", &[fact(I8, &[3]), cfact(&s3)], &[]).is_err(), "default axis 1 on rank 1");
    }

    #[test]
    fn dequantize_takes_opset_21_blocks_of_4_bit_values() {
        // DQMatMulNBitsFusion's test: uint4 [8, 2, 16] in blocks of 16 on axis 2, scale [8, 2, 1]
        let s = Tensor::from_f64s(F32, &[8, 2, 1], &[0.1; 16]);
        let z = fact(U4, &[8, 2, 1]);
        let blocked = [("axis", 2), ("block_size", 16)];
        let out = one("DequantizeLinear", &[fact(U4, &[8, 2, 16]), cfact(&s), z.clone()], &blocked).unwrap();
        assert_eq!(out, TensorType::new(F32, &[8, 2, 16]));
        // a block count rounded up; a wrong block count, rank or zero point shape is refused
        let s5 = Tensor::from_f64s(F32, &[5, 3], &[0.5; 15]);
        let rows = [("axis", 0), ("block_size", 2)];
        assert_eq!(one("DequantizeLinear", &[fact(I4, &[9, 3]), cfact(&s5)], &rows).unwrap().dims(), Some(vec![9, 3]));
        assert!(one("DequantizeLinear", &[fact(I4, &[11, 3]), cfact(&s5)], &rows).is_err());
        assert!(one("DequantizeLinear", &[fact(U4, &[8, 32]), cfact(&s)], &blocked).is_err());
        assert!(one("DequantizeLinear", &[fact(U4, &[8, 2, 16]), cfact(&s), fact(U4, &[8, 2])], &blocked).is_err());
        assert!(
            one("DequantizeLinear", &[fact(U4, &[8, 2, 16]), cfact(&s)], &[("axis", 2), ("block_size", -1)]).is_err()
        );
        // 4-bit values per tensor too; a quantizing op still never writes them
        let one_scale = Tensor::from_f32(&[], &[0.5]);
        assert!(one("DequantizeLinear", &[fact(I4, &[4]), cfact(&one_scale)], &[]).is_ok());
        assert!(one("QuantizeLinear", &[fact(F32, &[4]), cfact(&one_scale), z], &[]).is_err());
    }

    #[test]
    fn every_quant_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
