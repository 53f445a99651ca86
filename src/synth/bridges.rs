//! The bridge-node catalog: how a tensor of one type is adapted to another. Each bridge is one small type that
//! either takes one step from the current type towards the wanted one, or declines; `plan` chains them. Adding
//! a bridge is adding one type to `catalog()`; the splicer only calls `plan`.

use crate::graph::{Attr, Attrs, DType, Node, OpId, Tensor, TensorType};
use crate::ops::Rng;
use rand::Rng as _;

/// One step: an op applied to the current value, with constant inputs and attributes, giving type `out`; the
/// form it takes (axes as an input, the types it needs) exists from ai.onnx opset `since` on.
pub struct Step {
    pub op: &'static str,
    pub consts: Vec<Tensor>,
    pub attrs: Attrs,
    pub out: TensorType,
    pub since: i64,
}

/// A bridge kind.
pub trait Bridge: Sync {
    fn name(&self) -> &'static str;
    /// A step from `cur` towards `want`, or `None` when this bridge does not apply.
    fn step(&self, cur: &TensorType, want: &TensorType, rng: &mut Rng) -> Option<Step>;
}

fn dims(t: &TensorType) -> Vec<usize> {
    t.dims().unwrap_or_default()
}

fn i64s(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

fn ty(dtype: DType, d: &[usize]) -> TensorType {
    TensorType::new(dtype, d)
}

/// Cast to the wanted dtype (first, so every later shape op runs on a type ORT supports for it; to a string
/// last, once the shape is the wanted one: ORT's shape ops take no strings).
pub struct CastBridge;
impl Bridge for CastBridge {
    fn name(&self) -> &'static str {
        "cast"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        if want.dtype == DType::Str && cur.shape != want.shape {
            return None;
        }
        (cur.dtype != want.dtype).then(|| Step {
            op: "Cast",
            consts: vec![],
            attrs: Attrs::from([("to".to_string(), Attr::Int(want.dtype.onnx() as i64))]),
            out: cur.with_dtype(want.dtype),
            since: cast_since(cur.dtype, want.dtype),
        })
    }
}

/// Since which opset Cast takes these types (strings from 9, bfloat16 from 13).
fn cast_since(a: DType, b: DType) -> i64 {
    match (a, b) {
        (DType::BF16, _) | (_, DType::BF16) => 13,
        (DType::Str, _) | (_, DType::Str) => 9,
        _ => 6,
    }
}

/// Unsqueeze when the wanted shape is the current one with size-1 dims inserted.
pub struct UnsqueezeBridge;
impl Bridge for UnsqueezeBridge {
    fn name(&self) -> &'static str {
        "unsqueeze"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        let (c, w) = (dims(cur), dims(want));
        if w.len() <= c.len() {
            return None;
        }
        let mut axes = Vec::new();
        let mut j = 0;
        for (i, &d) in w.iter().enumerate() {
            if j < c.len() && c[j] == d {
                j += 1;
            } else if d == 1 {
                axes.push(i as i64);
            } else {
                return None;
            }
        }
        (j == c.len()).then(|| Step {
            op: "Unsqueeze",
            consts: vec![Tensor::from_i64(&[axes.len()], &axes)],
            attrs: Attrs::new(),
            out: ty(cur.dtype, &w),
            since: 13,
        })
    }
}

/// Squeeze when the wanted shape is the current one without some size-1 dims.
pub struct SqueezeBridge;
impl Bridge for SqueezeBridge {
    fn name(&self) -> &'static str {
        "squeeze"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        let (c, w) = (dims(cur), dims(want));
        if c.len() <= w.len() {
            return None;
        }
        let mut axes = Vec::new();
        let mut j = 0;
        for (i, &d) in c.iter().enumerate() {
            if j < w.len() && w[j] == d {
                j += 1;
            } else if d == 1 {
                axes.push(i as i64);
            } else {
                return None;
            }
        }
        (j == w.len()).then(|| Step {
            op: "Squeeze",
            consts: vec![Tensor::from_i64(&[axes.len()], &axes)],
            attrs: Attrs::new(),
            out: ty(cur.dtype, &w),
            since: 13,
        })
    }
}

/// Transpose when the wanted dims are a permutation of the current ones.
pub struct TransposeBridge;
impl Bridge for TransposeBridge {
    fn name(&self) -> &'static str {
        "transpose"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        let (c, w) = (dims(cur), dims(want));
        if c.len() != w.len() || c == w || c.len() < 2 {
            return None;
        }
        let mut used = vec![false; c.len()];
        let mut perm = Vec::new();
        for &d in &w {
            let i = (0..c.len()).find(|&i| !used[i] && c[i] == d)?;
            used[i] = true;
            perm.push(i as i64);
        }
        Some(Step {
            op: "Transpose",
            consts: vec![],
            attrs: Attrs::from([("perm".to_string(), Attr::Ints(perm))]),
            out: ty(cur.dtype, &w),
            since: 1,
        })
    }
}

