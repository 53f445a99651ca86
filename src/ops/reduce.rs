//! Reductions at opset 18+ semantics: ReduceSum/Mean/Max/Min/Prod/L2 with `axes` as an optional constant input,
//! and ArgMax/ArgMin. Dtype lists are what ONNX Runtime 1.31's CPU provider runs (docs/ort-cpu-dtypes.tsv).

use super::shape::{const_1d, finish, int_const, maybe_neg, norm_axes, opt_input, pick_static};
use super::{attr_int, check_dtype, dims_of, input, norm_axis, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use crate::graph::{Attr, Attrs, DType, TensorType};
use rand::seq::SliceRandom;
use rand::Rng as _;

use DType::*;
const SUM_DTYPES: &[DType] = &[F32, F64, F16, I32, I64];
const MAXMIN_DTYPES: &[DType] = &[F32, F64, F16, I8, U8, I32, I64, Bool];
const ARG_DTYPES: &[DType] = &[F32, F64, F16, I8, U8, I32, I64];

/// Dims after reducing `axes` (sorted or not) of `dims`: kept as 1 or dropped.
fn reduced(dims: &[usize], axes: &[usize], keep: bool) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .filter_map(|(i, &v)| match (axes.contains(&i), keep) {
            (false, _) => Some(v),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

/// ReduceX(data, axes?) with attributes keepdims (default 1) and noop_with_empty_axes (default 0).
pub struct Reduce {
    name: &'static str,
    dtypes: &'static [DType],
}

impl OpSpec for Reduce {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 2), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype(self.name, x, self.dtypes)?;
        let xd = dims_of(x, self.name)?;
        if attrs.contains_key("axes") {
            reject!("{}: axes is an input since opset 18, not an attribute", self.name);
        }
        let keep = attr_int(attrs, "keepdims", 1)? != 0;
        let noop = attr_int(attrs, "noop_with_empty_axes", 0)? != 0;
        let axes = match opt_input(ins, 1) {
            Some(f) => const_1d(f, &format!("{} axes", self.name), &[I64])?,
            None => vec![],
        };
        if axes.is_empty() {
            let out = if noop { xd } else { reduced(&xd, &(0..xd.len()).collect::<Vec<_>>(), keep) };
            return Ok(vec![TensorType::new(x.ty.dtype, &out)]);
        }
        let axes = norm_axes(&axes, xd.len(), &format!("{} axes", self.name))?;
        Ok(vec![TensorType::new(x.ty.dtype, &reduced(&xd, &axes, keep))])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, self.dtypes, 0..=5, |_| true)?;
        let r = x.ty.rank().unwrap();
        let mut inputs = vec![x.name];
        let mut attrs = Attrs::new();
        match rng.random_range(0..10) {
            // reduce everything: axes omitted
            0 | 1 => {
                if rng.random_bool(0.3) {
                    attrs.insert("noop_with_empty_axes".into(), Attr::Int(0));
                }
            }
            // empty axes with noop_with_empty_axes=1: the identity
            2 => {
                if rng.random_bool(0.5) {
                    inputs.push(int_const(d, &[]));
                }
                attrs.insert("noop_with_empty_axes".into(), Attr::Int(1));
            }
            _ if r == 0 => {}
            _ => {
                let mut axes: Vec<usize> = (0..r).collect();
                axes.shuffle(rng);
                axes.truncate(rng.random_range(1..=r));
                let ax: Vec<i64> = axes.iter().map(|&a| maybe_neg(rng, a, r)).collect();
                inputs.push(int_const(d, &ax));
                if rng.random_bool(0.2) {
                    attrs.insert("noop_with_empty_axes".into(), Attr::Int(1));
                }
            }
        }
        match rng.random_range(0..3) {
            0 => {}
            1 => {
                attrs.insert("keepdims".into(), Attr::Int(1));
            }
            _ => {
                attrs.insert("keepdims".into(), Attr::Int(0));
            }
        }
        finish(self, d, Proposal::new(inputs, attrs))
    }
}

/// ArgMax/ArgMin(data) along `axis`, with keepdims and select_last_index; the output is int64.
pub struct ArgReduce {
    name: &'static str,
}

