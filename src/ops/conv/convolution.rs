//! Conv and ConvTranspose (X, W, B?) with groups, and their weight/bias/group checks.

use super::window::{
    int_list, put_list, sample_pads, sample_window, spatial_input, spatial_ok, spatial_rank, window, AutoPad, Params,
    ATTR_MAX,
};
use super::CONV_DTYPES;
use crate::graph::{Attr, Attrs, TensorType};
use crate::ops::{attr_int, attr_ints, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use rand::Rng as _;

/// Checks the weight: same dtype and rank as X, no zero dims.
fn check_weights(op: &str, x: &Fact, w: &Fact, wd: &[usize], xrank: usize) -> Result<(), Reject> {
    if w.ty.dtype != x.ty.dtype {
        reject!("{op} weight must be {}, got {}", x.ty.dtype, w.ty.dtype);
    }
    if wd.len() != xrank || wd.contains(&0) {
        reject!("{op} weight {wd:?} must have rank {xrank} and no zero dims");
    }
    Ok(())
}

/// Checks the optional bias: X's dtype, shape `[m]`.
fn check_bias(op: &str, x: &Fact, b: Option<&Fact>, m: usize) -> Result<(), Reject> {
    if let Some(b) = b {
        if b.ty.dtype != x.ty.dtype {
            reject!("{op} bias must be {}, got {}", x.ty.dtype, b.ty.dtype);
        }
        let bd = dims_of(b, "B")?;
        if bd != [m] {
            reject!("{op} bias must be [{m}], got {bd:?}");
        }
    }
    Ok(())
}

fn group(attrs: &Attrs, op: &str) -> Result<usize, Reject> {
    let g = attr_int(attrs, "group", 1)?;
    if !(1..=ATTR_MAX).contains(&g) {
        reject!("{op} group must be positive, got {g}");
    }
    Ok(g as usize)
}

/// A group count dividing `c` (1 most of the time; sometimes depthwise).
fn sample_group(rng: &mut Rng, c: usize, p: f64) -> usize {
    if c > 1 && rng.random_bool(p) {
        let divisors: Vec<usize> = (2..=c).filter(|&g| c.is_multiple_of(g)).collect();
        divisors[rng.random_range(0..divisors.len())]
    } else {
        1
    }
}

/// Conv(X, W, B?).
pub struct Conv;

impl OpSpec for Conv {
    fn name(&self) -> &'static str {
        "Conv"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 3), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, w, b) = (input(ins, 0)?, input(ins, 1)?, ins.get(2).and_then(|b| b.as_ref()));
        check_dtype("Conv", x, CONV_DTYPES)?;
        let (xd, wd) = (dims_of(x, "X")?, dims_of(w, "W")?);
        let k = spatial_rank("Conv", &xd)?;
        check_weights("Conv", x, w, &wd, xd.len())?;
        let g = group(attrs, "Conv")?;
        let (c, m) = (xd[1], wd[0]);
        if c % g != 0 || m % g != 0 {
            reject!("Conv group {g} must divide input channels {c} and output channels {m}");
        }
        if wd[1] != c / g {
            reject!("Conv weight {wd:?} needs {} input channels per group (C={c}, group={g})", c / g);
        }
        check_bias("Conv", x, b, m)?;
        let win = window("Conv", attrs, k, Some(&wd[2..]))?;
        let mut out = vec![xd[0], m];
        for i in 0..k {
            out.push(win.forward("Conv", i, xd[i + 2], false)?);
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| spatial_ok(t, CONV_DTYPES), |r| Some(spatial_input(r, CONV_DTYPES, max)))?;
        let (xd, dt) = (x.ty.dims().unwrap(), x.ty.dtype);
        let c = xd[1];
        let g = sample_group(rng, c, 0.3);
        let m = if g > 1 && g == c && rng.random_bool(0.5) { c } else { g * rng.random_range(1..=(8 / g).max(1)) };
        let p = sample_window(rng, &xd[2..], 3, true, false)?;
        let mut wd = vec![m, c / g];
        wd.extend(&p.kernel);
        let mut out = vec![xd[0], m];
        for i in 0..p.kernel.len() {
            out.push(p.window().forward("Conv", i, xd[i + 2], false)?);
        }
        if out.iter().product::<usize>() > max {
            reject!("Conv output {out:?} is too large");
        }
        let mut inputs = vec![x.name, d.random_constant(rng, &TensorType::new(dt, &wd))?];
        if rng.random_bool(0.5) {
            inputs.push(d.random_constant(rng, &TensorType::new(dt, &[m]))?);
        }
        let mut attrs = Attrs::new();
        let with_kernel = rng.random_bool(0.6);
        p.put(&mut attrs, rng, with_kernel, true);
        if g != 1 || rng.random_bool(0.2) {
            attrs.insert("group".into(), Attr::Int(g as i64));
        }
        Ok(Proposal::new(inputs, attrs))
    }
}

