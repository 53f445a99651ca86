//! ONNX Runtime's `com.microsoft` Attention, the op AttentionFusion writes: multi-head self-attention of `input`
//! [batch, sequence, input_hidden] projected by one packed `weights` [input_hidden, q + k + v] (and `bias`
//! [q + k + v]) into queries, keys and values of `num_heads` heads; `output` [batch, sequence, v]. Its CPU kernel
//! runs float32 and float16 (docs/ort-contrib-dtypes.tsv). Inference accepts every optional input ORT's schema has
//! (mask_index, past, attention_bias, past_sequence_length), since patterns of fused models hold them; sampling
//! writes a mask of sequence lengths at most.

use super::draft::random_type;
use super::shape::opt_input;
use super::{attr_int, attr_ints, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng};
use crate::graph::{Attr, Attrs, DType, Tensor, TensorType, MS_DOMAIN};
use rand::Rng as _;

const DTYPES: &[DType] = &[DType::F32, DType::F16];

pub struct Attention;

/// The hidden sizes of queries, keys and values: `qkv_hidden_sizes`, or a third of the packed weights' width each;
/// every one a multiple of `num_heads`, queries and keys alike.
fn hidden_sizes(attrs: &Attrs, width: usize, heads: usize) -> Result<[usize; 3], Reject> {
    let sizes = match attr_ints(attrs, "qkv_hidden_sizes")? {
        Some(v) if v.len() == 3 && v.iter().all(|&s| s > 0) => [v[0] as usize, v[1] as usize, v[2] as usize],
        Some(v) => reject!("Attention: qkv_hidden_sizes {v:?} must be three positive sizes"),
        None if width % 3 == 0 => [width / 3; 3],
        None => reject!("Attention: weights' width {width} is not three equal hidden sizes"),
    };
    if sizes.iter().sum::<usize>() != width || sizes[0] != sizes[1] || sizes.iter().any(|s| s % heads != 0) {
        reject!("Attention: hidden sizes {sizes:?} must sum to {width}, q = k, each a multiple of {heads} heads");
    }
    Ok(sizes)
}

