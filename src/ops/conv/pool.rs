//! MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool.

use super::window::{sample_window, spatial_input, spatial_ok, spatial_rank, window, AutoPad};
use super::CONV_DTYPES;
use crate::graph::{Attr, Attrs, DType, Dim, TensorType};
use crate::ops::{attr_int, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::Rng as _;

use DType::*;

fn flag(attrs: &Attrs, op: &str, key: &str) -> Result<bool, Reject> {
    match attr_int(attrs, key, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(Reject(format!("{op} {key} must be 0 or 1, got {v}"))),
    }
}

/// MaxPool (outputs Y and optionally int64 Indices) and AveragePool.
pub struct Pool {
    pub(super) name: &'static str,
    pub(super) dtypes: &'static [DType],
    pub(super) max: bool,
}

impl OpSpec for Pool {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 1), outputs: (1, if self.max { 2 } else { 1 }) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let op = self.name;
        let x = input(ins, 0)?;
        check_dtype(op, x, self.dtypes)?;
        let xd = dims_of(x, "X")?;
        let k = spatial_rank(op, &xd)?;
        let win = window(op, attrs, k, None)?;
        let ceil = flag(attrs, op, "ceil_mode")?;
        if ceil && win.auto_pad != AutoPad::NotSet {
            reject!("{op}: ceil_mode with auto_pad is ambiguous across implementations");
        }
        if self.max {
            flag(attrs, op, "storage_order")?;
        } else {
            flag(attrs, op, "count_include_pad")?;
        }
        for i in 0..k {
            if win.pads[i] >= win.kernel[i] || win.pads[i + k] >= win.kernel[i] {
                reject!("{op}: pads {:?} must be smaller than kernel {:?}", win.pads, win.kernel);
            }
        }
        let mut out = vec![xd[0], xd[1]];
        for i in 0..k {
            out.push(win.forward(op, i, xd[i + 2], ceil)?);
        }
        // a window wholly in the padding has no specified value (MaxPool; AveragePool counting no padding: 0 / 0)
        let unspecified = self.max || !flag(attrs, op, "count_include_pad")?;
        if unspecified && (0..k).any(|i| win.wholly_padded(i, xd[i + 2], out[i + 2])) {
            reject!("{op}: {}, where ONNX specifies no value", super::WHOLLY_PADDED);
        }
        let y = TensorType::new(x.ty.dtype, &out);
        Ok(if self.max { vec![y.clone(), y.with_dtype(I64)] } else { vec![y] })
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| spatial_ok(t, self.dtypes), |r| Some(spatial_input(r, self.dtypes, max)))?;
        let xd = x.ty.dims().unwrap();
        // AveragePool dilations are new in opset 19; not every runtime has them, so only MaxPool samples them
        let p = sample_window(rng, &xd[2..], 3, self.max, true)?;
        let ceil = rng.random_bool(0.3) && (0..p.kernel.len()).all(|i| !p.window().ceil_rule_applies(i, xd[i + 2]));
        let mut out = vec![xd[0], xd[1]];
        for i in 0..p.kernel.len() {
            out.push(p.window().forward(self.name, i, xd[i + 2], ceil)?);
        }
        if out.iter().product::<usize>() > max {
            reject!("{} output {out:?} is too large", self.name);
        }
        let mut attrs = Attrs::new();
        p.put(&mut attrs, rng, true, self.max);
        if ceil || rng.random_bool(0.2) {
            attrs.insert("ceil_mode".into(), Attr::Int(ceil as i64));
        }
        if !self.max && rng.random_bool(0.5) {
            attrs.insert("count_include_pad".into(), Attr::Int(rng.random_range(0..=1)));
        }
        Ok(Proposal::new(vec![x.name], attrs))
    }
}

/// GlobalAveragePool / GlobalMaxPool: `[N, C, D...]` to `[N, C, 1...]`.
pub struct GlobalPool {
    pub(super) name: &'static str,
}

