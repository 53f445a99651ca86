//! Convolutions and pooling over 1-D/2-D/3-D spatial inputs (rank 3..=5, layout N x C x D1 ...): Conv,
//! ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool. Output sizes follow ONNX (opset 20);
//! dtype lists are what ONNX Runtime 1.31's CPU provider runs (docs/ort-cpu-dtypes.tsv).

use super::{
    attr_int, attr_ints, attr_string, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng,
};
use crate::graph::{Attr, Attrs, DType, Dim, TensorType};
use rand::Rng as _;

use DType::*;
const CONV_DTYPES: &[DType] = &[F32, F16];
const MAXPOOL_DTYPES: &[DType] = &[F32, F64, F16, I8, U8];

/// Largest value accepted in a window attribute (keeps the arithmetic far from overflow).
const ATTR_MAX: i64 = 1 << 24;

#[derive(Clone, Copy, Debug, PartialEq)]
enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// The validated window attributes of a conv or pool over `k` spatial dims.
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    /// `[begin_0, .., begin_k-1, end_0, .., end_k-1]`
    pads: Vec<usize>,
    auto_pad: AutoPad,
}

/// An int-list attribute of exactly `len` entries, each in `min..=ATTR_MAX`.
fn int_list(attrs: &Attrs, key: &str, len: usize, min: i64) -> Result<Option<Vec<usize>>, Reject> {
    let Some(v) = attr_ints(attrs, key)? else {
        return Ok(None);
    };
    if v.len() != len {
        reject!("attribute '{key}' needs {len} entries, got {v:?}");
    }
    if let Some(bad) = v.iter().find(|&&x| x < min || x > ATTR_MAX) {
        reject!("attribute '{key}' entry {bad} is out of range (min {min})");
    }
    Ok(Some(v.iter().map(|&x| x as usize).collect()))
}

fn flag(attrs: &Attrs, op: &str, key: &str) -> Result<bool, Reject> {
    match attr_int(attrs, key, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(Reject(format!("{op} {key} must be 0 or 1, got {v}"))),
    }
}

