//! Shape and data-movement ops: Reshape, Transpose, Concat, Split, Slice, Pad, Squeeze, Unsqueeze, Expand,
//! Flatten, Gather, Tile, DepthToSpace, SpaceToDepth (ONNX opset 20 semantics).
//! Shape-like operands (shape, axes, pads, starts/ends/steps, split, repeats) must be constants so every shape
//! stays static. Dtype lists are what ONNX Runtime 1.31's CPU provider runs (docs/ort-cpu-dtypes.tsv).

use super::draft::{random_dims, random_tensor, random_type};
use super::elementwise::ALL;
use super::{
    attr_int, attr_ints, attr_string, broadcast, check_dtype, const_ints, dims_of, infer_node, input, names, norm_axis,
    Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng, Value,
};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng as _;
use std::ops::RangeInclusive;

use DType::*;
const PAD_DTYPES: &[DType] = &[F32, F64, F16, I8, U8, I32, I64, U32, U64, Bool];
const SPACE_DTYPES: &[DType] = &[F32, F64, F16, I8, U8];
const INDEX: &[DType] = &[I32, I64];

// ---- helpers shared with the other families of this crate ----

/// The values of a constant 1-D integer input whose dtype is one of `dtypes`.
pub(super) fn const_1d(f: &Fact, what: &str, dtypes: &[DType]) -> Result<Vec<i64>, Reject> {
    if !dtypes.contains(&f.ty.dtype) {
        reject!("{what} must be {}, got {}", names(dtypes), f.ty.dtype);
    }
    if f.ty.rank() != Some(1) {
        reject!("{what} must be 1-D, got {}", f.ty);
    }
    const_ints(f, what)
}

/// The optional input at `i` (`None` when absent or omitted with `""`).
pub(super) fn opt_input<'a, 'b>(ins: &'a [Option<Fact<'b>>], i: usize) -> Option<&'a Fact<'b>> {
    ins.get(i).and_then(|f| f.as_ref())
}

/// Normalizes axes in [-rank, rank-1], rejecting out-of-range and repeated ones.
pub(super) fn norm_axes(axes: &[i64], rank: usize, what: &str) -> Result<Vec<usize>, Reject> {
    let r = rank as i64;
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        if a < -r || a >= r {
            reject!("{what} {a} is out of range for rank {rank}");
        }
        let n = (if a < 0 { a + r } else { a }) as usize;
        if out.contains(&n) {
            reject!("{what} {axes:?} repeat an axis");
        }
        out.push(n);
    }
    Ok(out)
}

/// Element count, rejecting an overflowing shape.
pub(super) fn checked_numel(dims: &[usize]) -> Result<usize, Reject> {
    dims.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).ok_or_else(|| Reject(format!("shape {dims:?} is too large")))
}

/// A new constant 1-D int64 tensor.
pub(super) fn int_const(d: &mut Draft, v: &[i64]) -> String {
    d.constant(Tensor::from_i64(&[v.len()], v))
}

/// An axis written as given or (sometimes) in its negative form.
pub(super) fn maybe_neg(rng: &mut Rng, axis: usize, rank: usize) -> i64 {
    if rng.random_bool(0.3) {
        axis as i64 - rank as i64
    } else {
        axis as i64
    }
}

/// An existing value of a static shape with a dtype in `dtypes`, a rank in `ranks` and dims satisfying `pred`,
/// or a fresh graph input made to fit.
pub(super) fn pick_static(
    d: &mut Draft,
    rng: &mut Rng,
    dtypes: &[DType],
    ranks: RangeInclusive<usize>,
    pred: impl Fn(&[usize]) -> bool,
) -> Result<Value, Reject> {
    let max = d.limits.max_elems;
    let fits =
        |t: &TensorType| dtypes.contains(&t.dtype) && t.dims().is_some_and(|s| ranks.contains(&s.len()) && pred(&s));
    d.pick_or_input(rng, fits, |r| {
        (0..16).map(|_| random_type(r, dtypes, ranks.clone(), max)).find(|t| t.dims().is_some_and(|s| pred(&s)))
    })
}

/// Checks a proposal by inferring it against the draft, and keeps every output within 1..=max_elems elements.
pub(super) fn finish(spec: &dyn OpSpec, d: &Draft, p: Proposal) -> Result<Proposal, Reject> {
    let mut facts = Vec::with_capacity(p.inputs.len());
    for i in &p.inputs {
        facts.push(if i.is_empty() {
            None
        } else {
            Some(d.fact(i).ok_or_else(|| Reject(format!("{}: unknown value {i}", spec.name())))?)
        });
    }
    for t in infer_node(spec, &facts, &p.attrs, p.outputs)? {
        if let Some(dims) = t.dims() {
            match checked_numel(&dims) {
                Ok(n) if n >= 1 && n <= d.limits.max_elems => {}
                _ => reject!("{}: output {t} is empty or too large", spec.name()),
            }
        }
    }
    Ok(p)
}