impl OpSpec for GlobalPool {
    fn name(&self) -> &'static str {
        self.name
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype(self.name, x, CONV_DTYPES)?;
        let Some(shape) = &x.ty.shape else { reject!("{} needs a known rank", self.name) };
        if shape.len() < 3 {
            reject!("{} needs rank >= 3, got {}", self.name, x.ty);
        }
        if shape[2..].contains(&Dim::Fixed(0)) {
            reject!("{} does not take empty spatial dims, got {}", self.name, x.ty);
        }
        let mut out = shape[..2].to_vec();
        out.resize(shape.len(), Dim::Fixed(1));
        Ok(vec![TensorType { dtype: x.ty.dtype, shape: Some(out) }])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| spatial_ok(t, CONV_DTYPES), |r| Some(spatial_input(r, CONV_DTYPES, max)))?;
        Ok(Proposal::new(vec![x.name], Attrs::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fact, ints, run};
    use super::*;

    #[test]
    fn pools_follow_onnx_ceil_rule() {
        let x = || fact(F32, &[1, 1, 5, 5]);
        let k2s2 = [("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2]))];
        assert_eq!(run("MaxPool", &[x()], &k2s2, 1).unwrap()[0], TensorType::new(F32, &[1, 1, 2, 2]));
        let mut a = k2s2.to_vec();
        a.push(("ceil_mode", Attr::Int(1)));
        assert_eq!(run("MaxPool", &[x()], &a, 1).unwrap()[0], TensorType::new(F32, &[1, 1, 3, 3]));
        // with pads 1: ceil((7 - 2) / 2) + 1 = 4, but the 4th window would start at 6 >= 5 + 1, so 3
        a.push(("pads", ints(&[1, 1, 1, 1])));
        let out = run("MaxPool", &[x()], &a, 2).unwrap();
        assert_eq!(out, vec![TensorType::new(F32, &[1, 1, 3, 3]), TensorType::new(I64, &[1, 1, 3, 3])]);
        let out = run(
            "AveragePool",
            &[fact(F16, &[2, 3, 6])],
            &[("kernel_shape", ints(&[3])), ("strides", ints(&[2])), ("ceil_mode", Attr::Int(1))],
            1,
        );
        assert_eq!(out.unwrap()[0], TensorType::new(F16, &[2, 3, 3]));
        let out = run(
            "MaxPool",
            &[fact(U8, &[1, 2, 6, 6, 6])],
            &[("kernel_shape", ints(&[2, 2, 2])), ("dilations", ints(&[2, 1, 1]))],
            1,
        );
        assert_eq!(out.unwrap()[0], TensorType::new(U8, &[1, 2, 4, 5, 5]));
    }

    #[test]
    fn pools_reject_bad_attributes() {
        let x = || fact(F32, &[1, 1, 5, 5]);
        assert!(run("MaxPool", &[x()], &[], 1).is_err(), "kernel_shape is required");
        let k = ("kernel_shape", ints(&[2, 2]));
        let ks = [k.clone()];
        assert!(run("MaxPool", &[x()], &[k.clone(), ("pads", ints(&[2, 0, 0, 0]))], 1).is_err(), "pad >= kernel");
        assert!(run("MaxPool", &[x()], &[("kernel_shape", ints(&[6, 1]))], 1).is_err());
        assert!(run("MaxPool", &[x()], &[k.clone(), ("ceil_mode", Attr::Int(2))], 1).is_err());
        assert!(run("MaxPool", &[x()], &[k.clone(), ("strides", ints(&[-1, 1]))], 1).is_err());
        assert!(run("AveragePool", &[x()], &ks, 2).is_err(), "AveragePool has one output");
        assert!(run("AveragePool", &[fact(F64, &[1, 1, 5, 5])], &ks, 1).is_err());
        assert!(run("MaxPool", &[fact(I32, &[1, 1, 5, 5])], &ks, 1).is_err());
        assert!(run("MaxPool", &[fact(I8, &[1, 1, 5, 5])], &ks, 1).is_ok());
        assert!(
            run("AveragePool", &[x()], &[k, ("auto_pad", Attr::str("VALID")), ("ceil_mode", Attr::Int(1))], 1).is_err()
        );
    }

    /// A review found a MaxPool over a width of 1 (kernel 2, dilation 2, pads 1) whose every window lies in the
    /// padding: ORT gives the lowest float there, onnx.reference 0, and a FusedConv of it overflowed.
    #[test]
    fn pools_reject_windows_wholly_in_the_padding() {
        let x = || fact(F32, &[1, 1, 3, 1]);
        let wide = [("kernel_shape", ints(&[1, 2])), ("dilations", ints(&[1, 2])), ("pads", ints(&[0, 1, 0, 1]))];
        assert!(run("MaxPool", &[x()], &wide, 1).is_err());
        // an average of the padding alone is 0 when the padding counts, else 0 / 0
        assert!(run("AveragePool", &[x()], &wide, 1).is_err());
        let mut counted = wide.to_vec();
        counted.push(("count_include_pad", Attr::Int(1)));
        assert!(run("AveragePool", &[x()], &counted, 1).is_ok());
        // windows that each reach an input element are fine
        assert!(run("MaxPool", &[fact(F32, &[1, 1, 3, 3])], &wide, 1).is_ok());
    }

    #[test]
    fn global_pools_keep_batch_and_channels() {
        let out = run("GlobalAveragePool", &[fact(F32, &[2, 3, 4, 5])], &[], 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[2, 3, 1, 1]));
        let sym = Some(Fact {
            ty: TensorType { dtype: F16, shape: Some(vec![Dim::Sym("N".into()), Dim::Fixed(3), Dim::Fixed(7)]) },
            value: None,
        });
        let out = run("GlobalMaxPool", &[sym], &[], 1).unwrap();
        assert_eq!(
            out[0],
            TensorType { dtype: F16, shape: Some(vec![Dim::Sym("N".into()), Dim::Fixed(3), Dim::Fixed(1)]) }
        );
        assert!(run("GlobalMaxPool", &[fact(F32, &[2, 3])], &[], 1).is_err());
        assert!(run("GlobalMaxPool", &[fact(F64, &[2, 3, 4])], &[], 1).is_err());
    }
}
