//! Normalizations and softmaxes: BatchNormalization (inference mode), LayerNormalization (opset 17),
//! InstanceNormalization, Softmax and LogSoftmax (opset 13). Dtype lists are what ONNX Runtime 1.31's CPU
//! provider runs (docs/ort-cpu-dtypes.tsv), not the full spec.

use super::draft::random_type;
use super::{
    attr_float, attr_int, check_dtype, dims_of, input, norm_axis, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng,
};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use rand::Rng as _;

use DType::*;
const FLOATS: &[DType] = &[F32, F64, F16];
const F32_16: &[DType] = &[F32, F16];

/// Checks that a per-channel (or per-feature) parameter has X's dtype and the given shape.
fn check_param(op: &str, what: &str, x: &Fact, p: &Fact, want: &[usize]) -> Result<(), Reject> {
    if p.ty.dtype != x.ty.dtype {
        reject!("{op} {what} must be {}, got {}", x.ty.dtype, p.ty.dtype);
    }
    let pd = dims_of(p, what)?;
    if pd != want {
        reject!("{op} {what} must be {want:?}, got {pd:?}");
    }
    Ok(())
}

/// A static value of an allowed dtype with rank in `ranks` and no zero dims.
fn static_ok(t: &TensorType, dtypes: &[DType], ranks: std::ops::RangeInclusive<usize>) -> bool {
    dtypes.contains(&t.dtype) && t.dims().is_some_and(|d| ranks.contains(&d.len()) && !d.contains(&0))
}

/// Sometimes sets `epsilon` to a non-default value.
fn maybe_epsilon(attrs: &mut Attrs, rng: &mut Rng) {
    if rng.random_bool(0.4) {
        let e = [1e-5, 1e-3, 1e-2, 1e-6][rng.random_range(0..4)];
        attrs.insert("epsilon".into(), Attr::Float(e));
    }
}

/// A constant of positive values (a variance).
fn positive_constant(d: &mut Draft, rng: &mut Rng, dtype: DType, dims: &[usize]) -> String {
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|_| (rng.random_range(0.25..2.0f64) * 64.0).round() / 64.0).collect();
    d.constant(Tensor::from_f64s(dtype, dims, &v))
}

/// BatchNormalization(X, scale, B, input_mean, input_var) in inference mode (one output).
pub struct BatchNorm;

impl OpSpec for BatchNorm {
    fn name(&self) -> &'static str {
        "BatchNormalization"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(5, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let op = "BatchNormalization";
        let x = input(ins, 0)?;
        check_dtype(op, x, FLOATS)?;
        let xd = dims_of(x, "X")?;
        if xd.len() < 2 {
            reject!("{op} needs rank >= 2, got {xd:?}");
        }
        for (i, what) in ["scale", "B", "input_mean", "input_var"].iter().enumerate() {
            check_param(op, what, x, input(ins, i + 1)?, &[xd[1]])?;
        }
        attr_float(attrs, "epsilon", 1e-5)?;
        attr_float(attrs, "momentum", 0.9)?;
        if attr_int(attrs, "training_mode", 0)? != 0 {
            reject!("{op}: only inference mode (training_mode=0) is supported");
        }
        Ok(vec![x.ty.clone()])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| static_ok(t, FLOATS, 2..=5), |r| Some(random_type(r, FLOATS, 2..=4, max)))?;
        let (c, dt) = (x.ty.dims().unwrap()[1], x.ty.dtype);
        let p = TensorType::new(dt, &[c]);
        let scale = d.random_constant(rng, &p)?;
        let bias = d.random_constant(rng, &p)?;
        let mean = d.random_constant(rng, &p)?;
        let var = positive_constant(d, rng, dt, &[c]);
        let mut attrs = Attrs::new();
        maybe_epsilon(&mut attrs, rng);
        if rng.random_bool(0.2) {
            attrs.insert("momentum".into(), Attr::Float(0.9));
        }
        if rng.random_bool(0.1) {
            attrs.insert("training_mode".into(), Attr::Int(0));
        }
        Ok(Proposal::new(vec![x.name, scale, bias, mean, var], attrs))
    }
}

/// LayerNormalization(X, Scale, B?) over dims `axis..`; optional outputs Mean and InvStdDev.
pub struct LayerNorm;

