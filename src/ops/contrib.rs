//! ONNX Runtime's contrib ops (domain `com.microsoft`) that its CPU transformers produce and consume: the Gelu
//! family (Gelu, FastGelu, QuickGelu, BiasGelu) and the fused MatMul, Gemm and Conv (FusedConv with its
//! optional sum input Z). Dtype lists are what ONNX Runtime 1.31's CPU provider runs
//! (docs/ort-contrib-dtypes.tsv, measured by scripts/measure-ort-contrib.py). The fused ops take their shapes
//! from the ONNX op they fuse (`lookup("", base)`).

use super::draft::random_type;
use super::{attr_float, attr_int, attr_string, check_dtype, dims_of, input, lookup, Arity, Draft, Fact};
use super::{OpSpec, Proposal, Reject, Rng};
use crate::graph::{Attr, Attrs, DType, TensorType, MS_DOMAIN};
use rand::Rng as _;

use DType::*;
const F32_16: &[DType] = &[F32, F16];
const F32_64_16: &[DType] = &[F32, F64, F16];

/// What a contrib op adds to its input(s) or to the ONNX op it fuses.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Gelu(X): exact (erf) Gelu.
    Gelu,
    /// FastGelu(X, bias?): the tanh approximation, with an optional bias on the last axis.
    FastGelu,
    /// QuickGelu(X) = X * sigmoid(alpha * X).
    QuickGelu,
    /// BiasGelu(A, B) = Gelu(A + B), B on the last axis.
    BiasGelu,
    /// FusedMatMul(A, B) = alpha * op(A) @ op(B) (transA/transB swap the last two axes).
    FusedMatMul,
    /// FusedGemm(A, B, C?) = activation(Gemm(A, B, C)).
    FusedGemm,
    /// FusedConv(X, W, B?, Z?) = activation(Conv(X, W, B) + Z).
    FusedConv,
}

pub struct Contrib {
    name: &'static str,
    dtypes: &'static [DType],
    kind: Kind,
}

/// Activations the fused ops take (`activation`), as ORT's fusions write them.
const ACTIVATIONS: &[&str] = &["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip"];

impl Contrib {
    /// The ONNX op whose shapes a fused op follows, and how many of its inputs it takes.
    fn base(&self) -> Option<(&'static dyn OpSpec, usize)> {
        let (name, n) = match self.kind {
            Kind::FusedMatMul => ("MatMul", 2),
            Kind::FusedGemm => ("Gemm", 3),
            Kind::FusedConv => ("Conv", 3),
            _ => return None,
        };
        Some((lookup("", name).expect("the catalog has the fused op's base"), n))
    }

    /// A bias on the last axis of `x`: 1-D, that axis's length, `x`'s dtype.
    fn check_bias(&self, x: &Fact, b: &Fact) -> Result<(), Reject> {
        let xd = dims_of(x, "X")?;
        let bd = dims_of(b, "bias")?;
        if b.ty.dtype != x.ty.dtype || xd.is_empty() || bd != [xd[xd.len() - 1]] {
            reject!("{}: bias {} must be 1-D of X's last axis and dtype ({})", self.name, b.ty, x.ty);
        }
        Ok(())
    }

    fn check_activation(&self, attrs: &Attrs) -> Result<(), Reject> {
        let a = attr_string(attrs, "activation", "")?;
        if (self.kind == Kind::FusedConv || !a.is_empty()) && !ACTIVATIONS.contains(&a.as_str()) {
            reject!("{}: activation '{a}' is not one of {ACTIVATIONS:?}", self.name);
        }
        Ok(())
    }
}