fn attrs_of(items: Vec<(&str, Attr)>) -> Attrs {
    items.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

// ---- Reshape ----

/// Reshape(data, shape): `0` copies the input dim (unless allowzero=1), one `-1` is inferred.
pub struct Reshape;

impl OpSpec for Reshape {
    fn name(&self) -> &'static str {
        "Reshape"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Reshape", x, ALL)?;
        let xd = dims_of(x, "Reshape data")?;
        let shape = const_1d(input(ins, 1)?, "Reshape shape", &[I64])?;
        let allowzero = attr_int(attrs, "allowzero", 0)? != 0;
        let mut out = Vec::with_capacity(shape.len());
        let mut infer_at = None;
        for (i, &s) in shape.iter().enumerate() {
            match s {
                -1 => {
                    if infer_at.is_some() {
                        reject!("Reshape shape {shape:?} has more than one -1");
                    }
                    infer_at = Some(i);
                    out.push(1);
                }
                0 if !allowzero => match xd.get(i) {
                    Some(&d) => out.push(d),
                    None => reject!("Reshape shape {shape:?} copies dim {i} of a rank-{} input", xd.len()),
                },
                s if s >= 0 => out.push(s as usize),
                _ => reject!("Reshape shape {shape:?} has the invalid value {s}"),
            }
        }
        if allowzero && infer_at.is_some() && shape.contains(&0) {
            reject!("Reshape with allowzero=1 cannot have both 0 and -1 in {shape:?}");
        }
        let total = checked_numel(&xd)?;
        let known = checked_numel(&out)?;
        match infer_at {
            Some(i) => {
                if known == 0 || total % known != 0 {
                    reject!("Reshape cannot infer the -1 of {shape:?} for input {:?}", xd);
                }
                out[i] = total / known;
            }
            None if known != total => {
                reject!("Reshape of {:?} to {shape:?} changes the element count", xd)
            }
            None => {}
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=5, |s| s.iter().all(|&v| v >= 1))?;
        let xd = x.ty.dims().unwrap();
        let n: usize = xd.iter().product();
        let rank = rng.random_range(if n == 1 { 0 } else { 1 }..=5);
        let mut target = vec![1usize; rank];
        for p in prime_factors(n) {
            target[rng.random_range(0..rank)] *= p;
        }
        let mut vals: Vec<i64> = target.iter().map(|&t| t as i64).collect();
        for (i, v) in vals.iter_mut().enumerate() {
            if xd.get(i) == Some(&target[i]) && rng.random_bool(0.3) {
                *v = 0;
            }
        }
        if rank > 0 && rng.random_bool(0.5) {
            vals[rng.random_range(0..rank)] = -1;
        }
        let shape = int_const(d, &vals);
        finish(self, d, Proposal::new(vec![x.name, shape], Attrs::new()))
    }
}

fn prime_factors(mut n: usize) -> Vec<usize> {
    let mut f = Vec::new();
    let mut p = 2;
    while p * p <= n {
        while n.is_multiple_of(p) {
            f.push(p);
            n /= p;
        }
        p += 1;
    }
    if n > 1 {
        f.push(n);
    }
    f
}

// ---- Transpose ----

/// Transpose(data) with attribute `perm` (default: reversed dims).
pub struct Transpose;