impl OpSpec for ArgReduce {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype(self.name, x, ARG_DTYPES)?;
        let xd = dims_of(x, self.name)?;
        if xd.is_empty() {
            reject!("{} needs an input of rank >= 1", self.name);
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, xd.len(), &format!("{} axis", self.name))?;
        let keep = attr_int(attrs, "keepdims", 1)? != 0;
        let last = attr_int(attrs, "select_last_index", 0)?;
        if last != 0 && last != 1 {
            reject!("{} select_last_index must be 0 or 1, got {last}", self.name);
        }
        Ok(vec![TensorType::new(I64, &reduced(&xd, &[axis], keep))])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ARG_DTYPES, 1..=5, |_| true)?;
        let r = x.ty.rank().unwrap();
        let axis = rng.random_range(0..r);
        let mut attrs = Attrs::new();
        if axis != 0 || rng.random_bool(0.3) {
            attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
        }
        if rng.random_bool(0.6) {
            attrs.insert("keepdims".into(), Attr::Int(rng.random_range(0..=1)));
        }
        if rng.random_bool(0.3) {
            attrs.insert("select_last_index".into(), Attr::Int(rng.random_range(0..=1)));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    for (name, dtypes) in [
        ("ReduceSum", SUM_DTYPES),
        ("ReduceMean", SUM_DTYPES),
        ("ReduceMax", MAXMIN_DTYPES),
        ("ReduceMin", MAXMIN_DTYPES),
        ("ReduceProd", SUM_DTYPES),
        ("ReduceL2", SUM_DTYPES),
    ] {
        v.push(Box::new(Reduce { name, dtypes }));
    }
    v.push(Box::new(ArgReduce { name: "ArgMax" }));
    v.push(Box::new(ArgReduce { name: "ArgMin" }));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;
    use crate::graph::Tensor;

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
    fn reduce_axes_keepdims_and_empty_axes() {
        let ax = Tensor::from_i64(&[2], &[-1, 0]);
        let out = one("ReduceSum", &[fact(F32, &[2, 3, 4]), cfact(&ax)], &[]).unwrap();
        assert_eq!(out, TensorType::new(F32, &[1, 3, 1]));
        let out = one("ReduceMean", &[fact(F32, &[2, 3, 4]), cfact(&ax)], &[("keepdims", 0)]).unwrap();
        assert_eq!(out, TensorType::new(F32, &[3]));
        // all axes with keepdims=0: rank 0
        let out = one("ReduceMax", &[fact(Bool, &[2, 3])], &[("keepdims", 0)]).unwrap();
        assert_eq!(out, TensorType::new(Bool, &[]));
        let out = one("ReduceL2", &[fact(F32, &[2, 3])], &[]).unwrap();
        assert_eq!(out, TensorType::new(F32, &[1, 1]));
        // empty axes: reduce all, unless noop_with_empty_axes
        let empty = Tensor::from_i64(&[0], &[]);
        let out = one("ReduceProd", &[fact(I64, &[2, 3]), cfact(&empty)], &[("keepdims", 0)]).unwrap();
        assert_eq!(out, TensorType::new(I64, &[]));
        let out =
            one("ReduceMin", &[fact(I8, &[2, 3]), cfact(&empty)], &[("noop_with_empty_axes", 1), ("keepdims", 0)])
                .unwrap();
        assert_eq!(out, TensorType::new(I8, &[2, 3]));
        let out = one("ReduceMin", &[fact(F16, &[])], &[]).unwrap();
        assert_eq!(out, TensorType::new(F16, &[]));
    }

    #[test]
    fn reduce_rejects() {
        let dup = Tensor::from_i64(&[2], &[1, -1]);
        assert!(one("ReduceSum", &[fact(F32, &[2, 3]), cfact(&dup)], &[]).is_err());
        let far = Tensor::from_i64(&[1], &[2]);
        assert!(one("ReduceSum", &[fact(F32, &[2, 3]), cfact(&far)], &[]).is_err());
        assert!(one("ReduceSum", &[fact(F32, &[2, 3]), fact(I64, &[1])], &[]).is_err(), "axes must be constant");
        assert!(one("ReduceSum", &[fact(U8, &[2, 3])], &[]).is_err(), "ORT has no uint8 ReduceSum");
        assert!(one("ReduceMean", &[fact(Bool, &[2, 3])], &[]).is_err());
        let mut attrs = Attrs::new();
        attrs.insert("axes".into(), Attr::Ints(vec![0]));
        assert!(infer_node(lookup("", "ReduceMean").unwrap(), &[fact(F32, &[2])], &attrs, 1).is_err());
    }

    #[test]
    fn argmax_gives_int64() {
        let out = one("ArgMax", &[fact(U8, &[2, 3, 4])], &[("axis", -2), ("keepdims", 0)]).unwrap();
        assert_eq!(out, TensorType::new(I64, &[2, 4]));
        let out = one("ArgMin", &[fact(F32, &[5])], &[("select_last_index", 1)]).unwrap();
        assert_eq!(out, TensorType::new(I64, &[1]));
        assert_eq!(one("ArgMin", &[fact(F32, &[5])], &[("keepdims", 0)]).unwrap(), TensorType::new(I64, &[]));
        assert!(one("ArgMax", &[fact(F32, &[])], &[]).is_err());
        assert!(one("ArgMax", &[fact(F32, &[3])], &[("axis", 1)]).is_err());
        assert!(one("ArgMax", &[fact(Bool, &[3])], &[]).is_err());
    }

    #[test]
    fn every_reduce_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