impl OpSpec for Contrib {
    fn name(&self) -> &'static str {
        self.name
    }
    fn domain(&self) -> &'static str {
        MS_DOMAIN
    }
    fn arity(&self) -> Arity {
        match self.kind {
            Kind::Gelu | Kind::QuickGelu => Arity::fixed(1, 1),
            Kind::FastGelu => Arity { inputs: (1, 2), outputs: (1, 1) },
            Kind::BiasGelu | Kind::FusedMatMul => Arity::fixed(2, 1),
            Kind::FusedGemm => Arity { inputs: (2, 3), outputs: (1, 1) },
            Kind::FusedConv => Arity { inputs: (2, 4), outputs: (1, 1) },
        }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let x = input(ins, 0)?;
        check_dtype(self.name, x, self.dtypes)?;
        match self.kind {
            Kind::Gelu => Ok(vec![x.ty.clone()]),
            Kind::QuickGelu => {
                attr_float(attrs, "alpha", 1.702)?;
                Ok(vec![x.ty.clone()])
            }
            Kind::FastGelu | Kind::BiasGelu => {
                // ORT's FastGelu kernel: "Input 0 is expected to have 1 or more dimensions, got 0"
                if x.ty.rank() == Some(0) {
                    reject!("{} needs rank >= 1", self.name);
                }
                if let Some(b) = ins.get(1).and_then(|b| b.as_ref()) {
                    self.check_bias(x, b)?;
                }
                Ok(vec![x.ty.clone()])
            }
            Kind::FusedMatMul => {
                attr_float(attrs, "alpha", 1.0)?;
                for key in ["transBatchA", "transBatchB"] {
                    if attr_int(attrs, key, 0)? != 0 {
                        reject!("FusedMatMul: {key} is not modelled");
                    }
                }
                // transA/transB: the last two axes of a rank >= 2 operand are swapped before the product
                let swapped = |f: &Fact, key: &str| -> Result<TensorType, Reject> {
                    let mut d = dims_of(f, key)?;
                    if attr_int(attrs, key, 0)? != 0 {
                        let r = d.len();
                        if r < 2 {
                            reject!("FusedMatMul: {key} needs rank >= 2");
                        }
                        d.swap(r - 1, r - 2);
                    }
                    Ok(TensorType::new(f.ty.dtype, &d))
                };
                let (a, b) = (swapped(x, "transA")?, swapped(input(ins, 1)?, "transB")?);
                let facts = [Some(Fact { ty: a, value: None }), Some(Fact { ty: b, value: None })];
                self.base().expect("fused").0.infer(&facts, &Attrs::new())
            }
            Kind::FusedGemm | Kind::FusedConv => {
                self.check_activation(attrs)?;
                let (base, n) = self.base().expect("fused");
                let out = base.infer(&ins[..ins.len().min(n)], attrs)?;
                if let Some(z) = ins.get(3).and_then(|z| z.as_ref()) {
                    if z.ty != out[0] {
                        reject!("FusedConv: Z {} must be the output's type {}", z.ty, out[0]);
                    }
                }
                Ok(out)
            }
        }
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        let max = d.limits.max_elems;
        let mut attrs = Attrs::new();
        let Some((base, _)) = self.base() else {
            // the Gelu family: X of any rank (>= 1 with a bias), a bias constant on the last axis
            let biased = self.kind == Kind::BiasGelu || (self.kind == Kind::FastGelu && rng.random_bool(0.5));
            let rank1 = biased || self.kind == Kind::FastGelu;
            let ranks = if rank1 { 1..=4 } else { 0..=4 };
            let ok =
                |t: &TensorType| self.dtypes.contains(&t.dtype) && t.dims().is_some_and(|d| !rank1 || !d.is_empty());
            let x = d.pick_or_input(rng, ok, |r| Some(random_type(r, self.dtypes, ranks, max)))?;
            let mut inputs = vec![x.name];
            if biased {
                let last = *x.ty.dims().unwrap().last().unwrap();
                inputs.push(d.random_constant(rng, &TensorType::new(x.ty.dtype, &[last]))?);
            }
            if self.kind == Kind::QuickGelu && rng.random_bool(0.5) {
                attrs.insert("alpha".into(), Attr::Float([1.702, 1.0, 0.5, 2.0][rng.random_range(0..4)]));
            }
            return Ok(Proposal::new(inputs, attrs));
        };
        let mut p = base.sample(d, rng)?;
        let facts: Vec<Option<Fact>> = p.inputs.iter().map(|n| d.fact(n)).collect();
        let Some(Some(x)) = facts.first() else { reject!("{}: no input", self.name) };
        check_dtype(self.name, x, self.dtypes)?;
        let out = base.infer(&facts, &p.attrs)?.remove(0);
        drop(facts);
        match self.kind {
            Kind::FusedMatMul => {
                attrs.insert("alpha".into(), Attr::Float([1.0, 0.5, 0.125, 2.0][rng.random_range(0..4)]));
            }
            _ => {
                attrs = p.attrs.clone();
                // FusedGemm's parameters are activation_alpha/beta: the activations that need none, or one
                let acts = if self.kind == Kind::FusedConv { ACTIVATIONS } else { &ACTIVATIONS[..4] };
                let a = acts[rng.random_range(0..acts.len())];
                attrs.insert("activation".into(), Attr::str(a));
                let params: &[f32] = match a {
                    "LeakyRelu" => &[0.01],
                    "HardSigmoid" => &[0.2, 0.5],
                    "Clip" => &[-1.0, 1.0],
                    _ => &[],
                };
                if self.kind == Kind::FusedConv && !params.is_empty() {
                    attrs.insert("activation_params".into(), Attr::Floats(params.to_vec()));
                } else if a == "LeakyRelu" {
                    attrs.insert("activation_alpha".into(), Attr::Float(0.01));
                } else if !params.is_empty() {
                    reject!("FusedGemm: {a} needs parameters this sampler does not write");
                }
            }
        }
        if self.kind == Kind::FusedConv && rng.random_bool(0.5) {
            // Z, the sum input: an existing value of the output's type, or a new constant or input
            if p.inputs.len() < 3 {
                let m = out.dims().expect("static")[1];
                p.inputs.push(d.random_constant(rng, &TensorType::new(out.dtype, &[m]))?);
            }
            let z = match d.pick(rng, |t| *t == out) {
                Some(v) if rng.random_bool(0.5) => v.name,
                _ if rng.random_bool(0.5) => d.input(out.clone()).name,
                _ => d.random_constant(rng, &out)?,
            };
            p.inputs.push(z);
        }
        Ok(Proposal::new(p.inputs, attrs))
    }
}