/// ConvTranspose(X, W, B?): W is `[C, M/group, k...]`.
pub struct ConvTranspose;

impl OpSpec for ConvTranspose {
    fn name(&self) -> &'static str {
        "ConvTranspose"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 3), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, w, b) = (input(ins, 0)?, input(ins, 1)?, ins.get(2).and_then(|b| b.as_ref()));
        let op = "ConvTranspose";
        check_dtype(op, x, CONV_DTYPES)?;
        let (xd, wd) = (dims_of(x, "X")?, dims_of(w, "W")?);
        let k = spatial_rank(op, &xd)?;
        check_weights(op, x, w, &wd, xd.len())?;
        let g = group(attrs, op)?;
        let c = xd[1];
        if c % g != 0 {
            reject!("{op} group {g} must divide input channels {c}");
        }
        if wd[0] != c {
            reject!("{op} weight {wd:?} must start with the input channels {c}");
        }
        let m = wd[1].checked_mul(g).ok_or_else(|| Reject(format!("{op}: output channels overflow")))?;
        check_bias(op, x, b, m)?;
        let win = window(op, attrs, k, Some(&wd[2..]))?;
        let out_pad = int_list(attrs, "output_padding", k, 0)?.unwrap_or_else(|| vec![0; k]);
        let out_shape = match attr_ints(attrs, "output_shape")? {
            None => None,
            Some(v) if v.len() == k || v.len() == k + 2 => {
                let v = v[v.len() - k..].to_vec();
                if v.iter().any(|&o| !(1..=ATTR_MAX).contains(&o)) {
                    reject!("{op} output_shape {v:?} must be positive");
                }
                Some(v)
            }
            Some(v) => reject!("{op} output_shape needs {k} (or {}) entries, got {v:?}", k + 2),
        };
        let mut out = vec![xd[0], m];
        for i in 0..k {
            let (n, s) = (xd[i + 2] as i128, win.strides[i] as i128);
            // the size before padding is removed
            let full = s * (n - 1) + out_pad[i] as i128 + win.effective(i);
            let size = match (&out_shape, win.auto_pad) {
                (Some(os), _) => os[i] as i128,
                (None, AutoPad::NotSet) => full - win.pads[i] as i128 - win.pads[i + k] as i128,
                (None, AutoPad::Valid) => full,
                (None, AutoPad::SameUpper | AutoPad::SameLower) => n * s,
            };
            if size < 1 || size > full {
                reject!(
                    "{op}: output size {size} in spatial dim {i} needs negative padding or is empty (unpadded {full})"
                );
            }
            out.push(size as usize);
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(rng, |t| spatial_ok(t, CONV_DTYPES), |r| Some(spatial_input(r, CONV_DTYPES, max)))?;
        let (xd, dt) = (x.ty.dims().unwrap(), x.ty.dtype);
        let c = xd[1];
        let g = sample_group(rng, c, 0.25);
        let per_group = rng.random_range(1..=3usize);
        let m = g * per_group;
        let k = xd.len() - 2;
        let mut p = Params::default();
        let mut out_pad = vec![0usize; k];
        let mut out = vec![xd[0], m];
        for (i, &n) in xd[2..].iter().enumerate() {
            let mut found = None;
            for _ in 0..8 {
                let kk = rng.random_range(1..=3usize);
                let dil = if kk > 1 && rng.random_bool(0.2) { 2 } else { 1 };
                let s = if rng.random_bool(0.4) { 2 } else { 1 };
                let op = if s == 2 && rng.random_bool(0.3) { 1 } else { 0 };
                let (pb, pe) = sample_pads(rng, 1);
                let size = s * (n - 1) + op + dil * (kk - 1) + 1;
                if size > pb + pe {
                    found = Some((kk, s, dil, pb, pe, op, size - pb - pe));
                    break;
                }
            }
            let Some((kk, s, dil, pb, pe, op, size)) = found else { reject!("ConvTranspose: no window fits dim {i}") };
            p.push(kk, s, dil, pb, pe);
            out_pad[i] = op;
            out.push(size);
        }
        if out.iter().product::<usize>() > max {
            reject!("ConvTranspose output {out:?} is too large");
        }
        let mut wd = vec![c, per_group];
        wd.extend(&p.kernel);
        let mut inputs = vec![x.name, d.random_constant(rng, &TensorType::new(dt, &wd))?];
        if rng.random_bool(0.5) {
            inputs.push(d.random_constant(rng, &TensorType::new(dt, &[m]))?);
        }
        let mut attrs = Attrs::new();
        let with_kernel = rng.random_bool(0.6);
        p.put(&mut attrs, rng, with_kernel, true);
        put_list(&mut attrs, rng, "output_padding", &out_pad, 0);
        if g != 1 || rng.random_bool(0.2) {
            attrs.insert("group".into(), Attr::Int(g as i64));
        }
        Ok(Proposal::new(inputs, attrs))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fact, ints, run};
    use super::*;
    use crate::graph::DType::*;

    #[test]
    fn conv_output_shapes() {
        let x = fact(F32, &[1, 3, 8, 8]);
        let w = fact(F32, &[4, 3, 3, 3]);
        let out = run("Conv", &[x.clone(), w.clone()], &[("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1]))], 1)
            .unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 4, 4, 4]));
        // dilation 2: effective kernel 5, (8 - 5) / 1 + 1 = 4; asymmetric pads on the width
        let a = [("dilations", ints(&[2, 1])), ("pads", ints(&[0, 0, 0, 1])), ("kernel_shape", ints(&[3, 3]))];
        let out = run("Conv", &[x.clone(), w.clone(), fact(F32, &[4])], &a, 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 4, 4, 7]));
        // 1-D and 3-D, grouped (depthwise)
        let out = run("Conv", &[fact(F16, &[2, 4, 10]), fact(F16, &[8, 1, 3])], &[("group", Attr::Int(4))], 1).unwrap();
        assert_eq!(out[0], TensorType::new(F16, &[2, 8, 8]));
        let out = run(
            "Conv",
            &[fact(F32, &[1, 2, 4, 5, 6]), fact(F32, &[3, 2, 1, 2, 3])],
            &[("strides", ints(&[1, 2, 3]))],
            1,
        )
        .unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 3, 4, 2, 2]));
        // auto_pad
        let out = run(
            "Conv",
            &[x.clone(), w.clone()],
            &[("auto_pad", Attr::str("SAME_UPPER")), ("strides", ints(&[3, 3]))],
            1,
        )
        .unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 4, 3, 3]));
        let out =
            run("Conv", &[x.clone(), w.clone()], &[("auto_pad", Attr::str("VALID")), ("strides", ints(&[2, 2]))], 1)
                .unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 4, 3, 3]));
        // ONNX Runtime's CPU Conv has no kernel for dilations with a SAME auto_pad
        let same_dilated = [("auto_pad", Attr::str("SAME_LOWER")), ("dilations", ints(&[2, 2]))];
        assert!(run("Conv", &[x.clone(), w.clone()], &same_dilated, 1).is_err());
    }

    #[test]
    fn conv_rejects_bad_attributes() {
        let x = fact(F32, &[1, 4, 5, 5]);
        let w = fact(F32, &[6, 2, 3, 3]);
        assert!(run("Conv", &[x.clone(), w.clone()], &[("group", Attr::Int(2))], 1).is_ok());
        assert!(run("Conv", &[x.clone(), w.clone()], &[], 1).is_err(), "channels per group");
        assert!(run("Conv", &[x.clone(), w.clone()], &[("group", Attr::Int(4))], 1).is_err());
        assert!(run("Conv", &[x.clone(), w.clone()], &[("group", Attr::Int(0))], 1).is_err());
        let g2 = ("group", Attr::Int(2));
        let group2 = [g2.clone()];
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("strides", ints(&[0, 1]))], 1).is_err());
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("strides", ints(&[1]))], 1).is_err());
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("pads", ints(&[1, 1]))], 1).is_err());
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("pads", ints(&[-1, 0, 0, 0]))], 1).is_err());
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("kernel_shape", ints(&[2, 2]))], 1).is_err());
        assert!(
            run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("dilations", ints(&[3, 1]))], 1).is_err(),
            "kernel 7 > 5"
        );
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ("auto_pad", Attr::str("SAME"))], 1).is_err());
        let ap = ("auto_pad", Attr::str("VALID"));
        assert!(run("Conv", &[x.clone(), w.clone()], &[g2.clone(), ap, ("pads", ints(&[1, 1, 1, 1]))], 1).is_err());
        assert!(run("Conv", &[x.clone(), w.clone(), fact(F32, &[3])], &group2, 1).is_err(), "bias must be [M]");
        assert!(run("Conv", &[x.clone(), fact(F16, &[6, 2, 3, 3])], &group2, 1).is_err());
        assert!(
            run("Conv", &[fact(F64, &[1, 4, 5, 5]), fact(F64, &[6, 2, 3, 3])], &group2, 1).is_err(),
            "no f64 Conv in ORT"
        );
        assert!(run("Conv", &[fact(F32, &[4, 5]), fact(F32, &[6, 4])], &[], 1).is_err());
        assert!(
            run("Conv", &[fact(F32, &[1, 4, 2, 2]), fact(F32, &[6, 4, 3, 3])], &[], 1).is_err(),
            "kernel exceeds input"
        );
    }

    #[test]
    fn conv_transpose_output_shapes() {
        let x = fact(F32, &[1, 2, 3, 3]);
        let w = fact(F32, &[2, 3, 3, 3]);
        let a = [("strides", ints(&[2, 2])), ("pads", ints(&[1, 1, 1, 1])), ("output_padding", ints(&[1, 0]))];
        let out = run("ConvTranspose", &[x.clone(), w.clone()], &a, 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 3, 6, 5]));
        let out =
            run("ConvTranspose", &[x.clone(), w.clone(), fact(F32, &[6])], &[("group", Attr::Int(2))], 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 6, 5, 5]));
        let a = [("strides", ints(&[2, 2])), ("output_shape", ints(&[6, 7]))];
        let out = run("ConvTranspose", &[x.clone(), w.clone()], &a, 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 3, 6, 7]));
        let a = [("strides", ints(&[2, 2])), ("auto_pad", Attr::str("SAME_LOWER"))];
        let out = run("ConvTranspose", &[x.clone(), w.clone()], &a, 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 3, 6, 6]));
        assert!(
            run("ConvTranspose", &[x.clone(), w.clone()], &[("output_shape", ints(&[8, 8]))], 1).is_err(),
            "needs negative pads"
        );
        assert!(run("ConvTranspose", &[x.clone(), w.clone()], &[("group", Attr::Int(3))], 1).is_err());
        assert!(run("ConvTranspose", &[x.clone(), fact(F32, &[3, 3, 3, 3])], &[], 1).is_err(), "W[0] must be C");
        assert!(run("ConvTranspose", &[fact(F32, &[1, 2, 1]), fact(F32, &[2, 1, 1])], &[("pads", ints(&[1, 0]))], 1)
            .is_err());
        assert!(run("ConvTranspose", &[x, w], &[("output_padding", ints(&[1]))], 1).is_err());
    }
}