impl OpSpec for Transpose {
    fn name(&self) -> &'static str {
        "Transpose"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Transpose", x, ALL)?;
        let xd = dims_of(x, "Transpose data")?;
        let r = xd.len();
        let perm = match attr_ints(attrs, "perm")? {
            Some(p) => p,
            None => (0..r as i64).rev().collect(),
        };
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        if sorted != (0..r as i64).collect::<Vec<_>>() {
            reject!("Transpose perm {perm:?} is not a permutation of 0..{r}");
        }
        let out: Vec<usize> = perm.iter().map(|&p| xd[p as usize]).collect();
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=5, |_| true)?;
        let r = x.ty.rank().unwrap();
        let mut attrs = Attrs::new();
        if r >= 2 && rng.random_bool(0.8) {
            let mut perm: Vec<i64> = (0..r as i64).collect();
            perm.shuffle(rng);
            attrs.insert("perm".into(), Attr::Ints(perm));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

// ---- Concat ----

/// Concat(inputs...) along attribute `axis` (required); non-axis dims must match.
pub struct Concat;

impl OpSpec for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 64), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let first = input(ins, 0)?;
        check_dtype("Concat", first, ALL)?;
        let mut out = dims_of(first, "Concat input")?;
        if out.is_empty() {
            reject!("Concat needs inputs of rank >= 1");
        }
        if !attrs.contains_key("axis") {
            reject!("Concat needs the attribute 'axis'");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, out.len(), "Concat axis")?;
        for i in 1..ins.len() {
            let f = input(ins, i)?;
            if f.ty.dtype != first.ty.dtype {
                reject!("Concat needs equal dtypes, got {} and {}", first.ty.dtype, f.ty.dtype);
            }
            let fd = dims_of(f, "Concat input")?;
            if fd.len() != out.len() || fd.iter().zip(&out).enumerate().any(|(j, (a, b))| j != axis && a != b) {
                reject!("Concat inputs {:?} and {:?} differ outside axis {axis}", out, fd);
            }
            out[axis] = out[axis].checked_add(fd[axis]).ok_or_else(|| Reject("Concat output is too large".into()))?;
        }
        Ok(vec![TensorType::new(first.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let axis = rng.random_range(0..r);
        let dtype = x.ty.dtype;
        let fits = |t: &TensorType| {
            t.dtype == dtype && t.dims().is_some_and(|s| s.len() == r && (0..r).all(|j| j == axis || s[j] == xd[j]))
        };
        let mut inputs = vec![x.name.clone()];
        for _ in 0..rng.random_range(1..=2) {
            let existing = if rng.random_bool(0.6) { d.pick(rng, fits) } else { None };
            let name = match existing {
                Some(v) => v.name,
                None => {
                    let mut od = xd.clone();
                    od[axis] = rng.random_range(1..=4);
                    let ty = TensorType::new(dtype, &od);
                    if rng.random_bool(0.5) {
                        d.random_constant(rng, &ty)?
                    } else if ty.numel().is_some_and(|n| n <= d.limits.max_elems) {
                        d.input(ty).name
                    } else {
                        reject!("Concat operand {ty} is too large");
                    }
                }
            };
            inputs.push(name);
        }
        inputs[1..].shuffle(rng);
        if rng.random_bool(0.3) {
            inputs.swap(0, 1);
        }
        let attrs = attrs_of(vec![("axis", Attr::Int(maybe_neg(rng, axis, r)))]);
        finish(self, d, Proposal::new(inputs, attrs))
    }
}

// ---- Split ----

/// Split(input, split?) along `axis`, by the constant `split` sizes or into `num_outputs` parts (opset 18).
pub struct Split;

impl OpSpec for Split {
    fn name(&self) -> &'static str {
        "Split"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 2), outputs: (1, 64) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Split", x, ALL)?;
        let xd = dims_of(x, "Split input")?;
        if xd.is_empty() {
            reject!("Split needs an input of rank >= 1");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, xd.len(), "Split axis")?;
        let dim = xd[axis];
        let sizes: Vec<usize> = match (opt_input(ins, 1), attrs.get("num_outputs")) {
            (Some(_), Some(_)) => {
                reject!("Split takes either the 'split' input or 'num_outputs', not both")
            }
            (None, None) => reject!("Split needs the 'split' input or the 'num_outputs' attribute"),
            (Some(s), None) => {
                let s = const_1d(s, "Split split", &[I64])?;
                if s.is_empty() || s.iter().any(|&v| v < 0) || s.iter().map(|&v| v as i128).sum::<i128>() != dim as i128
                {
                    reject!("Split sizes {s:?} do not add up to dim {dim}");
                }
                s.iter().map(|&v| v as usize).collect()
            }
            (None, Some(_)) => {
                let n = attr_int(attrs, "num_outputs", 0)?;
                if n < 1 || n as usize > dim {
                    reject!("Split num_outputs {n} is invalid for dim {dim}");
                }
                let n = n as usize;
                let chunk = dim.div_ceil(n);
                if chunk * (n - 1) >= dim {
                    reject!("Split of dim {dim} into {n} outputs leaves the last one empty");
                }
                let mut v = vec![chunk; n];
                v[n - 1] = dim - chunk * (n - 1);
                v
            }
        };
        Ok(sizes
            .into_iter()
            .map(|s| {
                let mut od = xd.clone();
                od[axis] = s;
                TensorType::new(x.ty.dtype, &od)
            })
            .collect())
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=5, |s| s.iter().any(|&v| v >= 2))?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let cands: Vec<usize> = (0..r).filter(|&i| xd[i] >= 2).collect();
        let axis = cands[rng.random_range(0..cands.len())];
        let dim = xd[axis];
        let k = rng.random_range(2..=dim.min(3));
        let mut attrs = Attrs::new();
        if axis != 0 || rng.random_bool(0.5) {
            attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
        }
        let mut inputs = vec![x.name];
        let chunk = dim.div_ceil(k);
        if chunk * (k - 1) < dim && rng.random_bool(0.5) {
            attrs.insert("num_outputs".into(), Attr::Int(k as i64));
        } else {
            // k positive sizes adding up to dim
            let mut cuts: Vec<usize> = (1..dim).collect();
            cuts.shuffle(rng);
            let mut cuts: Vec<usize> = cuts[..k - 1].to_vec();
            cuts.sort_unstable();
            let mut sizes = Vec::with_capacity(k);
            let mut prev = 0;
            for c in cuts.into_iter().chain([dim]) {
                sizes.push((c - prev) as i64);
                prev = c;
            }
            inputs.push(int_const(d, &sizes));
        }
        let p = Proposal { inputs, attrs, outputs: k };
        finish(self, d, p)
    }
}

// ---- Slice ----

/// Slice(data, starts, ends, axes?, steps?) with constant index inputs, clamped as ONNX specifies.
pub struct Slice;

/// The length of one sliced dim (ONNX clamping; negative steps walk backwards).
fn slice_len(dim: usize, start: i64, end: i64, step: i64) -> usize {
    let (d, step) = (dim as i128, step as i128);
    let fix = |v: i64| if v < 0 { v as i128 + d } else { v as i128 };
    let (s, e) = if step > 0 {
        (fix(start).clamp(0, d), fix(end).clamp(0, d))
    } else {
        (fix(start).max(0).min(d - 1), fix(end).max(-1).min(d - 1))
    };
    let n = if step > 0 { (e - s + step - 1) / step } else { (s - e - step - 1) / -step };
    n.max(0) as usize
}