pub fn register(v: &mut Vec<Box<dyn OpSpec>>) {
    let ops = [
        ("Gelu", F32_16, Kind::Gelu),
        ("FastGelu", F32_64_16, Kind::FastGelu),
        ("QuickGelu", F32_64_16, Kind::QuickGelu),
        ("BiasGelu", F32_16, Kind::BiasGelu),
        ("FusedMatMul", F32_64_16, Kind::FusedMatMul),
        ("FusedGemm", F32_16, Kind::FusedGemm),
        ("FusedConv", F32_16, Kind::FusedConv),
    ];
    for (name, dtypes, kind) in ops {
        v.push(Box::new(Contrib { name, dtypes, kind }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::testutil::fact;

    #[test]
    fn contrib_ops_infer_like_the_ops_they_fuse_and_refuse_what_ort_refuses() {
        let spec = |n: &str| lookup(MS_DOMAIN, n).unwrap();
        let conv = spec("FusedConv");
        let mut attrs = Attrs::new();
        attrs.insert("activation".into(), Attr::str("Relu"));
        let (x, w, b) = (fact(F32, &[1, 2, 4, 4]), fact(F32, &[3, 2, 3, 3]), fact(F32, &[3]));
        let out = conv.infer(&[x.clone(), w.clone(), b.clone(), fact(F32, &[1, 3, 2, 2])], &attrs).unwrap();
        assert_eq!(out[0], TensorType::new(F32, &[1, 3, 2, 2]));
        assert!(conv.infer(&[x.clone(), w.clone(), b.clone(), fact(F32, &[1, 3, 2, 3])], &attrs).is_err());
        assert!(conv.infer(&[x, w], &Attrs::new()).is_err(), "FusedConv needs an activation");
        assert!(spec("Gelu").infer(&[fact(F64, &[2])], &Attrs::new()).is_err(), "ORT's CPU Gelu has no float64");
        assert!(spec("BiasGelu").infer(&[fact(F32, &[2, 3]), fact(F32, &[2])], &Attrs::new()).is_err());
        assert!(spec("FastGelu").infer(&[fact(F32, &[])], &Attrs::new()).is_err(), "ORT's FastGelu needs rank >= 1");
        let mut t = Attrs::new();
        t.insert("transA".into(), Attr::Int(1));
        let mm = spec("FusedMatMul").infer(&[fact(F32, &[3, 2]), fact(F32, &[3, 4])], &t).unwrap();
        assert_eq!(mm[0], TensorType::new(F32, &[2, 4]));
    }

    #[test]
    fn sampled_contrib_nodes_type_check_in_a_graph() {
        use crate::seedgen::{single_op, SeedConfig};
        let cfg = SeedConfig { contrib: true, ..SeedConfig::default() };
        let mut made = 0;
        for spec in crate::ops::registry().iter().filter(|s| s.domain() == MS_DOMAIN) {
            for seed in 0..20 {
                let mut rng = crate::seedgen::rng_for(seed, 0);
                if let Some(m) = single_op(spec.as_ref(), &mut rng, &cfg) {
                    crate::ops::check_graph(&m.graph, true).unwrap_or_else(|e| panic!("{}: {e}", spec.name()));
                    assert_eq!(m.opsets.get(MS_DOMAIN), Some(&1), "{} without the com.microsoft import", spec.name());
                    made += 1;
                }
            }
        }
        assert!(made >= 100, "only {made} single-op contrib models");
    }
}