impl OpSpec for LayerNorm {
    fn name(&self) -> &'static str {
        "LayerNormalization"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 3), outputs: (1, 3) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let op = "LayerNormalization";
        let x = input(ins, 0)?;
        check_dtype(op, x, FLOATS)?;
        let xd = dims_of(x, "X")?;
        if xd.is_empty() {
            reject!("{op} needs rank >= 1");
        }
        let axis = norm_axis(attr_int(attrs, "axis", -1)?, xd.len(), "LayerNormalization axis")?;
        check_param(op, "Scale", x, input(ins, 1)?, &xd[axis..])?;
        if let Some(b) = ins.get(2).and_then(|b| b.as_ref()) {
            check_param(op, "B", x, b, &xd[axis..])?;
        }
        attr_float(attrs, "epsilon", 1e-5)?;
        let stash = attr_int(attrs, "stash_type", 1)?;
        if stash != 1 {
            reject!("{op}: only stash_type=1 (float) is supported, got {stash}");
        }
        // Mean and InvStdDev keep the leading dims and have 1 for every normalized dim; their dtype is stash_type's
        let mut stat = xd[..axis].to_vec();
        stat.resize(xd.len(), 1);
        let stat = TensorType::new(F32, &stat);
        Ok(vec![x.ty.clone(), stat.clone(), stat])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| static_ok(t, FLOATS, 1..=5), |r| Some(random_type(r, FLOATS, 1..=4, max)))?;
        let (xd, dt) = (x.ty.dims().unwrap(), x.ty.dtype);
        let r = xd.len();
        // the last dim most often, as models do
        let axis = if rng.random_bool(0.5) { r - 1 } else { rng.random_range(0..r) };
        let p = TensorType::new(dt, &xd[axis..]);
        let mut inputs = vec![x.name, d.random_constant(rng, &p)?];
        if rng.random_bool(0.6) {
            inputs.push(d.random_constant(rng, &p)?);
        }
        let mut attrs = Attrs::new();
        if axis != r - 1 || rng.random_bool(0.3) {
            let a = if rng.random_bool(0.5) { axis as i64 } else { axis as i64 - r as i64 };
            attrs.insert("axis".into(), Attr::Int(a));
        }
        maybe_epsilon(&mut attrs, rng);
        if rng.random_bool(0.2) {
            attrs.insert("stash_type".into(), Attr::Int(1));
        }
        Ok(Proposal::new(inputs, attrs))
    }
}

/// InstanceNormalization(input, scale, B) with scale and B of shape `[C]`.
pub struct InstanceNorm;

impl OpSpec for InstanceNorm {
    fn name(&self) -> &'static str {
        "InstanceNormalization"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(3, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let op = "InstanceNormalization";
        let x = input(ins, 0)?;
        check_dtype(op, x, F32_16)?;
        let xd = dims_of(x, "input")?;
        if xd.len() < 3 {
            reject!("{op} needs rank >= 3, got {xd:?}");
        }
        check_param(op, "scale", x, input(ins, 1)?, &[xd[1]])?;
        check_param(op, "B", x, input(ins, 2)?, &[xd[1]])?;
        attr_float(attrs, "epsilon", 1e-5)?;
        Ok(vec![x.ty.clone()])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| static_ok(t, F32_16, 3..=5), |r| Some(random_type(r, F32_16, 3..=4, max)))?;
        let p = TensorType::new(x.ty.dtype, &[x.ty.dims().unwrap()[1]]);
        let scale = d.random_constant(rng, &p)?;
        let bias = d.random_constant(rng, &p)?;
        let mut attrs = Attrs::new();
        maybe_epsilon(&mut attrs, rng);
        Ok(Proposal::new(vec![x.name, scale, bias], attrs))
    }
}

/// Softmax / LogSoftmax (opset 13: normalizes along one axis, default -1).
pub struct Softmax {
    name: &'static str,
}

impl OpSpec for Softmax {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype(self.name, x, FLOATS)?;
        let Some(rank) = x.ty.rank() else { reject!("{} needs a known rank", self.name) };
        if rank == 0 {
            reject!("{} needs rank >= 1", self.name);
        }
        norm_axis(attr_int(attrs, "axis", -1)?, rank, "softmax axis")?;
        Ok(vec![x.ty.clone()])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(
            rng,
            |t| FLOATS.contains(&t.dtype) && t.rank().is_some_and(|r| r >= 1),
            |r| Some(random_type(r, FLOATS, 1..=4, max)),
        )?;
        let r = x.ty.rank().unwrap() as i64;
        let mut attrs = Attrs::new();
        if rng.random_bool(0.6) {
            attrs.insert("axis".into(), Attr::Int(rng.random_range(-r..r)));
        }
        Ok(Proposal::new(vec![x.name], attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(BatchNorm));
    v.push(Box::new(LayerNorm));
    v.push(Box::new(InstanceNorm));
    v.push(Box::new(Softmax { name: "Softmax" }));
    v.push(Box::new(Softmax { name: "LogSoftmax" }));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;

    fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
        Some(Fact { ty: TensorType::new(d, s), value: None })
    }

    fn run(op: &str, ins: &[Option<Fact>], a: &[(&str, Attr)], outs: usize) -> Result<Vec<TensorType>, Reject> {
        let attrs: Attrs = a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        infer_node(lookup("", op).unwrap(), ins, &attrs, outs)
    }