impl OpSpec for Slice {
    fn name(&self) -> &'static str {
        "Slice"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (3, 5), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Slice", x, ALL)?;
        let xd = dims_of(x, "Slice data")?;
        let (sf, ef) = (input(ins, 1)?, input(ins, 2)?);
        let tind = sf.ty.dtype;
        let same = |f: &Fact, what: &str| -> Result<Vec<i64>, Reject> {
            if f.ty.dtype != tind {
                reject!("Slice {what} must have the dtype of starts ({tind}), got {}", f.ty.dtype);
            }
            const_1d(f, &format!("Slice {what}"), INDEX)
        };
        let starts = const_1d(sf, "Slice starts", INDEX)?;
        let ends = same(ef, "ends")?;
        let n = starts.len();
        let axes = match opt_input(ins, 3) {
            Some(f) => same(f, "axes")?,
            None => (0..n as i64).collect(),
        };
        let steps = match opt_input(ins, 4) {
            Some(f) => same(f, "steps")?,
            None => vec![1; n],
        };
        if ends.len() != n || axes.len() != n || steps.len() != n {
            reject!(
                "Slice starts/ends/axes/steps lengths differ: {n}, {}, {}, {}",
                ends.len(),
                axes.len(),
                steps.len()
            );
        }
        let axes = norm_axes(&axes, xd.len(), "Slice axes")?;
        let mut out = xd.clone();
        for i in 0..n {
            if steps[i] == 0 {
                reject!("Slice step cannot be 0");
            }
            out[axes[i]] = slice_len(xd[axes[i]], starts[i], ends[i], steps[i]);
        }
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=5, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let mut axes: Vec<usize> = (0..r).collect();
        axes.shuffle(rng);
        axes.truncate(rng.random_range(1..=r));
        let wide = rng.random_bool(0.8);
        let (big, small) = if wide { (i64::MAX, i64::MIN) } else { (i32::MAX as i64, i32::MIN as i64) };
        let (mut starts, mut ends, mut steps) = (Vec::new(), Vec::new(), Vec::new());
        for &a in &axes {
            let dim = xd[a] as i64;
            if dim == 0 {
                reject!("Slice of an empty axis");
            }
            let step: i64 = *[1, 1, 1, 2, 3, -1, -1, -2].choose(rng).unwrap();
            let s = rng.random_range(0..dim);
            let neg = |rng: &mut Rng, v: i64| if rng.random_bool(0.3) { v - dim } else { v };
            let (start, end) = if step > 0 {
                let e = rng.random_range(s + 1..=dim);
                let end =
                    if e == dim { *[dim, dim + rng.random_range(1..5), big].choose(rng).unwrap() } else { neg(rng, e) };
                let start = if s == 0 && rng.random_bool(0.2) { -dim - rng.random_range(0..5) } else { neg(rng, s) };
                (start, end)
            } else {
                let e = rng.random_range(-1..s);
                let end = if e == -1 { *[-dim - 1, small].choose(rng).unwrap() } else { neg(rng, e) };
                let start =
                    if s == dim - 1 && rng.random_bool(0.3) { *[dim, big].choose(rng).unwrap() } else { neg(rng, s) };
                (start, end)
            };
            starts.push(start);
            ends.push(end);
            steps.push(step);
        }
        let dtype = if wide { I64 } else { I32 };
        let mut c = |v: &[i64]| {
            d.constant(Tensor::from_f64s(dtype, &[v.len()], &v.iter().map(|&x| x as f64).collect::<Vec<_>>()))
        };
        let mut inputs = vec![x.name.clone(), c(&starts), c(&ends)];
        let default_axes = axes.iter().enumerate().all(|(i, &a)| i == a);
        let default_steps = steps.iter().all(|&s| s == 1);
        let need_steps = !default_steps || rng.random_bool(0.3);
        if !default_axes || need_steps || rng.random_bool(0.5) {
            let ax: Vec<i64> = axes.iter().map(|&a| maybe_neg(rng, a, r)).collect();
            inputs.push(c(&ax));
        }
        if need_steps {
            inputs.push(c(&steps));
        }
        finish(self, d, Proposal::new(inputs, Attrs::new()))
    }
}

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

// ---- Squeeze / Unsqueeze ----

/// Squeeze(data, axes?): removes the given size-1 dims, or all of them when axes is omitted or empty.
pub struct Squeeze;

impl OpSpec for Squeeze {
    fn name(&self) -> &'static str {
        "Squeeze"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (1, 2), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Squeeze", x, ALL)?;
        let xd = dims_of(x, "Squeeze data")?;
        let axes = match opt_input(ins, 1) {
            Some(f) => norm_axes(&const_1d(f, "Squeeze axes", &[I64])?, xd.len(), "Squeeze axes")?,
            None => vec![],
        };
        for &a in &axes {
            if xd[a] != 1 {
                reject!("Squeeze axis {a} has size {}", xd[a]);
            }
        }
        let out: Vec<usize> = if axes.is_empty() {
            xd.iter().copied().filter(|&v| v != 1).collect()
        } else {
            xd.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &v)| v).collect()
        };
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let fits = |t: &TensorType| ALL.contains(&t.dtype) && t.dims().is_some_and(|s| s.contains(&1));
        let x = d.pick_or_input(rng, fits, |r| {
            let mut t = random_type(r, ALL, 1..=5, max);
            let rank = t.rank().unwrap();
            let mut dims = t.dims().unwrap();
            dims[r.random_range(0..rank)] = 1;
            t = TensorType::new(t.dtype, &dims);
            Some(t)
        })?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let mut inputs = vec![x.name];
        if rng.random_bool(0.8) {
            let mut ones: Vec<usize> = (0..r).filter(|&i| xd[i] == 1).collect();
            ones.shuffle(rng);
            ones.truncate(rng.random_range(1..=ones.len()));
            let ax: Vec<i64> = ones.iter().map(|&a| maybe_neg(rng, a, r)).collect();
            inputs.push(int_const(d, &ax));
        }
        finish(self, d, Proposal::new(inputs, Attrs::new()))
    }
}

