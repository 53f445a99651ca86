//! Elementwise ops: unary maps and activations, broadcasting binary arithmetic/logic/comparison, Where, Clip.
//! Dtype lists are what ONNX Runtime 1.31's CPU provider runs (docs/ort-cpu-dtypes.tsv), not the full spec.

use super::draft::{random_dims, random_type};
use super::{broadcast, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use rand::Rng as _;

use DType::*;
pub(crate) const FLOATS: &[DType] = &[F32, F64, F16];
pub(crate) const F32_16: &[DType] = &[F32, F16];
pub(crate) const NUMERIC: &[DType] = &[F32, F64, F16, I8, U8, I16, I32, I64, U32, U64];
pub(crate) const ALL: &[DType] = &[F32, F64, F16, I8, U8, I16, I32, I64, U32, U64, Bool];

/// How an op's float attributes are sampled.
#[derive(Clone, Copy)]
enum Params {
    None,
    Alpha(f32, f32),
    AlphaBeta,
    Selu,
    Gelu,
}

/// A unary elementwise op: output type = input type.
pub struct Unary {
    name: &'static str,
    dtypes: &'static [DType],
    params: Params,
}

impl OpSpec for Unary {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype(self.name, x, self.dtypes)?;
        if let Params::Gelu = self.params {
            let a = super::attr_string(attrs, "approximate", "none")?;
            if a != "none" && a != "tanh" {
                reject!("Gelu approximate must be 'none' or 'tanh', got '{a}'");
            }
        }
        Ok(vec![x.ty.clone()])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(
            rng,
            |t| self.dtypes.contains(&t.dtype),
            |r| Some(random_type(r, self.dtypes, 0..=5, max)),
        )?;
        let mut attrs = Attrs::new();
        match self.params {
            Params::None => {}
            Params::Alpha(lo, hi) => {
                attrs.insert("alpha".into(), Attr::Float(round2(rng.random_range(lo..hi))));
            }
            Params::AlphaBeta => {
                attrs.insert("alpha".into(), Attr::Float(round2(rng.random_range(0.05..0.5))));
                attrs.insert("beta".into(), Attr::Float(round2(rng.random_range(0.2..0.8))));
            }
            Params::Selu => {
                attrs.insert("alpha".into(), Attr::Float(round2(rng.random_range(1.0..2.0))));
                attrs.insert("gamma".into(), Attr::Float(round2(rng.random_range(1.0..1.5))));
            }
            Params::Gelu => {
                if rng.random_bool(0.5) {
                    attrs.insert("approximate".into(), Attr::str("tanh"));
                }
            }
        }
        Ok(Proposal::new(vec![x.name], attrs))
    }
}

fn round2(x: f32) -> f32 {
    (x * 100.0).round() / 100.0
}

/// What a binary op returns and needs.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Same dtype out as in.
    Arith,
    /// Integer divisor must be non-zero (Div, Mod): for integer dtypes the right side is a non-zero constant.
    Divide,
    /// Bool out (comparisons, logic).
    Compare,
}

/// A broadcasting binary op with both inputs of one dtype.
pub struct Binary {
    name: &'static str,
    dtypes: &'static [DType],
    kind: Kind,
}