/// Reads kernel_shape (or takes the weight's), strides, dilations, pads and auto_pad.
fn window(op: &str, attrs: &Attrs, k: usize, w_kernel: Option<&[usize]>) -> Result<Window, Reject> {
    let kernel = match (int_list(attrs, "kernel_shape", k, 1)?, w_kernel) {
        (Some(ks), Some(w)) if ks != w => {
            reject!("{op} kernel_shape {ks:?} differs from the weight's {w:?}")
        }
        (Some(ks), _) => ks,
        (None, Some(w)) => w.to_vec(),
        (None, None) => reject!("{op} needs kernel_shape"),
    };
    let strides = int_list(attrs, "strides", k, 1)?.unwrap_or_else(|| vec![1; k]);
    let dilations = int_list(attrs, "dilations", k, 1)?.unwrap_or_else(|| vec![1; k]);
    let pads = int_list(attrs, "pads", 2 * k, 0)?;
    let auto_pad = match attr_string(attrs, "auto_pad", "NOTSET")?.as_str() {
        "NOTSET" => AutoPad::NotSet,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        "VALID" => AutoPad::Valid,
        other => {
            reject!("{op} auto_pad '{other}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
        }
    };
    if auto_pad != AutoPad::NotSet && pads.as_ref().is_some_and(|p| p.iter().any(|&x| x != 0)) {
        reject!("{op} cannot take explicit pads together with auto_pad");
    }
    Ok(Window { kernel, strides, dilations, pads: pads.unwrap_or_else(|| vec![0; 2 * k]), auto_pad })
}

impl Window {
    fn rank(&self) -> usize {
        self.kernel.len()
    }

    /// Extent of the dilated kernel along spatial dim `i`.
    fn effective(&self, i: usize) -> i128 {
        self.dilations[i] as i128 * (self.kernel[i] as i128 - 1) + 1
    }

    /// Whether ceil_mode's "last window must start inside" rule drops a window along dim `i`. onnx's shape
    /// inference (1.22) does not apply the rule while ONNX Runtime does, so seeds avoid these cases.
    fn ceil_rule_applies(&self, i: usize, size: usize) -> bool {
        let (n, s, ek) = (size as i128, self.strides[i] as i128, self.effective(i));
        let (pb, pe) = (self.pads[i] as i128, self.pads[i + self.rank()] as i128);
        let span = n + pb + pe - ek;
        self.auto_pad == AutoPad::NotSet && span >= 0 && ((span + s - 1) / s) * s >= n + pb
    }

    /// Output size of a forward window (conv or pool) along spatial dim `i` for an input of size `size`.
    fn forward(&self, op: &str, i: usize, size: usize, ceil: bool) -> Result<usize, Reject> {
        let (n, s, ek) = (size as i128, self.strides[i] as i128, self.effective(i));
        let (pb, pe) = (self.pads[i] as i128, self.pads[i + self.rank()] as i128);
        let out = match self.auto_pad {
            AutoPad::NotSet => {
                let padded = n + pb + pe;
                if padded < ek {
                    reject!("{op}: dilated kernel {ek} exceeds padded input {padded} in spatial dim {i}");
                }
                let span = padded - ek;
                let mut o = if ceil { (span + s - 1) / s + 1 } else { span / s + 1 };
                // ONNX/ORT: with ceil_mode the last window must start inside the input or the left padding
                if ceil && (o - 1) * s >= n + pb {
                    o -= 1;
                }
                o
            }
            AutoPad::Valid => {
                if n < ek {
                    reject!("{op}: dilated kernel {ek} exceeds input {n} in spatial dim {i}");
                }
                (n - ek) / s + 1
            }
            AutoPad::SameUpper | AutoPad::SameLower => (n + s - 1) / s,
        };
        Ok(out as usize)
    }
}

/// The number of spatial dims of a conv/pool input (rank 3..=5, no zero dims).
fn spatial_rank(op: &str, xd: &[usize]) -> Result<usize, Reject> {
    if !(3..=5).contains(&xd.len()) {
        reject!("{op} needs an input of rank 3..=5, got {xd:?}");
    }
    if xd.contains(&0) {
        reject!("{op} does not take zero-sized dims, got {xd:?}");
    }
    Ok(xd.len() - 2)
}

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

/// MaxPool (outputs Y and optionally int64 Indices) and AveragePool.
pub struct Pool {
    name: &'static str,
    dtypes: &'static [DType],
    max: bool,
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
    name: &'static str,
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

// ---- sampling helpers ----

/// A static conv/pool input of an allowed dtype: rank 3..=5, no zero dims.
fn spatial_ok(t: &TensorType, dtypes: &[DType]) -> bool {
    dtypes.contains(&t.dtype) && t.dims().is_some_and(|d| (3..=5).contains(&d.len()) && !d.contains(&0))
}

/// A fresh conv/pool input type: `[1..=2, 1..=4, spatial...]`, spatial dims 3..=8 (2..=5 in 3-D), mostly 2-D.
fn spatial_input(rng: &mut Rng, dtypes: &[DType], max: usize) -> TensorType {
    let dtype =
        if dtypes.contains(&F32) && rng.random_bool(0.5) { F32 } else { dtypes[rng.random_range(0..dtypes.len())] };
    let rank = [3, 4, 4, 4, 5][rng.random_range(0..5)];
    let (lo, hi) = if rank == 5 { (2, 5) } else { (3, 8) };
    let mut dims = vec![rng.random_range(1..=2usize), rng.random_range(1..=4usize)];
    dims.extend((2..rank).map(|_| rng.random_range(lo..=hi)));
    while dims.iter().product::<usize>() > max {
        let i = (2..rank).max_by_key(|&i| dims[i]).unwrap();
        dims[i] = dims[i].div_ceil(2);
    }
    TensorType::new(dtype, &dims)
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

/// Begin/end pads in `0..=hi`: none most often, sometimes symmetric, sometimes not.
fn sample_pads(rng: &mut Rng, hi: usize) -> (usize, usize) {
    match rng.random_range(0..5) {
        0 | 1 => (0, 0),
        2 | 3 => {
            let p = rng.random_range(0..=hi);
            (p, p)
        }
        _ => (rng.random_range(0..=hi), rng.random_range(0..=hi)),
    }
}

/// Sampled window attributes, kept in the order they are chosen.
#[derive(Default)]
struct Params {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    begin: Vec<usize>,
    end: Vec<usize>,
}

impl Params {
    fn push(&mut self, k: usize, s: usize, d: usize, pb: usize, pe: usize) {
        self.kernel.push(k);
        self.strides.push(s);
        self.dilations.push(d);
        self.begin.push(pb);
        self.end.push(pe);
    }

    fn pads(&self) -> Vec<usize> {
        self.begin.iter().chain(&self.end).copied().collect()
    }

    fn window(&self) -> Window {
        Window {
            kernel: self.kernel.clone(),
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pads: self.pads(),
            auto_pad: AutoPad::NotSet,
        }
    }

    /// Writes the attributes; defaults are sometimes left out. Dilations only when `dilations`.
    fn put(&self, attrs: &mut Attrs, rng: &mut Rng, kernel: bool, dilations: bool) {
        if kernel {
            put_list(attrs, rng, "kernel_shape", &self.kernel, usize::MAX);
        }
        put_list(attrs, rng, "strides", &self.strides, 1);
        put_list(attrs, rng, "pads", &self.pads(), 0);
        if dilations {
            put_list(attrs, rng, "dilations", &self.dilations, 1);
        }
    }
}

/// Sets an int-list attribute when it differs from the all-`default` list, or by chance.
fn put_list(attrs: &mut Attrs, rng: &mut Rng, key: &str, v: &[usize], default: usize) {
    if v.iter().any(|&x| x != default) || rng.random_bool(0.3) {
        attrs.insert(key.into(), Attr::Ints(v.iter().map(|&x| x as i64).collect()));
    }
}

/// Window attributes valid for the spatial dims `sizes`: kernel 1..=max_k, strides 1..=2, pads 0..=1 (below
/// the kernel for pools), dilations 1..=2 when allowed.
fn sample_window(rng: &mut Rng, sizes: &[usize], max_k: usize, dilate: bool, pool: bool) -> Result<Params, Reject> {
    let mut p = Params::default();
    for (i, &n) in sizes.iter().enumerate() {
        let mut found = None;
        for _ in 0..8 {
            let k = rng.random_range(1..=max_k);
            let d = if dilate && k > 1 && rng.random_bool(0.25) { 2 } else { 1 };
            let s = if rng.random_bool(0.35) { 2 } else { 1 };
            let (pb, pe) = sample_pads(rng, if pool { (k - 1).min(1) } else { 1 });
            if n + pb + pe > d * (k - 1) {
                found = Some((k, s, d, pb, pe));
                break;
            }
        }
        let Some((k, s, d, pb, pe)) = found else { reject!("no window fits spatial dim {i} of size {n}") };
        p.push(k, s, d, pb, pe);
    }
    Ok(p)
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(Conv));
    v.push(Box::new(ConvTranspose));
    v.push(Box::new(Pool { name: "MaxPool", dtypes: MAXPOOL_DTYPES, max: true }));
    v.push(Box::new(Pool { name: "AveragePool", dtypes: CONV_DTYPES, max: false }));
    v.push(Box::new(GlobalPool { name: "GlobalAveragePool" }));
    v.push(Box::new(GlobalPool { name: "GlobalMaxPool" }));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;

    fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
        Some(Fact { ty: TensorType::new(d, s), value: None })
    }

    fn attrs(list: &[(&str, Attr)]) -> Attrs {
        list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn ints(v: &[i64]) -> Attr {
        Attr::Ints(v.to_vec())
    }

    fn run(op: &str, ins: &[Option<Fact>], a: &[(&str, Attr)], outs: usize) -> Result<Vec<TensorType>, Reject> {
        infer_node(lookup("", op).unwrap(), ins, &attrs(a), outs)
    }

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

    #[test]
    fn every_conv_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