/// Unsqueeze(data, axes): inserts size-1 dims at the given positions of the output.
pub struct Unsqueeze;

impl OpSpec for Unsqueeze {
    fn name(&self) -> &'static str {
        "Unsqueeze"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Unsqueeze", x, ALL)?;
        let xd = dims_of(x, "Unsqueeze data")?;
        let axes = const_1d(input(ins, 1)?, "Unsqueeze axes", &[I64])?;
        let out_rank = xd.len() + axes.len();
        let axes = norm_axes(&axes, out_rank, "Unsqueeze axes")?;
        let mut rest = xd.iter();
        let out: Vec<usize> =
            (0..out_rank).map(|i| if axes.contains(&i) { 1 } else { *rest.next().unwrap() }).collect();
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=4, |_| true)?;
        let r = x.ty.rank().unwrap();
        let k = rng.random_range(1..=(5 - r).min(2));
        let out_rank = r + k;
        let mut pos: Vec<usize> = (0..out_rank).collect();
        pos.shuffle(rng);
        let ax: Vec<i64> = pos[..k].iter().map(|&a| maybe_neg(rng, a, out_rank)).collect();
        let axes = int_const(d, &ax);
        finish(self, d, Proposal::new(vec![x.name, axes], Attrs::new()))
    }
}

// ---- Expand / Tile ----

/// Expand(input, shape): bidirectional (numpy) broadcast of the input with a constant shape.
pub struct Expand;

impl OpSpec for Expand {
    fn name(&self) -> &'static str {
        "Expand"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Expand", x, ALL)?;
        let xd = dims_of(x, "Expand input")?;
        let shape = const_1d(input(ins, 1)?, "Expand shape", &[I64])?;
        if shape.iter().any(|&v| v < 0) {
            reject!("Expand shape {shape:?} has a negative dim");
        }
        let out = broadcast(&[xd, shape.iter().map(|&v| v as usize).collect()])?;
        checked_numel(&out)?;
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=4, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let extra = rng.random_range(0..=(5 - xd.len()).min(2));
        let mut shape: Vec<i64> = (0..extra).map(|_| rng.random_range(1..=3)).collect();
        for &v in &xd {
            shape.push(match v {
                1 if rng.random_bool(0.6) => rng.random_range(1..=4),
                _ if rng.random_bool(0.3) => 1,
                v => v as i64,
            });
        }
        if rng.random_bool(0.2) {
            let drop = rng.random_range(0..=shape.len());
            shape.drain(..drop);
        }
        let s = int_const(d, &shape);
        finish(self, d, Proposal::new(vec![x.name, s], Attrs::new()))
    }
}

/// Tile(input, repeats): each dim multiplied by its constant repeat count.
pub struct Tile;

impl OpSpec for Tile {
    fn name(&self) -> &'static str {
        "Tile"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Tile", x, ALL)?;
        let xd = dims_of(x, "Tile input")?;
        let reps = const_1d(input(ins, 1)?, "Tile repeats", &[I64])?;
        if reps.len() != xd.len() || reps.iter().any(|&v| v < 0) {
            reject!("Tile repeats {reps:?} do not fit rank {}", xd.len());
        }
        let mut out = Vec::with_capacity(xd.len());
        for (&v, &rep) in xd.iter().zip(&reps) {
            out.push(
                v.checked_mul(rep as usize)
                    .ok_or_else(|| Reject(format!("Tile of {xd:?} by {reps:?} is too large")))?,
            );
        }
        checked_numel(&out)?;
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=4, |_| true)?;
        let r = x.ty.rank().unwrap();
        let reps: Vec<i64> = (0..r).map(|_| if rng.random_bool(0.5) { 1 } else { rng.random_range(1..=3) }).collect();
        let c = int_const(d, &reps);
        finish(self, d, Proposal::new(vec![x.name, c], Attrs::new()))
    }
}

// ---- Flatten ----

/// Flatten(input) at `axis` in [-r, r] into a 2-D tensor.
pub struct Flatten;

