//! The sampling context an op spec sees while proposing a node: values to reuse, and new constants/inputs.

use super::{Fact, Reject, Rng};
use crate::graph::{Attrs, DType, Tensor, TensorType};
use rand::Rng as _;
use std::collections::HashMap;

/// A value available as an input: its name and type.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    pub name: String,
    pub ty: TensorType,
}

/// A node proposed by [`super::OpSpec::sample`]: its inputs (`""` = omitted optional), attributes and output count.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub inputs: Vec<String>,
    pub attrs: Attrs,
    pub outputs: usize,
}

impl Proposal {
    pub fn new(inputs: Vec<String>, attrs: Attrs) -> Proposal {
        Proposal { inputs, attrs, outputs: 1 }
    }
}

/// Limits that keep generated tensors small.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest element count of any tensor (input, constant or intermediate).
    pub max_elems: usize,
    /// Chance that an op takes a fresh graph input even when an existing value fits.
    pub fresh_input: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_elems: 1024, fresh_input: 0.1 }
    }
}

/// What a spec may touch while sampling. Nothing it adds reaches the graph unless the whole proposal is accepted.
pub struct Draft<'a> {
    values: &'a [Value],
    consts: &'a HashMap<String, Tensor>,
    pub limits: Limits,
    counter: &'a mut u64,
    /// Constants this proposal creates.
    pub new_consts: Vec<(String, Tensor)>,
    /// Graph inputs this proposal creates.
    pub new_inputs: Vec<Value>,
}

impl<'a> Draft<'a> {
    pub fn new(
        values: &'a [Value],
        consts: &'a HashMap<String, Tensor>,
        limits: Limits,
        counter: &'a mut u64,
    ) -> Draft<'a> {
        Draft { values, consts, limits, counter, new_consts: Vec::new(), new_inputs: Vec::new() }
    }

    fn fresh_name(&mut self, prefix: &str) -> String {
        *self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    /// A random existing value whose type satisfies `pred`; recent values are preferred so graphs grow deep.
    pub fn pick(&self, rng: &mut Rng, pred: impl Fn(&TensorType) -> bool) -> Option<Value> {
        let ok: Vec<&Value> = self.values.iter().chain(&self.new_inputs).filter(|v| pred(&v.ty)).collect();
        if ok.is_empty() {
            return None;
        }
        let i = if rng.random_bool(0.5) {
            ok.len() - 1 - rng.random_range(0..ok.len().min(3))
        } else {
            rng.random_range(0..ok.len())
        };
        Some(ok[i].clone())
    }

    /// An existing value satisfying `pred`, or (when none fits, or by chance) a fresh graph input of type `make`.
    pub fn pick_or_input(
        &mut self,
        rng: &mut Rng,
        pred: impl Fn(&TensorType) -> bool,
        make: impl FnOnce(&mut Rng) -> Option<TensorType>,
    ) -> Result<Value, Reject> {
        if !rng.random_bool(self.limits.fresh_input) {
            if let Some(v) = self.pick(rng, &pred) {
                return Ok(v);
            }
        }
        let ty = make(rng).ok_or_else(|| Reject("no type could be made for a fresh input".into()))?;
        if !pred(&ty) || ty.numel().is_none_or(|n| n > self.limits.max_elems) {
            return Err(Reject(format!("fresh input type {ty} does not fit")));
        }
        Ok(self.input(ty))
    }

    /// A new graph input.
    pub fn input(&mut self, ty: TensorType) -> Value {
        let v = Value { name: self.fresh_name("in"), ty };
        self.new_inputs.push(v.clone());
        v
    }

    /// A new constant (initializer); returns its name.
    pub fn constant(&mut self, t: Tensor) -> String {
        let name = self.fresh_name("c");
        self.new_consts.push((name.clone(), t));
        name
    }

    /// A new constant of type `ty` filled with random values from `dist`.
    pub fn random_constant(&mut self, rng: &mut Rng, ty: &TensorType) -> Result<String, Reject> {
        let dims = ty.dims().ok_or_else(|| Reject("constant needs a static shape".into()))?;
        if dims.iter().product::<usize>() > self.limits.max_elems {
            return Err(Reject(format!("constant {ty} is too large")));
        }
        Ok(self.constant(random_tensor(rng, ty.dtype, &dims)))
    }

    /// The inference fact for a value name known to this draft.
    pub fn fact(&self, name: &str) -> Option<Fact<'_>> {
        if let Some((_, t)) = self.new_consts.iter().find(|(n, _)| n == name) {
            return Some(Fact { ty: t.ty(), value: Some(t) });
        }
        if let Some(t) = self.consts.get(name) {
            return Some(Fact { ty: t.ty(), value: Some(t) });
        }
        self.values
            .iter()
            .chain(&self.new_inputs)
            .find(|v| v.name == name)
            .map(|v| Fact { ty: v.ty.clone(), value: None })
    }
}

/// Random values suited to `dtype`: floats mostly in [-3, 3] with a few edge values, small integers, random bools,
/// strings `s0`..`s2` (a branch's constant output where a spliced pattern yields strings). Other dtypes without a
/// fixed size are not modelled: callers pass catalog types only.
pub fn random_tensor(rng: &mut Rng, dtype: DType, dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    if dtype == DType::Str {
        let data = (0..n).map(|_| format!("s{}", rng.random_range(0..3)).into_bytes()).collect();
        let dims = dims.iter().map(|&d| d as i64).collect();
        return Tensor { dtype, dims, data: crate::graph::TensorData::Strings(data) };
    }
    let v: Vec<f64> = (0..n)
        .map(|_| match dtype {
            d if d.is_float() => {
                let edge = [0.0, 1.0, -1.0, 0.5];
                if rng.random_bool(0.1) {
                    edge[rng.random_range(0..edge.len())]
                } else {
                    (rng.random_range(-3.0..3.0f64) * 64.0).round() / 64.0
                }
            }
            DType::Bool => rng.random_range(0..2) as f64,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => rng.random_range(0..8) as f64,
            _ => rng.random_range(-8..8) as f64,
        })
        .collect();
    Tensor::from_f64s(dtype, dims, &v)
}

/// Random dims of the given rank (1..=max_dim each, often 1) with at most `max_elems` elements.
pub fn random_dims(rng: &mut Rng, rank: usize, max_dim: usize, max_elems: usize) -> Vec<usize> {
    let mut dims: Vec<usize> =
        (0..rank).map(|_| if rng.random_bool(0.25) { 1 } else { rng.random_range(1..=max_dim.max(1)) }).collect();
    while dims.iter().product::<usize>() > max_elems {
        let i = dims.iter().enumerate().max_by_key(|(_, &d)| d).map(|(i, _)| i).unwrap();
        dims[i] = dims[i].div_ceil(2);
    }
    dims
}

/// A random tensor type: a dtype from `dtypes` (float32 preferred when allowed), a rank in `ranks`.
pub fn random_type(
    rng: &mut Rng,
    dtypes: &[DType],
    ranks: std::ops::RangeInclusive<usize>,
    max_elems: usize,
) -> TensorType {
    let dtype = if dtypes.contains(&DType::F32) && rng.random_bool(0.5) {
        DType::F32
    } else {
        dtypes[rng.random_range(0..dtypes.len())]
    };
    let rank = rng.random_range(ranks);
    TensorType::new(dtype, &random_dims(rng, rank, 5, max_elems))
}
