//! Matrix products: MatMul (numpy matmul: batch broadcasting, 1-D operands) and Gemm (transposes, alpha/beta,
//! optional C unidirectionally broadcast to (M, N)). Dtype lists are what ONNX Runtime 1.31's CPU provider runs
//! (docs/ort-cpu-dtypes.tsv), not the full spec.

use super::draft::random_type;
use super::{
    attr_float, attr_int, broadcast, check_dtype, dims_of, input, Arity, Draft, Fact, OpSpec, Proposal, Reject, Rng,
};
use crate::graph::{Attr, Attrs, DType, TensorType};
use rand::Rng as _;

use DType::*;
const MATMUL_DTYPES: &[DType] = &[F32, F64, F16, I32, I64, U32, U64];
const GEMM_DTYPES: &[DType] = &[F32, F64, F16];

/// The output shape of numpy `matmul` on static shapes: a 1-D left operand gets a 1 prepended (then removed), a
/// 1-D right operand gets a 1 appended (then removed), and the batch dims broadcast.
pub(crate) fn matmul_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, Reject> {
    if a.is_empty() || b.is_empty() {
        reject!("MatMul operands need rank >= 1, got {a:?} and {b:?}");
    }
    let a2 = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let b2 = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (ra, rb) = (a2.len(), b2.len());
    let (m, ka, kb, n) = (a2[ra - 2], a2[ra - 1], b2[rb - 2], b2[rb - 1]);
    if ka != kb {
        reject!("MatMul inner dims differ: {a:?} x {b:?}");
    }
    let mut out = broadcast(&[a2[..ra - 2].to_vec(), b2[..rb - 2].to_vec()])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

fn numel(d: &[usize]) -> usize {
    d.iter().product()
}

/// MatMul(A, B).
pub struct MatMul;

impl OpSpec for MatMul {
    fn name(&self) -> &'static str {
        "MatMul"
    }
    fn arity(&self) -> Arity {
        Arity::fixed(2, 1)
    }
    fn infer(&self, ins: &[Option<Fact>], _: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (a, b) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("MatMul", a, MATMUL_DTYPES)?;
        if a.ty.dtype != b.ty.dtype {
            reject!("MatMul needs equal dtypes, got {} and {}", a.ty.dtype, b.ty.dtype);
        }
        let shape = matmul_shape(&dims_of(a, "A")?, &dims_of(b, "B")?)?;
        Ok(vec![TensorType::new(a.ty.dtype, &shape)])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let x = d.pick_or_input(
            rng,
            |t| {
                MATMUL_DTYPES.contains(&t.dtype) && t.rank().is_some_and(|r| (1..=4).contains(&r)) && t.dims().is_some()
            },
            |r| Some(random_type(r, MATMUL_DTYPES, 1..=4, max)),
        )?;
        let xd = x.ty.dims().unwrap();
        let dt = x.ty.dtype;
        // X is the left operand most of the time; the other side is an existing value or a new constant
        let x_left = rng.random_bool(0.75);
        let fits = |od: &[usize]| {
            let (l, r) = if x_left { (&xd[..], od) } else { (od, &xd[..]) };
            matmul_shape(l, r).is_ok_and(|s| numel(&s) <= max)
        };
        let other = match rng.random_bool(0.3) {
            true => d.pick(rng, |t| t.dtype == dt && t.dims().is_some_and(|od| fits(&od))).map(|v| v.name),
            false => None,
        };
        let other = match other {
            Some(o) => o,
            None => {
                let k = if x_left || xd.len() == 1 { xd[xd.len() - 1] } else { xd[xd.len() - 2] };
                let free = rng.random_range(1..=8usize);
                let batch = match xd.len() {
                    r if r >= 3 && rng.random_bool(0.7) => xd[r - 3],
                    r if r >= 3 => 1,
                    _ => rng.random_range(1..=3usize),
                };
                let od = match rng.random_range(0..10) {
                    0 | 1 => vec![k],
                    2 | 3 => vec![batch, if x_left { k } else { free }, if x_left { free } else { k }],
                    _ if x_left => vec![k, free],
                    _ => vec![free, k],
                };
                if !fits(&od) {
                    reject!("MatMul with {xd:?} and {od:?} would be too large or invalid");
                }
                d.random_constant(rng, &TensorType::new(dt, &od))?
            }
        };
        let inputs = if x_left { vec![x.name, other] } else { vec![other, x.name] };
        Ok(Proposal::new(inputs, Attrs::new()))
    }
}