impl OpSpec for Flatten {
    fn name(&self) -> &'static str {
        "Flatten"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype("Flatten", x, ALL)?;
        let xd = dims_of(x, "Flatten input")?;
        let r = xd.len() as i64;
        let axis = attr_int(attrs, "axis", 1)?;
        if axis < -r || axis > r {
            reject!("Flatten axis {axis} is out of range for rank {r}");
        }
        let axis = (if axis < 0 { axis + r } else { axis }) as usize;
        let out = [checked_numel(&xd[..axis])?, checked_numel(&xd[axis..])?];
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 0..=5, |_| true)?;
        let r = x.ty.rank().unwrap();
        let axis = rng.random_range(0..=r);
        let mut attrs = Attrs::new();
        if axis != 1 || rng.random_bool(0.3) {
            let a = if axis > 0 && rng.random_bool(0.3) { axis as i64 - r as i64 } else { axis as i64 };
            attrs.insert("axis".into(), Attr::Int(a));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

// ---- Gather ----

/// Gather(data, indices) along `axis`: out = data[:axis] + indices.shape + data[axis+1:].
pub struct Gather;

impl OpSpec for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, idx) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("Gather", x, ALL)?;
        check_dtype("Gather indices", idx, INDEX)?;
        let xd = dims_of(x, "Gather data")?;
        if xd.is_empty() {
            reject!("Gather needs data of rank >= 1");
        }
        let axis = norm_axis(attr_int(attrs, "axis", 0)?, xd.len(), "Gather axis")?;
        let id = dims_of(idx, "Gather indices")?;
        if idx.value.is_some() {
            let dim = xd[axis] as i64;
            let vals = const_ints(idx, "Gather indices")?;
            if let Some(v) = vals.iter().find(|&&v| v < -dim || v >= dim) {
                reject!("Gather index {v} is out of range for dim {dim}");
            }
        }
        let out: Vec<usize> = xd[..axis].iter().chain(&id).chain(&xd[axis + 1..]).copied().collect();
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let x = pick_static(d, rng, ALL, 1..=4, |_| true)?;
        let xd = x.ty.dims().unwrap();
        let r = xd.len();
        let axis = rng.random_range(0..r);
        let dim = xd[axis] as i64;
        if dim == 0 {
            reject!("Gather on an empty axis");
        }
        let irank = rng.random_range(0..=2);
        let id = random_dims(rng, irank, 4, 16);
        let n: usize = id.iter().product();
        let vals: Vec<f64> = (0..n)
            .map(|_| {
                let v = rng.random_range(0..dim);
                (if rng.random_bool(0.25) { v - dim } else { v }) as f64
            })
            .collect();
        let dtype = if rng.random_bool(0.8) { I64 } else { I32 };
        let c = d.constant(Tensor::from_f64s(dtype, &id, &vals));
        let mut attrs = Attrs::new();
        if axis != 0 || rng.random_bool(0.3) {
            attrs.insert("axis".into(), Attr::Int(maybe_neg(rng, axis, r)));
        }
        finish(self, d, Proposal::new(vec![x.name, c], attrs))
    }
}

// ---- DepthToSpace / SpaceToDepth ----

/// DepthToSpace (mode DCR or CRD) or SpaceToDepth on NCHW tensors with attribute `blocksize`.
pub struct SpaceDepth {
    to_space: bool,
}

impl SpaceDepth {
    fn fits(&self, s: &[usize], b: usize) -> bool {
        s.len() == 4
            && if self.to_space { s[1].is_multiple_of(b * b) } else { s[2].is_multiple_of(b) && s[3].is_multiple_of(b) }
    }
}