    #[test]
    fn batch_norm_checks_channel_params() {
        let x = fact(F32, &[2, 3, 4, 4]);
        let c = fact(F32, &[3]);
        let out = run("BatchNormalization", &[x.clone(), c.clone(), c.clone(), c.clone(), c.clone()], &[], 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[2, 3, 4, 4]));
        assert!(run(
            "BatchNormalization",
            &[fact(F64, &[5, 3]), fact(F64, &[3]), fact(F64, &[3]), fact(F64, &[3]), fact(F64, &[3])],
            &[],
            1
        )
        .is_ok());
        assert!(
            run("BatchNormalization", &[x.clone(), c.clone(), c.clone(), c.clone(), fact(F32, &[4])], &[], 1).is_err()
        );
        assert!(
            run("BatchNormalization", &[x.clone(), c.clone(), c.clone(), c.clone(), fact(F16, &[3])], &[], 1).is_err()
        );
        assert!(run("BatchNormalization", &[x.clone(), c.clone(), c.clone(), c.clone()], &[], 1).is_err());
        assert!(run(
            "BatchNormalization",
            &[x.clone(), c.clone(), c.clone(), c.clone(), c.clone()],
            &[("training_mode", Attr::Int(1))],
            1
        )
        .is_err());
        assert!(
            run("BatchNormalization", &[fact(F32, &[3]), c.clone(), c.clone(), c.clone(), c.clone()], &[], 1).is_err()
        );
        let i = fact(I32, &[2, 3]);
        let ci = fact(I32, &[3]);
        assert!(run("BatchNormalization", &[i, ci.clone(), ci.clone(), ci.clone(), ci], &[], 1).is_err());
    }

    #[test]
    fn layer_norm_axis_and_stats() {
        let x = fact(F32, &[2, 3, 4]);
        let out = run("LayerNormalization", &[x.clone(), fact(F32, &[4])], &[], 1).unwrap();
        assert_eq!(out, vec![TensorType::new(F32, &[2, 3, 4])]);
        let out = run(
            "LayerNormalization",
            &[x.clone(), fact(F32, &[3, 4]), fact(F32, &[3, 4])],
            &[("axis", Attr::Int(1))],
            3,
        )
        .unwrap();
        assert_eq!(out[1], TensorType::new(F32, &[2, 1, 1]));
        assert_eq!(out[2], TensorType::new(F32, &[2, 1, 1]));
        let out = run(
            "LayerNormalization",
            &[fact(F16, &[2, 3, 4]), fact(F16, &[3, 4]), None],
            &[("axis", Attr::Int(-2))],
            2,
        )
        .unwrap();
        assert_eq!(out, vec![TensorType::new(F16, &[2, 3, 4]), TensorType::new(F32, &[2, 1, 1])]);
        assert!(
            run("LayerNormalization", &[x.clone(), fact(F32, &[3, 4])], &[], 1).is_err(),
            "Scale must match X.shape[axis:]"
        );
        assert!(run("LayerNormalization", &[x.clone(), fact(F32, &[4]), fact(F32, &[1])], &[], 1).is_err());
        assert!(run("LayerNormalization", &[x.clone(), fact(F32, &[4])], &[("axis", Attr::Int(3))], 1).is_err());
        assert!(run("LayerNormalization", &[x.clone(), fact(F32, &[4])], &[("stash_type", Attr::Int(11))], 1).is_err());
        assert!(run("LayerNormalization", &[x, fact(F32, &[4])], &[], 4).is_err());
    }

    #[test]
    fn instance_norm_and_softmax() {
        let out =
            run("InstanceNormalization", &[fact(F16, &[1, 2, 5]), fact(F16, &[2]), fact(F16, &[2])], &[], 1).unwrap();
        assert_eq!(out[0], TensorType::new(F16, &[1, 2, 5]));
        assert!(run("InstanceNormalization", &[fact(F32, &[1, 2]), fact(F32, &[2]), fact(F32, &[2])], &[], 1).is_err());
        assert!(
            run("InstanceNormalization", &[fact(F64, &[1, 2, 5]), fact(F64, &[2]), fact(F64, &[2])], &[], 1).is_err()
        );
        assert!(
            run("InstanceNormalization", &[fact(F32, &[1, 2, 5]), fact(F32, &[5]), fact(F32, &[2])], &[], 1).is_err()
        );
        for op in ["Softmax", "LogSoftmax"] {
            assert_eq!(
                run(op, &[fact(F64, &[2, 3])], &[("axis", Attr::Int(0))], 1).unwrap()[0],
                TensorType::new(F64, &[2, 3])
            );
            assert!(run(op, &[fact(F32, &[2, 3])], &[("axis", Attr::Int(-3))], 1).is_err());
            assert!(run(op, &[fact(F32, &[])], &[], 1).is_err());
            assert!(run(op, &[fact(I32, &[2])], &[], 1).is_err());
        }
    }

    #[test]
    fn every_norm_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