impl OpSpec for Binary {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (a, b) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype(self.name, a, self.dtypes)?;
        if a.ty.dtype != b.ty.dtype {
            reject!("{} needs equal dtypes, got {} and {}", self.name, a.ty.dtype, b.ty.dtype);
        }
        if self.name == "Mod" {
            let fmod = super::attr_int(attrs, "fmod", 0)?;
            if a.ty.dtype.is_float() && fmod != 1 {
                reject!("Mod on floats needs fmod=1");
            }
        }
        let shape = broadcast(&[dims_of(a, "A")?, dims_of(b, "B")?])?;
        let dtype = if self.kind == Kind::Compare { Bool } else { a.ty.dtype };
        Ok(vec![TensorType::new(dtype, &shape)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let a = d.pick_or_input(
            rng,
            |t| self.dtypes.contains(&t.dtype) && t.dims().is_some(),
            |r| Some(random_type(r, self.dtypes, 0..=4, max)),
        )?;
        let adims = a.ty.dims().unwrap();
        let dtype = a.ty.dtype;
        let fits = |t: &TensorType| {
            t.dtype == dtype
                && t.dims()
                    .and_then(|bd| broadcast(&[adims.clone(), bd]).ok())
                    .is_some_and(|s| s.iter().product::<usize>() <= max)
        };
        let need_nonzero = self.kind == Kind::Divide && !dtype.is_float();
        let b = match (need_nonzero, rng.random_bool(0.6)) {
            (false, true) => d.pick(rng, fits).map(|v| v.name),
            _ => None,
        };
        let b = match b {
            Some(b) => b,
            None => {
                // a constant whose shape is a suffix of A's, some dims set to 1
                let keep = rng.random_range(0..=adims.len());
                let bdims: Vec<usize> =
                    adims[adims.len() - keep..].iter().map(|&x| if rng.random_bool(0.3) { 1 } else { x }).collect();
                if need_nonzero {
                    let n: usize = bdims.iter().product();
                    let v: Vec<f64> = (0..n).map(|_| rng.random_range(1..5) as f64).collect();
                    d.constant(Tensor::from_f64s(dtype, &bdims, &v))
                } else {
                    d.random_constant(rng, &TensorType::new(dtype, &bdims))?
                }
            }
        };
        let (x, y) = if !need_nonzero && rng.random_bool(0.2) { (b, a.name) } else { (a.name, b) };
        let mut attrs = Attrs::new();
        if self.name == "Mod" && dtype.is_float() {
            attrs.insert("fmod".into(), Attr::Int(1));
        }
        Ok(Proposal::new(vec![x, y], attrs))
    }
}

/// Where(cond, X, Y): three-way broadcast, output dtype of X.
pub struct Where;

const WHERE_DTYPES: &[DType] = &[F32, F64, F16, I8, U8, I32, I64, U32];

impl OpSpec for Where {
    fn name(&self) -> &'static str {
        "Where"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(3, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (c, x, y) = (input(ins, 0)?, input(ins, 1)?, input(ins, 2)?);
        check_dtype("Where condition", c, &[Bool])?;
        check_dtype("Where", x, WHERE_DTYPES)?;
        if x.ty.dtype != y.ty.dtype {
            reject!("Where needs X and Y of one dtype, got {} and {}", x.ty.dtype, y.ty.dtype);
        }
        let s = broadcast(&[dims_of(c, "condition")?, dims_of(x, "X")?, dims_of(y, "Y")?])?;
        Ok(vec![TensorType::new(x.ty.dtype, &s)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(
            rng,
            |t| WHERE_DTYPES.contains(&t.dtype) && t.dims().is_some(),
            |r| Some(random_type(r, WHERE_DTYPES, 0..=4, max)),
        )?;
        let xd = x.ty.dims().unwrap();
        let bc = |t: &TensorType| t.dims().is_some_and(|td| broadcast(&[xd.clone(), td]).is_ok_and(|s| s == xd));
        let c = match d.pick(rng, |t| t.dtype == Bool && bc(t)) {
            Some(c) => c.name,
            None => d.random_constant(rng, &TensorType::new(Bool, &xd))?,
        };
        let y = match d.pick(rng, |t| t.dtype == x.ty.dtype && bc(t)) {
            Some(y) if rng.random_bool(0.7) => y.name,
            _ => d.random_constant(rng, &TensorType::new(x.ty.dtype, &[]))?,
        };
        Ok(Proposal::new(vec![c, x.name, y], Attrs::new()))
    }
}

/// Clip(X, min?, max?) with scalar bounds of X's dtype.
pub struct Clip;

const CLIP_DTYPES: &[DType] = &[F32, F64, F16, I8, U8, I32, I64, U32, U64];

impl OpSpec for Clip {
    fn name(&self) -> &'static str {
        "Clip"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 3), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Clip", x, CLIP_DTYPES)?;
        for b in ins.iter().skip(1).flatten() {
            if b.ty.dtype != x.ty.dtype || b.ty.rank() != Some(0) {
                reject!("Clip bounds must be scalars of {}, got {}", x.ty.dtype, b.ty);
            }
        }
        Ok(vec![x.ty.clone()])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(
            rng,
            |t| CLIP_DTYPES.contains(&t.dtype),
            |r| Some(random_type(r, CLIP_DTYPES, 0..=5, max)),
        )?;
        let dt = x.ty.dtype;
        let (lo, hi) = if dt.is_signed() {
            (rng.random_range(-6..=0) as f64, rng.random_range(0..=6) as f64)
        } else {
            (rng.random_range(0..=2) as f64, rng.random_range(3..=6) as f64)
        };
        let mut inputs = vec![x.name];
        match rng.random_range(0..3) {
            0 => inputs.push(d.constant(Tensor::from_f64s(dt, &[], &[lo]))),
            1 => inputs.extend([String::new(), d.constant(Tensor::from_f64s(dt, &[], &[hi]))]),
            _ => inputs
                .extend([d.constant(Tensor::from_f64s(dt, &[], &[lo])), d.constant(Tensor::from_f64s(dt, &[], &[hi]))]),
        }
        Ok(Proposal::new(inputs, Attrs::new()))
    }
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    let unary = |name, dtypes, params| Box::new(Unary { name, dtypes, params }) as Box<dyn OpSpec>;
    for name in ["Abs", "Sign"] {
        v.push(unary(name, NUMERIC, Params::None));
    }
    v.push(unary("Neg", &[F32, F64, F16, I8, I16, I32, I64], Params::None));
    for name in ["Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Sigmoid", "Tanh"] {
        v.push(unary(name, FLOATS, Params::None));
    }
    v.push(unary("Relu", &[F32, F64, F16, I8, I32], Params::None));
    v.push(unary("LeakyRelu", F32_16, Params::Alpha(0.01, 0.5)));
    v.push(unary("Elu", F32_16, Params::Alpha(0.5, 2.0)));
    v.push(unary("Selu", F32_16, Params::Selu));
    v.push(unary("HardSigmoid", F32_16, Params::AlphaBeta));
    v.push(unary("Gelu", F32_16, Params::Gelu));
    for name in ["HardSwish", "Erf", "Softplus"] {
        v.push(unary(name, F32_16, Params::None));
    }
    v.push(unary("Identity", ALL, Params::None));
    v.push(unary("Not", &[Bool], Params::None));
    let binary = |name, dtypes, kind| Box::new(Binary { name, dtypes, kind }) as Box<dyn OpSpec>;
    for name in ["Add", "Sub", "Mul"] {
        v.push(binary(name, NUMERIC, Kind::Arith));
    }
    v.push(binary("Div", NUMERIC, Kind::Divide));
    v.push(binary("Mod", NUMERIC, Kind::Divide));
    v.push(binary("Pow", &[F32, F64, F16], Kind::Arith));
    for name in ["Max", "Min"] {
        v.push(binary(name, &[F32, F64, F16, I8, U8, I32, I64, U32, U64], Kind::Arith));
    }
    for name in ["And", "Or", "Xor"] {
        v.push(binary(name, &[Bool], Kind::Compare));
    }
    v.push(binary("Equal", ALL, Kind::Compare));
    for name in ["Less", "Greater", "LessOrEqual", "GreaterOrEqual"] {
        v.push(binary(name, NUMERIC, Kind::Compare));
    }
    v.push(Box::new(Where));
    v.push(Box::new(Clip));
    let _ = random_dims; // shared helper, used by other families
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup};
    use super::*;