/// Expand when the current shape broadcasts to the wanted one.
pub struct ExpandBridge;
impl Bridge for ExpandBridge {
    fn name(&self) -> &'static str {
        "expand"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        let (c, w) = (dims(cur), dims(want));
        if c == w || c.len() > w.len() {
            return None;
        }
        let off = w.len() - c.len();
        let ok = c.iter().enumerate().all(|(i, &d)| d == 1 || d == w[off + i]);
        ok.then(|| Step {
            op: "Expand",
            consts: vec![Tensor::from_i64(&[w.len()], &i64s(&w))],
            attrs: Attrs::new(),
            out: ty(cur.dtype, &w),
            since: 8,
        })
    }
}

/// Flatten to one dimension (the start of the generic path: reshape, slice or pad, reshape).
pub struct FlattenBridge;
impl Bridge for FlattenBridge {
    fn name(&self) -> &'static str {
        "flatten"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        let n = cur.numel()?;
        (dims(cur).len() != 1 && (n != want.numel()? || dims(cur).len() != dims(want).len()) && dims(want) != [n]).then(
            || Step {
                op: "Reshape",
                consts: vec![Tensor::from_i64(&[1], &[n as i64])],
                attrs: Attrs::new(),
                out: ty(cur.dtype, &[n]),
                since: 5,
            },
        )
    }
}

/// Slice a 1-D tensor down to the wanted element count.
pub struct SliceBridge;
impl Bridge for SliceBridge {
    fn name(&self) -> &'static str {
        "slice"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, rng: &mut Rng) -> Option<Step> {
        let (c, m) = (dims(cur), want.numel()?);
        if c.len() != 1 || c[0] <= m {
            return None;
        }
        let start = rng.random_range(0..=(c[0] - m)) as i64;
        Some(Step {
            op: "Slice",
            consts: vec![Tensor::from_i64(&[1], &[start]), Tensor::from_i64(&[1], &[start + m as i64])],
            attrs: Attrs::new(),
            out: ty(cur.dtype, &[m]),
            since: 10,
        })
    }
}

/// Pad a 1-D tensor (with zeros) up to the wanted element count.
pub struct PadBridge;
impl Bridge for PadBridge {
    fn name(&self) -> &'static str {
        "pad"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, rng: &mut Rng) -> Option<Step> {
        let (c, m) = (dims(cur), want.numel()?);
        if c.len() != 1 || c[0] >= m || cur.dtype == DType::I16 {
            return None;
        }
        let extra = (m - c[0]) as i64;
        let before = rng.random_range(0..=extra);
        Some(Step {
            op: "Pad",
            consts: vec![Tensor::from_i64(&[2], &[before, extra - before])],
            attrs: Attrs::new(),
            out: ty(cur.dtype, &[m]),
            since: 11,
        })
    }
}

/// Reshape to the wanted dims once the element count matches.
pub struct ReshapeBridge;
impl Bridge for ReshapeBridge {
    fn name(&self) -> &'static str {
        "reshape"
    }
    fn step(&self, cur: &TensorType, want: &TensorType, _: &mut Rng) -> Option<Step> {
        let w = dims(want);
        (dims(cur) != w && cur.numel()? == want.numel()?).then(|| Step {
            op: "Reshape",
            consts: vec![Tensor::from_i64(&[w.len()], &i64s(&w))],
            attrs: Attrs::new(),
            out: ty(cur.dtype, &w),
            since: 5,
        })
    }
}

/// The opset from which every bridge's form exists (Pad's inputs form, 11), so that any two tensor types of
/// known shape are bridged through the generic path.
pub const GENERIC_SINCE: i64 = 11;

/// The catalog, in the order `plan` tries them: dtype first, then direct shape bridges, then the generic path.
pub fn catalog() -> &'static [&'static dyn Bridge] {
    &[
        &CastBridge,
        &UnsqueezeBridge,
        &SqueezeBridge,
        &TransposeBridge,
        &ExpandBridge,
        &ReshapeBridge,
        &FlattenBridge,
        &SliceBridge,
        &PadBridge,
    ]
}

/// Nodes and constants that turn value `from` (of type `from_ty`) into a value of type `want` in a model of
/// ai.onnx opset `opset` (a step whose form is newer is not taken: before 13, Squeeze and Unsqueeze take their axes
/// as an attribute); `names` makes fresh value names. Returns the nodes, constants and the final value's name.
pub fn plan(
    from: &str,
    from_ty: &TensorType,
    want: &TensorType,
    opset: i64,
    rng: &mut Rng,
    names: &mut dyn FnMut(&str) -> String,
) -> Option<(Vec<Node>, Vec<(String, Tensor)>, String)> {
    let (mut cur, mut name) = (from_ty.clone(), from.to_string());
    let (mut nodes, mut consts) = (Vec::new(), Vec::new());
    for _ in 0..8 {
        if cur == *want {
            return Some((nodes, consts, name));
        }
        let step = catalog().iter().find_map(|b| b.step(&cur, want, rng).filter(|s| s.since <= opset))?;
        let mut inputs = vec![name.clone()];
        for c in step.consts {
            let n = names("bc");
            consts.push((n.clone(), c));
            inputs.push(n);
        }
        let out = names("bv");
        let mut node = Node::new(names(&format!("bridge_{}", step.op)), OpId::onnx(step.op), inputs, vec![out.clone()]);
        node.attrs = step.attrs;
        nodes.push(node);
        cur = step.out;
        name = out;
    }
    None
}