impl OpSpec for SpaceDepth {
    fn name(&self) -> &'static str {
        if self.to_space {
            "DepthToSpace"
        } else {
            "SpaceToDepth"
        }
    }
    fn arity(&self) -> Arity {
        Arity::fixed(1, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let name = self.name();
        let x = input(ins, 0)?;
        check_dtype(name, x, SPACE_DTYPES)?;
        let xd = dims_of(x, name)?;
        if !attrs.contains_key("blocksize") {
            reject!("{name} needs the attribute 'blocksize'");
        }
        let b = attr_int(attrs, "blocksize", 0)?;
        if !(1..=64).contains(&b) {
            reject!("{name} blocksize {b} is invalid");
        }
        let b = b as usize;
        if self.to_space {
            let mode = attr_string(attrs, "mode", "DCR")?;
            if mode != "DCR" && mode != "CRD" {
                reject!("DepthToSpace mode must be DCR or CRD, got '{mode}'");
            }
        }
        if !self.fits(&xd, b) {
            reject!("{name} with blocksize {b} does not fit {:?}", xd);
        }
        let big = |v: usize, m: usize| v.checked_mul(m).ok_or_else(|| Reject(format!("{name} output is too large")));
        let out = if self.to_space {
            [xd[0], xd[1] / (b * b), big(xd[2], b)?, big(xd[3], b)?]
        } else {
            [xd[0], big(xd[1], b * b)?, xd[2] / b, xd[3] / b]
        };
        Ok(vec![TensorType::new(x.ty.dtype, &out)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let fits = |t: &TensorType| {
            SPACE_DTYPES.contains(&t.dtype) && t.dims().is_some_and(|s| self.fits(&s, 2) || self.fits(&s, 3))
        };
        let x = d.pick_or_input(rng, fits, |r| {
            let b = if r.random_bool(0.8) { 2 } else { 3 };
            let mut dims = random_dims(r, 4, 4, max / (b * b));
            if self.to_space {
                dims[1] *= b * b;
            } else {
                dims[2] *= b;
                dims[3] *= b;
            }
            Some(TensorType::new(random_type(r, SPACE_DTYPES, 0..=0, 1).dtype, &dims))
        })?;
        let xd = x.ty.dims().unwrap();
        let bs: Vec<usize> = [2, 3].into_iter().filter(|&b| self.fits(&xd, b)).collect();
        let b = bs[rng.random_range(0..bs.len())];
        let mut attrs = attrs_of(vec![("blocksize", Attr::Int(b as i64))]);
        if self.to_space && rng.random_bool(0.6) {
            attrs.insert("mode".into(), Attr::str(if rng.random_bool(0.5) { "CRD" } else { "DCR" }));
        }
        finish(self, d, Proposal::new(vec![x.name], attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(Reshape));
    v.push(Box::new(Transpose));
    v.push(Box::new(Concat));
    v.push(Box::new(Split));
    v.push(Box::new(Slice));
    v.push(Box::new(Pad));
    v.push(Box::new(Squeeze));
    v.push(Box::new(Unsqueeze));
    v.push(Box::new(Expand));
    v.push(Box::new(Flatten));
    v.push(Box::new(Gather));
    v.push(Box::new(Tile));
    v.push(Box::new(SpaceDepth { to_space: true }));
    v.push(Box::new(SpaceDepth { to_space: false }));
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

    fn ints(v: &[i64]) -> Tensor {
        Tensor::from_i64(&[v.len()], v)
    }

    fn run(op: &str, ins: &[Option<Fact>], attrs: &Attrs, n: usize) -> Result<Vec<TensorType>, Reject> {
        infer_node(lookup("", op).unwrap(), ins, attrs, n)
    }

    fn one(op: &str, ins: &[Option<Fact>], attrs: &Attrs) -> Result<TensorType, Reject> {
        run(op, ins, attrs, 1).map(|mut v| v.remove(0))
    }

    fn a(items: Vec<(&str, Attr)>) -> Attrs {
        attrs_of(items)
    }

    #[test]
    fn reshape_copies_zero_and_infers_minus_one() {
        let s = ints(&[0, -1, 2]);
        let out = one("Reshape", &[fact(F32, &[2, 3, 4]), cfact(&s)], &Attrs::new()).unwrap();
        assert_eq!(out, TensorType::new(F32, &[2, 6, 2]));
        let s = Tensor::from_i64(&[0], &[]);
        assert_eq!(one("Reshape", &[fact(I8, &[1, 1]), cfact(&s)], &Attrs::new()).unwrap(), TensorType::new(I8, &[]));
        for bad in [&[-1, -1][..], &[5], &[0, 0, 0, 0], &[-2, 12], &[7, -1]] {
            let s = ints(bad);
            assert!(one("Reshape", &[fact(F32, &[2, 3, 4]), cfact(&s)], &Attrs::new()).is_err(), "{bad:?}");
        }
        assert!(
            one("Reshape", &[fact(F32, &[2, 3]), fact(I64, &[2])], &Attrs::new()).is_err(),
            "shape must be constant"
        );
    }

    #[test]
    fn transpose_and_flatten() {
        let out = one("Transpose", &[fact(F32, &[2, 3, 4])], &Attrs::new()).unwrap();
        assert_eq!(out, TensorType::new(F32, &[4, 3, 2]));
        let p = a(vec![("perm", Attr::Ints(vec![1, 0, 2]))]);
        assert_eq!(one("Transpose", &[fact(F32, &[2, 3, 4])], &p).unwrap(), TensorType::new(F32, &[3, 2, 4]));
        let p = a(vec![("perm", Attr::Ints(vec![1, 1, 2]))]);
        assert!(one("Transpose", &[fact(F32, &[2, 3, 4])], &p).is_err());
        let f = one("Flatten", &[fact(F32, &[2, 3, 4])], &a(vec![("axis", Attr::Int(-1))])).unwrap();
        assert_eq!(f, TensorType::new(F32, &[6, 4]));
        let f = one("Flatten", &[fact(F32, &[2, 3])], &a(vec![("axis", Attr::Int(2))])).unwrap();
        assert_eq!(f, TensorType::new(F32, &[6, 1]));
        let f = one("Flatten", &[fact(F32, &[])], &a(vec![("axis", Attr::Int(0))])).unwrap();
        assert_eq!(f, TensorType::new(F32, &[1, 1]));
        assert!(one("Flatten", &[fact(F32, &[])], &Attrs::new()).is_err(), "default axis 1 > rank 0");
    }

    #[test]
    fn concat_and_split() {
        let ax = a(vec![("axis", Attr::Int(-1))]);
        let out = one("Concat", &[fact(F32, &[2, 3]), fact(F32, &[2, 1]), fact(F32, &[2, 2])], &ax).unwrap();
        assert_eq!(out, TensorType::new(F32, &[2, 6]));
        assert!(one("Concat", &[fact(F32, &[2, 3]), fact(F32, &[3, 3])], &ax).is_err());
        assert!(one("Concat", &[fact(F32, &[2, 3]), fact(F16, &[2, 3])], &ax).is_err());
        assert!(one("Concat", &[fact(F32, &[2, 3])], &Attrs::new()).is_err(), "axis is required");
        let n = a(vec![("axis", Attr::Int(1)), ("num_outputs", Attr::Int(3))]);
        let out = run("Split", &[fact(F32, &[2, 7])], &n, 3).unwrap();
        assert_eq!(out.iter().map(|t| t.dims().unwrap()[1]).collect::<Vec<_>>(), [3, 3, 1]);
        let s = ints(&[1, 4]);
        let out = run("Split", &[fact(F32, &[5, 2]), cfact(&s)], &Attrs::new(), 2).unwrap();
        assert_eq!(out, [TensorType::new(F32, &[1, 2]), TensorType::new(F32, &[4, 2])]);
        assert!(run("Split", &[fact(F32, &[5, 2]), cfact(&s)], &Attrs::new(), 3).is_err());
        let s = ints(&[1, 3]);
        assert!(run("Split", &[fact(F32, &[5, 2]), cfact(&s)], &Attrs::new(), 2).is_err());
        assert!(run("Split", &[fact(F32, &[5, 2])], &Attrs::new(), 2).is_err());
        let n4 = a(vec![("num_outputs", Attr::Int(4))]);
        assert!(run("Split", &[fact(F32, &[5])], &n4, 4).is_err(), "5 into 4 by ceil leaves nothing");
    }

    #[test]
    fn slice_clamps_and_walks_backwards() {
        // dim 10: start -1 (=9), end -100 (clamped to -1), step -3 → 9, 6, 3, 0
        let (st, en, ax, sp) = (ints(&[-1, 1]), ints(&[-100, i64::MAX]), ints(&[1, -3]), ints(&[-3, 2]));
        let out =
            one("Slice", &[fact(F32, &[4, 10, 5]), cfact(&st), cfact(&en), cfact(&ax), cfact(&sp)], &Attrs::new())
                .unwrap();
        assert_eq!(out, TensorType::new(F32, &[2, 4, 5]));
        assert_eq!(slice_len(5, 10, -10, -1), 5);
        assert_eq!(slice_len(5, 2, 2, 1), 0);
        assert_eq!(slice_len(5, -2, 100, 1), 2);
        assert_eq!(slice_len(5, 0, -1, -1), 0);
        let zero = ints(&[0]);
        let one_ = ints(&[1]);
        assert!(
            one("Slice", &[fact(F32, &[4]), cfact(&zero), cfact(&one_), None, cfact(&zero)], &Attrs::new()).is_err(),
            "step 0"
        );
        let e32 = Tensor::from_f64s(I32, &[1], &[1.0]);
        assert!(
            one("Slice", &[fact(F32, &[4]), cfact(&zero), cfact(&e32)], &Attrs::new()).is_err(),
            "mixed index dtypes"
        );
        let far = ints(&[3]);
        assert!(one("Slice", &[fact(F32, &[4]), cfact(&zero), cfact(&one_), cfact(&far)], &Attrs::new()).is_err());
    }

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

    #[test]
    fn squeeze_unsqueeze_expand_tile() {
        let ax = ints(&[0, -1]);
        assert_eq!(
            one("Squeeze", &[fact(F32, &[1, 1]), cfact(&ax)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[])
        );
        assert_eq!(one("Squeeze", &[fact(F32, &[1, 3, 1])], &Attrs::new()).unwrap(), TensorType::new(F32, &[3]));
        assert!(one("Squeeze", &[fact(F32, &[2, 1]), cfact(&ax)], &Attrs::new()).is_err());
        assert_eq!(
            one("Unsqueeze", &[fact(F32, &[]), cfact(&ax)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[1, 1])
        );
        let ax2 = ints(&[1, -1]);
        assert_eq!(
            one("Unsqueeze", &[fact(F32, &[3, 4]), cfact(&ax2)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[3, 1, 4, 1])
        );
        let dup = ints(&[2, -1]);
        assert!(one("Unsqueeze", &[fact(F32, &[3]), cfact(&dup)], &Attrs::new()).is_err());
        let s = ints(&[2, 1, 4]);
        assert_eq!(
            one("Expand", &[fact(F32, &[3, 1]), cfact(&s)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[2, 3, 4])
        );
        let s = ints(&[2]);
        assert!(one("Expand", &[fact(F32, &[3]), cfact(&s)], &Attrs::new()).is_err());
        let r = ints(&[2, 1]);
        assert_eq!(
            one("Tile", &[fact(I64, &[3, 4]), cfact(&r)], &Attrs::new()).unwrap(),
            TensorType::new(I64, &[6, 4])
        );
        assert!(one("Tile", &[fact(I64, &[3]), cfact(&r)], &Attrs::new()).is_err());
    }

    #[test]
    fn gather_with_scalar_indices_drops_a_dim() {
        let i = Tensor::from_i64(&[], &[-2]);
        let ax = a(vec![("axis", Attr::Int(1))]);
        assert_eq!(one("Gather", &[fact(F32, &[2, 3, 4]), cfact(&i)], &ax).unwrap(), TensorType::new(F32, &[2, 4]));
        let i2 = Tensor::from_f64s(I32, &[2, 2], &[0.0, 1.0, 2.0, 0.0]);
        assert_eq!(
            one("Gather", &[fact(F32, &[3, 4]), cfact(&i2)], &Attrs::new()).unwrap(),
            TensorType::new(F32, &[2, 2, 4])
        );
        let bad = Tensor::from_i64(&[], &[3]);
        assert!(one("Gather", &[fact(F32, &[2, 3, 4]), cfact(&bad)], &ax).is_err());
        assert!(one("Gather", &[fact(F32, &[]), cfact(&i)], &Attrs::new()).is_err());
    }

    #[test]
    fn depth_space() {
        let b = a(vec![("blocksize", Attr::Int(2)), ("mode", Attr::str("CRD"))]);
        assert_eq!(one("DepthToSpace", &[fact(F32, &[1, 8, 2, 3])], &b).unwrap(), TensorType::new(F32, &[1, 2, 4, 6]));
        assert!(one("DepthToSpace", &[fact(F32, &[1, 6, 2, 3])], &b).is_err());
        let b = a(vec![("blocksize", Attr::Int(2))]);
        assert_eq!(one("SpaceToDepth", &[fact(U8, &[1, 3, 4, 2])], &b).unwrap(), TensorType::new(U8, &[1, 12, 2, 1]));
        assert!(one("SpaceToDepth", &[fact(I32, &[1, 3, 4, 2])], &b).is_err());
        assert!(one("SpaceToDepth", &[fact(F32, &[1, 3, 4, 2])], &Attrs::new()).is_err());
    }

    #[test]
    fn every_shape_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