    use crate::ops::testutil::fact;

    #[test]
    fn binary_broadcasts_and_comparisons_give_bool() {
        let add = lookup("", "Add").unwrap();
        let out = infer_node(add, &[fact(F32, &[2, 1, 3]), fact(F32, &[4, 1])], &Attrs::new(), 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[2, 4, 3]));
        let less = lookup("", "Less").unwrap();
        let out = infer_node(less, &[fact(I64, &[]), fact(I64, &[5])], &Attrs::new(), 1).unwrap();
        assert_eq!(out[0], TensorType::new(Bool, &[5]));
        assert!(infer_node(add, &[fact(F32, &[2]), fact(F64, &[2])], &Attrs::new(), 1).is_err());
        assert!(infer_node(add, &[fact(Bool, &[2]), fact(Bool, &[2])], &Attrs::new(), 1).is_err());
    }

    #[test]
    fn unary_checks_dtypes_and_counts() {
        let erf = lookup("", "Erf").unwrap();
        assert!(infer_node(erf, &[fact(F64, &[2])], &Attrs::new(), 1).is_err(), "ORT CPU has no f64 Erf");
        assert!(infer_node(erf, &[fact(F32, &[2])], &Attrs::new(), 2).is_err());
        assert!(infer_node(erf, &[], &Attrs::new(), 1).is_err());
        let gelu = lookup("", "Gelu").unwrap();
        let bad = Attrs::from([("approximate".to_string(), Attr::str("fast"))]);
        assert!(infer_node(gelu, &[fact(F32, &[2])], &bad, 1).is_err());
    }

    #[test]
    fn where_and_clip_infer() {
        let w = lookup("", "Where").unwrap();
        let out = infer_node(w, &[fact(Bool, &[3, 1]), fact(F32, &[1, 4]), fact(F32, &[])], &Attrs::new(), 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[3, 4]));
        let c = lookup("", "Clip").unwrap();
        assert!(infer_node(c, &[fact(F32, &[3]), fact(F32, &[1])], &Attrs::new(), 1).is_err(), "bounds are scalars");
        assert!(infer_node(c, &[fact(F32, &[3]), None, fact(F32, &[])], &Attrs::new(), 1).is_ok());
    }

    #[test]
    fn every_elementwise_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 50) > 0, "{} never sampled", s.name());
        }
    }
}
