//! The window machinery convs and pools share: kernel/strides/dilations/pads/auto_pad parsing, output sizes,
//! and sampling of spatial inputs and window attributes.

use crate::graph::{Attr, Attrs, DType, TensorType};
use crate::ops::{attr_ints, attr_string, Reject, Rng};
use rand::Rng as _;

use DType::*;

/// Largest value accepted in a window attribute (keeps the arithmetic far from overflow).
pub(super) const ATTR_MAX: i64 = 1 << 24;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum AutoPad {
    NotSet,
    SameUpper,
    SameLower,
    Valid,
}

/// The validated window attributes of a conv or pool over `k` spatial dims.
pub(super) struct Window {
    pub(super) kernel: Vec<usize>,
    pub(super) strides: Vec<usize>,
    dilations: Vec<usize>,
    /// `[begin_0, .., begin_k-1, end_0, .., end_k-1]`
    pub(super) pads: Vec<usize>,
    pub(super) auto_pad: AutoPad,
}

/// An int-list attribute of exactly `len` entries, each in `min..=ATTR_MAX`.
pub(super) fn int_list(attrs: &Attrs, key: &str, len: usize, min: i64) -> Result<Option<Vec<usize>>, Reject> {
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

/// Reads kernel_shape (or takes the weight's), strides, dilations, pads and auto_pad.
pub(super) fn window(op: &str, attrs: &Attrs, k: usize, w_kernel: Option<&[usize]>) -> Result<Window, Reject> {
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
    // ONNX Runtime's CPU kernels: "Dilation not supported for AutoPadType::SAME_UPPER or AutoPadType::SAME_LOWER"
    if matches!(auto_pad, AutoPad::SameUpper | AutoPad::SameLower) && dilations.iter().any(|&d| d != 1) {
        reject!("{op}: dilations with a SAME auto_pad have no ONNX Runtime CPU kernel");
    }
    Ok(Window { kernel, strides, dilations, pads: pads.unwrap_or_else(|| vec![0; 2 * k]), auto_pad })
}

impl Window {
    fn rank(&self) -> usize {
        self.kernel.len()
    }

    /// Extent of the dilated kernel along spatial dim `i`.
    pub(super) fn effective(&self, i: usize) -> i128 {
        self.dilations[i] as i128 * (self.kernel[i] as i128 - 1) + 1
    }

    /// Whether ceil_mode's "last window must start inside" rule drops a window along dim `i`. onnx's shape
    /// inference (1.22) does not apply the rule while ONNX Runtime does, so seeds avoid these cases.
    pub(super) fn ceil_rule_applies(&self, i: usize, size: usize) -> bool {
        let (n, s, ek) = (size as i128, self.strides[i] as i128, self.effective(i));
        let (pb, pe) = (self.pads[i] as i128, self.pads[i + self.rank()] as i128);
        let span = n + pb + pe - ek;
        self.auto_pad == AutoPad::NotSet && span >= 0 && ((span + s - 1) / s) * s >= n + pb
    }

    /// Whether some window along spatial dim `i` (input size `size`, `out` windows) lies wholly in the padding:
    /// a pool's value there is not specified (ONNX Runtime's MaxPool gives the lowest float, onnx.reference 0).
    pub(super) fn wholly_padded(&self, i: usize, size: usize, out: usize) -> bool {
        let (n, s, d, ek) = (size as i128, self.strides[i] as i128, self.dilations[i] as i128, self.effective(i));
        let begin = match self.auto_pad {
            AutoPad::NotSet => self.pads[i] as i128,
            AutoPad::Valid => 0,
            AutoPad::SameUpper | AutoPad::SameLower => {
                let total = ((out as i128 - 1) * s + ek - n).max(0);
                if self.auto_pad == AutoPad::SameUpper {
                    total / 2
                } else {
                    total - total / 2
                }
            }
        };
        (0..out as i128).any(|o| (0..self.kernel[i] as i128).all(|k| !(0..n).contains(&(o * s - begin + k * d))))
    }

    /// Output size of a forward window (conv or pool) along spatial dim `i` for an input of size `size`.
    pub(super) fn forward(&self, op: &str, i: usize, size: usize, ceil: bool) -> Result<usize, Reject> {
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
pub(super) fn spatial_rank(op: &str, xd: &[usize]) -> Result<usize, Reject> {
    if !(3..=5).contains(&xd.len()) {
        reject!("{op} needs an input of rank 3..=5, got {xd:?}");
    }
    if xd.contains(&0) {
        reject!("{op} does not take zero-sized dims, got {xd:?}");
    }
    Ok(xd.len() - 2)
}

// ---- sampling helpers ----

/// A static conv/pool input of an allowed dtype: rank 3..=5, no zero dims.
pub(super) fn spatial_ok(t: &TensorType, dtypes: &[DType]) -> bool {
    dtypes.contains(&t.dtype) && t.dims().is_some_and(|d| (3..=5).contains(&d.len()) && !d.contains(&0))
}

/// A fresh conv/pool input type: `[1..=2, 1..=4, spatial...]`, spatial dims 3..=8 (2..=5 in 3-D), mostly 2-D.
pub(super) fn spatial_input(rng: &mut Rng, dtypes: &[DType], max: usize) -> TensorType {
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

/// Begin/end pads in `0..=hi`: none most often, sometimes symmetric, sometimes not.
pub(super) fn sample_pads(rng: &mut Rng, hi: usize) -> (usize, usize) {
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
pub(super) struct Params {
    pub(super) kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    begin: Vec<usize>,
    end: Vec<usize>,
}

impl Params {
    pub(super) fn push(&mut self, k: usize, s: usize, d: usize, pb: usize, pe: usize) {
        self.kernel.push(k);
        self.strides.push(s);
        self.dilations.push(d);
        self.begin.push(pb);
        self.end.push(pe);
    }

    fn pads(&self) -> Vec<usize> {
        self.begin.iter().chain(&self.end).copied().collect()
    }

    pub(super) fn window(&self) -> Window {
        Window {
            kernel: self.kernel.clone(),
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pads: self.pads(),
            auto_pad: AutoPad::NotSet,
        }
    }

    /// Writes the attributes; defaults are sometimes left out. Dilations only when `dilations`.
    pub(super) fn put(&self, attrs: &mut Attrs, rng: &mut Rng, kernel: bool, dilations: bool) {
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
pub(super) fn put_list(attrs: &mut Attrs, rng: &mut Rng, key: &str, v: &[usize], default: usize) {
    if v.iter().any(|&x| x != default) || rng.random_bool(0.3) {
        attrs.insert(key.into(), Attr::Ints(v.iter().map(|&x| x as i64).collect()));
    }
}

/// Window attributes valid for the spatial dims `sizes`: kernel 1..=max_k, strides 1..=2, pads 0..=1 (below
/// the kernel for pools), dilations 1..=2 when allowed.
pub(super) fn sample_window(
    rng: &mut Rng,
    sizes: &[usize],
    max_k: usize,
    dilate: bool,
    pool: bool,
) -> Result<Params, Reject> {
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