impl OpSpec for Attention {
    fn name(&self) -> &'static str {
        "Attention"
    }
    fn domain(&self) -> &'static str {
        MS_DOMAIN
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 7), outputs: (1, 2) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (x, w) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("Attention", x, DTYPES)?;
        let (xd, wd) = (dims_of(x, "input")?, dims_of(w, "weights")?);
        if xd.len() != 3 || w.ty.dtype != x.ty.dtype || wd.len() != 2 || wd[0] != xd[2] {
            reject!("Attention: input {} must be [batch, sequence, hidden], weights {} [hidden, q+k+v]", x.ty, w.ty);
        }
        let heads = attr_int(attrs, "num_heads", 0)?;
        if heads <= 0 {
            reject!("Attention: num_heads {heads} must be positive");
        }
        let [_, k, v] = hidden_sizes(attrs, wd[1], heads as usize)?;
        if let Some(b) = opt_input(ins, 2) {
            if b.ty != TensorType::new(x.ty.dtype, &[wd[1]]) {
                reject!("Attention: bias {} must be [{}] of the input's dtype", b.ty, wd[1]);
            }
        }
        for (slot, what) in [(3, "mask_index"), (6, "past_sequence_length")] {
            if let Some(m) = opt_input(ins, slot) {
                check_dtype(&format!("Attention {what}"), m, &[DType::I32])?;
            }
        }
        for (slot, what) in [(4, "past"), (5, "attention_bias")] {
            if opt_input(ins, slot).is_some_and(|p| p.ty.dtype != x.ty.dtype) {
                reject!("Attention: {what} must have the input's dtype {}", x.ty.dtype);
            }
        }
        let out = TensorType::new(x.ty.dtype, &[xd[0], xd[1], v]);
        // present: [2, batch, heads, past + sequence, head size] (keys and values alike)
        let past = match opt_input(ins, 4) {
            Some(p) => *dims_of(p, "past")?.get(3).ok_or_else(|| Reject("Attention: past must be 5-D".into()))?,
            None => 0,
        };
        let h = heads as usize;
        let present = TensorType::new(x.ty.dtype, &[2, xd[0], h, past + xd[1], k / h]);
        Ok(if k == v { vec![out, present] } else { vec![out] })
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        // the packed weights hold 3 * hidden^2 elements
        let fits = |t: &TensorType| {
            t.dims().is_some_and(|v| v.len() == 3 && v[2] > 0 && 3 * v[2] * v[2] <= max) && DTYPES.contains(&t.dtype)
        };
        let x = d.pick_or_input(rng, fits, |r| Some(random_type(r, DTYPES, 3..=3, max)))?;
        let xd = x.ty.dims().expect("static");
        let hidden = xd[2];
        let divisors: Vec<usize> = (1..=hidden).filter(|n| hidden % n == 0).collect();
        let heads = divisors[rng.random_range(0..divisors.len())];
        let mut inputs = vec![x.name.clone()];
        inputs.push(d.random_constant(rng, &TensorType::new(x.ty.dtype, &[hidden, 3 * hidden]))?);
        let masked = rng.random_bool(0.3);
        if masked || rng.random_bool(0.75) {
            inputs.push(d.random_constant(rng, &TensorType::new(x.ty.dtype, &[3 * hidden]))?);
        } else {
            inputs.push(String::new());
        }
        if masked {
            // each batch entry's sequence length (ORT's 1-D mask_index), at least one position
            let lengths: Vec<f64> = (0..xd[0]).map(|_| rng.random_range(1..=xd[1]) as f64).collect();
            inputs.push(d.constant(Tensor::from_f64s(DType::I32, &[xd[0]], &lengths)));
        } else if inputs.last().is_some_and(|b| b.is_empty()) {
            inputs.pop();
        }
        let mut attrs = Attrs::new();
        attrs.insert("num_heads".into(), Attr::Int(heads as i64));
        if rng.random_bool(0.25) {
            attrs.insert("unidirectional".into(), Attr::Int(1));
        }
        Ok(Proposal::new(inputs, attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn OpSpec>>) {
    v.push(Box::new(Attention));
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::testutil::fact;

    #[test]
    fn attention_infers_the_value_width_and_refuses_what_its_schema_refuses() {
        let mut attrs = Attrs::new();
        attrs.insert("num_heads".into(), Attr::Int(2));
        let (x, w, b) = (fact(DType::F32, &[2, 3, 4]), fact(DType::F32, &[4, 12]), fact(DType::F32, &[12]));
        let out = Attention.infer(&[x.clone(), w.clone(), b.clone()], &attrs).unwrap();
        assert_eq!(out, [TensorType::new(DType::F32, &[2, 3, 4]), TensorType::new(DType::F32, &[2, 2, 2, 3, 2])]);
        let mask = fact(DType::I32, &[2]);
        assert!(Attention.infer(&[x.clone(), w.clone(), b.clone(), mask], &attrs).is_ok());
        assert!(Attention.infer(&[x.clone(), w.clone(), b.clone(), fact(DType::I64, &[2])], &attrs).is_err());
        let mut sizes = attrs.clone();
        sizes.insert("qkv_hidden_sizes".into(), Attr::Ints(vec![4, 4, 2]));
        let w10 = fact(DType::F32, &[4, 10]);
        assert_eq!(
            Attention.infer(&[x.clone(), w10, None], &sizes).unwrap(),
            [TensorType::new(DType::F32, &[2, 3, 2])]
        );
        assert!(Attention.infer(&[fact(DType::F64, &[2, 3, 4]), fact(DType::F64, &[4, 12])], &attrs).is_err());
        assert!(Attention.infer(&[x.clone(), fact(DType::F32, &[4, 9])], &attrs).is_err(), "3 per head of 2");
        assert!(Attention.infer(&[x, w], &Attrs::new()).is_err(), "num_heads is required");
    }
}