/// Gemm(A, B, C?) = alpha * op(A) * op(B) + beta * C, with A and B 2-D.
pub struct Gemm;

/// (M, N) of a Gemm from the shapes of A and B and the transpose flags.
fn gemm_mn(a: &[usize], b: &[usize], ta: bool, tb: bool) -> Result<(usize, usize), Reject> {
    if a.len() != 2 || b.len() != 2 {
        reject!("Gemm needs 2-D A and B, got {a:?} and {b:?}");
    }
    let (m, ka) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let (kb, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
    if ka != kb {
        reject!("Gemm inner dims differ: A {a:?} (transA={}) and B {b:?} (transB={})", ta as i32, tb as i32);
    }
    Ok((m, n))
}

/// Whether `c` broadcasts one-way to `[m, n]`.
fn unidirectional(c: &[usize], m: usize, n: usize) -> bool {
    let target = [m, n];
    c.len() <= 2 && c.iter().rev().zip(target.iter().rev()).all(|(&x, &t)| x == t || x == 1)
}

fn flag(attrs: &Attrs, key: &str) -> Result<bool, Reject> {
    match attr_int(attrs, key, 0)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(Reject(format!("Gemm {key} must be 0 or 1, got {v}"))),
    }
}

impl OpSpec for Gemm {
    fn name(&self) -> &'static str {
        "Gemm"
    }
    fn arity(&self) -> Arity {
        Arity { inputs: (2, 3), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let (a, b) = (input(ins, 0)?, input(ins, 1)?);
        check_dtype("Gemm", a, GEMM_DTYPES)?;
        if b.ty.dtype != a.ty.dtype {
            reject!("Gemm needs equal dtypes, got {} and {}", a.ty.dtype, b.ty.dtype);
        }
        attr_float(attrs, "alpha", 1.0)?;
        attr_float(attrs, "beta", 1.0)?;
        let (m, n) = gemm_mn(&dims_of(a, "A")?, &dims_of(b, "B")?, flag(attrs, "transA")?, flag(attrs, "transB")?)?;
        if let Some(c) = ins.get(2).and_then(|c| c.as_ref()) {
            if c.ty.dtype != a.ty.dtype {
                reject!("Gemm C must be {}, got {}", a.ty.dtype, c.ty.dtype);
            }
            let cd = dims_of(c, "C")?;
            if !unidirectional(&cd, m, n) {
                reject!("Gemm C {cd:?} does not broadcast to [{m}, {n}]");
            }
        }
        Ok(vec![TensorType::new(a.ty.dtype, &[m, n])])
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let a = d.pick_or_input(
            rng,
            |t| GEMM_DTYPES.contains(&t.dtype) && t.rank() == Some(2) && t.dims().is_some(),
            |r| Some(random_type(r, GEMM_DTYPES, 2..=2, max)),
        )?;
        let ad = a.ty.dims().unwrap();
        let dt = a.ty.dtype;
        let (ta, tb) = (rng.random_bool(0.3), rng.random_bool(0.4));
        let (m, k) = if ta { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
        let picked = match rng.random_bool(0.3) {
            true => d.pick(rng, |t| {
                t.dtype == dt && t.dims().is_some_and(|bd| gemm_mn(&ad, &bd, ta, tb).is_ok_and(|(m, n)| m * n <= max))
            }),
            false => None,
        };
        let (b, n) = match picked {
            Some(v) => {
                let bd = v.ty.dims().unwrap();
                (v.name, if tb { bd[0] } else { bd[1] })
            }
            None => {
                let n = rng.random_range(1..=8usize);
                let bd = if tb { [n, k] } else { [k, n] };
                (d.random_constant(rng, &TensorType::new(dt, &bd))?, n)
            }
        };
        if m * n > max {
            reject!("Gemm output [{m}, {n}] is too large");
        }
        let mut inputs = vec![a.name, b];
        if rng.random_bool(0.7) {
            let shapes: [&[usize]; 7] = [&[], &[1], &[n], &[1, n], &[m, 1], &[m, n], &[1, 1]];
            let cd = shapes[rng.random_range(0..shapes.len())];
            inputs.push(d.random_constant(rng, &TensorType::new(dt, cd))?);
        }
        let mut attrs = Attrs::new();
        for (key, on) in [("transA", ta), ("transB", tb)] {
            if on || rng.random_bool(0.2) {
                attrs.insert(key.into(), Attr::Int(on as i64));
            }
        }
        for key in ["alpha", "beta"] {
            if rng.random_bool(0.3) {
                let v = [0.5, 2.0, -1.0, 0.25, 1.0][rng.random_range(0..5)];
                attrs.insert(key.into(), Attr::Float(v));
            }
        }
        Ok(Proposal::new(inputs, attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(MatMul));
    v.push(Box::new(Gemm));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;

    fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
        Some(Fact { ty: TensorType::new(d, s), value: None })
    }

    fn mm(a: &[usize], b: &[usize]) -> Result<Vec<TensorType>, Reject> {
        infer_node(lookup("", "MatMul").unwrap(), &[fact(F32, a), fact(F32, b)], &Attrs::new(), 1)
    }

    #[test]
    fn matmul_follows_numpy() {
        assert_eq!(mm(&[3], &[3, 4]).unwrap()[0], TensorType::new(F32, &[4]));
        assert_eq!(mm(&[2, 3], &[3]).unwrap()[0], TensorType::new(F32, &[2]));
        assert_eq!(mm(&[3], &[3]).unwrap()[0], TensorType::new(F32, &[]));
        assert_eq!(mm(&[5, 3], &[2, 3, 4]).unwrap()[0], TensorType::new(F32, &[2, 5, 4]));
        assert_eq!(mm(&[2, 1, 3, 4], &[5, 4, 2]).unwrap()[0], TensorType::new(F32, &[2, 5, 3, 2]));
        assert_eq!(mm(&[2, 3, 4], &[4]).unwrap()[0], TensorType::new(F32, &[2, 3]));
        assert!(mm(&[3, 4], &[3, 4]).is_err(), "inner dims differ");
        assert!(mm(&[2, 3, 4], &[3, 4, 5]).is_err(), "batch dims do not broadcast");
        assert!(mm(&[], &[3]).is_err(), "scalars are not allowed");
        let m = lookup("", "MatMul").unwrap();
        assert!(
            infer_node(m, &[fact(I8, &[2, 2]), fact(I8, &[2, 2])], &Attrs::new(), 1).is_err(),
            "ORT has no i8 MatMul"
        );
        assert!(infer_node(m, &[fact(F32, &[2, 2]), fact(F64, &[2, 2])], &Attrs::new(), 1).is_err());
        assert!(infer_node(m, &[fact(U64, &[2, 2]), fact(U64, &[2, 2])], &Attrs::new(), 1).is_ok());
    }

    #[test]
    fn gemm_transposes_and_broadcasts_c() {
        let g = lookup("", "Gemm").unwrap();
        let ta = Attrs::from([("transA".to_string(), Attr::Int(1))]);
        let out = infer_node(g, &[fact(F32, &[4, 3]), fact(F32, &[4, 5])], &ta, 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[3, 5]));
        let tb = Attrs::from([("transB".to_string(), Attr::Int(1)), ("alpha".to_string(), Attr::Float(0.5))]);
        let out = infer_node(g, &[fact(F32, &[3, 4]), fact(F32, &[5, 4]), fact(F32, &[3, 1])], &tb, 1).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[3, 5]));
        for c in [&[][..], &[1], &[5], &[1, 5], &[3, 5]] {
            assert!(
                infer_node(g, &[fact(F32, &[3, 4]), fact(F32, &[4, 5]), fact(F32, c)], &Attrs::new(), 1).is_ok(),
                "{c:?}"
            );
        }
        for c in [&[3][..], &[5, 3], &[2, 3, 5], &[3, 2]] {
            assert!(
                infer_node(g, &[fact(F32, &[3, 4]), fact(F32, &[4, 5]), fact(F32, c)], &Attrs::new(), 1).is_err(),
                "{c:?}"
            );
        }
        assert!(infer_node(g, &[fact(F32, &[3, 4]), fact(F32, &[3, 4])], &Attrs::new(), 1).is_err());
        assert!(infer_node(g, &[fact(F32, &[2, 3, 4]), fact(F32, &[4, 5])], &Attrs::new(), 1).is_err());
        assert!(
            infer_node(g, &[fact(I32, &[3, 4]), fact(I32, &[4, 5])], &Attrs::new(), 1).is_err(),
            "ORT has no int Gemm"
        );
        let bad = Attrs::from([("transA".to_string(), Attr::Int(2))]);
        assert!(infer_node(g, &[fact(F32, &[4, 4]), fact(F32, &[4, 5])], &bad, 1).is_err());
    }

    #[test]
    fn every_linalg_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
