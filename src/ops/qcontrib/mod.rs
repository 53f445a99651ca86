//! The quantized ops ONNX Runtime's QDQ, NHWC and dynamic-quantization transformers produce and later passes
//! consume (QLinearConv and QLinearMatMul of ai.onnx; QLinearAdd/Mul/AveragePool/Softmax/Concat, QGemm,
//! MatMulIntegerToFloat, DynamicQuantizeMatMul and NhwcMaxPool of `com.microsoft`), and SkipLayerNormalization,
//! so that seeds and variants can hold what one pass hands the next. Dtypes are what ONNX Runtime 1.32's CPU
//! provider runs (docs/ort-contrib-dtypes.tsv, scripts/measure-ort-contrib.py): uint8 or int8 data, a uint8
//! left operand with a uint8 or int8 right one, never int8 with uint8; float32 scales. Shapes follow the float
//! op each one quantizes (`lookup("", base)`). All are drawn only into ONNX Runtime's seeds ([`OpSpec::contrib`]).
//! Inference accepts every form ORT's schemas allow (optional zero points, per-channel weight scales), since
//! the library's patterns hold them; sampling writes the common ones.

use super::shape::opt_input;
use super::Rng;
use super::{attr_int, broadcast, check_dtype, dims_of, input, lookup, Arity, Draft, Fact, OpSpec, Proposal, Reject};
use crate::graph::{Attr, Attrs, DType, TensorType, MS_DOMAIN as MS};

mod sample;

use DType::*;
const Q: &[DType] = &[U8, I8];

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    /// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): MatMul's shapes, y_zp's dtype.
    MatMul,
    /// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?): Conv's shapes, B int32 [M].
    Conv,
    /// QLinearAdd / QLinearMul(A, A_scale, A_zp?, B, B_scale, B_zp?, C_scale, C_zp?): broadcast.
    Binary,
    /// QLinearAveragePool(X, x_scale, x_zp?, y_scale, y_zp?): AveragePool's shapes (NHWC with channels_last).
    AvgPool,
    /// QLinearSoftmax(X, x_scale, x_zp?, y_scale, y_zp): X's type.
    Softmax,
    /// QLinearConcat(y_scale, y_zp, (X, x_scale, x_zp)...): Concat's shapes.
    Concat,
    /// QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C?, y_scale?, y_zp?): Gemm's shapes; float32 without y_scale.
    Gemm,
    /// MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp?, b_zp?, bias?): MatMul's shapes, the scales' float.
    IntegerToFloat,
    /// DynamicQuantizeMatMul(A, B, b_scale, b_zp?, bias?): float32 A, quantized B, float32 out.
    DynamicMatMul,
    /// NhwcMaxPool(x): MaxPool's shapes on an NHWC tensor.
    NhwcMaxPool,
    /// SkipLayerNormalization(input, skip, gamma, beta?, bias?) -> output, mean?, inv_std_var?, sum?.
    SkipLayerNorm,
}

pub struct QOp {
    name: &'static str,
    domain: &'static str,
    kind: Kind,
}

fn float(f: &Fact, dtype: DType) -> Option<Fact<'static>> {
    Some(Fact { ty: f.ty.with_dtype(dtype), value: None })
}

/// A scale (float32; a scalar, a one-element 1-D or, where `per` allows, 1-D of that length) and its zero point
/// (of `q`'s dtype and the scale's shape), when given.
fn check_q(op: &str, what: &str, q: DType, s: &Fact, z: Option<&Fact>, per: Option<usize>) -> Result<(), Reject> {
    check_dtype(&format!("{op} {what} scale"), s, &[F32])?;
    let sd = dims_of(s, "scale")?;
    if !(sd.is_empty() || sd == [1] || per.is_some_and(|n| sd == [n])) {
        reject!("{op} {what} scale {} is not per tensor{}", s.ty, per.map_or(String::new(), |n| format!(" or [{n}]")));
    }
    if let Some(z) = z {
        if z.ty.dtype != q || dims_of(z, "zero point")? != sd {
            reject!("{op} {what} zero point {} must be {q} of the scale's shape {}", z.ty, s.ty);
        }
    }
    Ok(())
}

/// The right operand's dtype against the left's: ORT's CPU kernels take uint8 with uint8 or int8, int8 with int8.
fn check_pair(op: &str, a: &Fact, b: &Fact) -> Result<(), Reject> {
    check_dtype(op, a, Q)?;
    check_dtype(op, b, Q)?;
    if a.ty.dtype == I8 && b.ty.dtype == U8 {
        reject!("{op}: ONNX Runtime's CPU kernel has no int8 x uint8 form");
    }
    Ok(())
}

fn base(name: &str, ins: &[Option<Fact>], attrs: &Attrs) -> Result<TensorType, Reject> {
    let spec = lookup("", name).expect("the catalog has the quantized op's base");
    Ok(spec.infer(ins, attrs)?.remove(0))
}

/// NCHW dims of an NHWC tensor and back.
fn nchw(d: &[usize]) -> Vec<usize> {
    let mut v = vec![d[0], d[d.len() - 1]];
    v.extend_from_slice(&d[1..d.len() - 1]);
    v
}
fn nhwc(d: &[usize]) -> Vec<usize> {
    let mut v = vec![d[0]];
    v.extend_from_slice(&d[2..]);
    v.push(d[1]);
    v
}

fn pooled(x: &Fact, attrs: &Attrs, op: &str, channels_last: bool) -> Result<TensorType, Reject> {
    let xd = dims_of(x, "X")?;
    if xd.len() < 3 {
        reject!("pooling needs rank >= 3, got {}", x.ty);
    }
    let d = if channels_last { nchw(&xd) } else { xd };
    let mut a = attrs.clone();
    a.remove("channels_last");
    let out = base(op, &[Some(Fact { ty: TensorType::new(F32, &d), value: None })], &a)?;
    let od = out.dims().expect("static");
    Ok(TensorType::new(x.ty.dtype, &if channels_last { nhwc(&od) } else { od }))
}

impl QOp {
    fn infer_q(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        let n = self.name;
        let at = |i| input(ins, i);
        let opt = |i| opt_input(ins, i);
        match self.kind {
            Kind::MatMul => {
                let (a, b, z) = (at(0)?, at(3)?, at(7)?);
                check_pair(n, a, b)?;
                check_q(n, "a", a.ty.dtype, at(1)?, Some(at(2)?), None)?;
                let cols = dims_of(b, "b")?.last().copied();
                check_q(n, "b", b.ty.dtype, at(4)?, Some(at(5)?), cols)?;
                check_dtype(n, z, Q)?;
                check_q(n, "y", z.ty.dtype, at(6)?, Some(z), None)?;
                Ok(vec![base("MatMul", &[float(a, F32), float(b, F32)], &Attrs::new())?.with_dtype(z.ty.dtype)])
            }
            Kind::Conv => {
                let (x, w, z) = (at(0)?, at(3)?, at(7)?);
                check_pair(n, x, w)?;
                let m = dims_of(w, "w")?.first().copied();
                check_q(n, "x", x.ty.dtype, at(1)?, Some(at(2)?), None)?;
                check_q(n, "w", w.ty.dtype, at(4)?, Some(at(5)?), m)?;
                if z.ty.dtype != x.ty.dtype {
                    reject!("{n}: y_zero_point {} must be x's dtype {}", z.ty.dtype, x.ty.dtype);
                }
                check_q(n, "y", z.ty.dtype, at(6)?, Some(z), None)?;
                if let Some(b) = opt(8) {
                    if b.ty.dtype != I32 || dims_of(b, "B")? != [m.unwrap_or(0)] {
                        reject!("{n}: B {} must be int32 [M]", b.ty);
                    }
                }
                Ok(vec![base("Conv", &[float(x, F32), float(w, F32)], attrs)?.with_dtype(x.ty.dtype)])
            }
            Kind::Binary => {
                let (a, b) = (at(0)?, at(3)?);
                check_dtype(n, a, Q)?;
                if b.ty.dtype != a.ty.dtype {
                    reject!("{n}: A {} and B {} differ in dtype", a.ty, b.ty);
                }
                let t = a.ty.dtype;
                check_q(n, "A", t, at(1)?, opt(2), None)?;
                check_q(n, "B", t, at(4)?, opt(5), None)?;
                check_q(n, "C", t, at(6)?, opt(7), None)?;
                Ok(vec![TensorType::new(t, &broadcast(&[dims_of(a, "A")?, dims_of(b, "B")?])?)])
            }
            Kind::AvgPool | Kind::NhwcMaxPool => {
                let x = at(0)?;
                check_dtype(n, x, Q)?;
                if self.kind == Kind::NhwcMaxPool {
                    return Ok(vec![pooled(x, attrs, "MaxPool", true)?]);
                }
                check_q(n, "x", x.ty.dtype, at(1)?, opt(2), None)?;
                check_q(n, "y", x.ty.dtype, at(3)?, opt(4), None)?;
                Ok(vec![pooled(x, attrs, "AveragePool", attr_int(attrs, "channels_last", 0)? != 0)?])
            }
            Kind::Softmax => {
                let x = at(0)?;
                check_dtype(n, x, Q)?;
                check_q(n, "x", x.ty.dtype, at(1)?, opt(2), None)?;
                check_q(n, "y", x.ty.dtype, at(3)?, opt(4), None)?;
                if !attrs.contains_key("opset") {
                    reject!("{n} needs the attribute 'opset'");
                }
                base("Softmax", &[float(x, F32)], &Attrs::from([("axis".into(), attrs_axis(attrs)?)]))?;
                Ok(vec![x.ty.clone()])
            }
            Kind::Concat => {
                let z = at(1)?;
                check_dtype(n, z, Q)?;
                check_q(n, "y", z.ty.dtype, at(0)?, Some(z), None)?;
                if ins.len() < 5 || !(ins.len() - 2).is_multiple_of(3) {
                    reject!("{n} takes (X, scale, zero point) triples after y_scale, y_zero_point");
                }
                let mut xs = Vec::new();
                for i in (2..ins.len()).step_by(3) {
                    let x = at(i)?;
                    if x.ty.dtype != z.ty.dtype {
                        reject!("{n}: input {} is not {}", x.ty, z.ty.dtype);
                    }
                    check_q(n, "x", x.ty.dtype, at(i + 1)?, Some(at(i + 2)?), None)?;
                    xs.push(float(x, F32));
                }
                Ok(vec![base("Concat", &xs, attrs)?.with_dtype(z.ty.dtype)])
            }
            Kind::Gemm => {
                let (a, b) = (at(0)?, at(3)?);
                check_pair(n, a, b)?;
                check_q(n, "a", a.ty.dtype, at(1)?, Some(at(2)?), None)?;
                let t = attr_int(attrs, "transB", 0)? != 0;
                let bd = dims_of(b, "B")?;
                let cols = if t { bd.first() } else { bd.last() }.copied();
                check_q(n, "b", b.ty.dtype, at(4)?, Some(at(5)?), cols)?;
                let mut g = Attrs::new();
                for k in ["transA", "transB"] {
                    g.insert(k.into(), Attr::Int(attr_int(attrs, k, 0)?));
                }
                let mut facts = vec![float(a, F32), float(b, F32)];
                if let Some(c) = opt(6) {
                    check_dtype(&format!("{n} C"), c, &[I32])?;
                    facts.push(float(c, F32));
                }
                let out = base("Gemm", &facts, &g)?;
                match (opt(7), opt(8)) {
                    (Some(s), z) => {
                        check_q(n, "y", z.map_or(a.ty.dtype, |z| z.ty.dtype), s, z, None)?;
                        Ok(vec![out.with_dtype(z.map_or(a.ty.dtype, |z| z.ty.dtype))])
                    }
                    (None, Some(_)) => reject!("{n}: y_zero_point without y_scale"),
                    (None, None) => Ok(vec![out]),
                }
            }
            Kind::IntegerToFloat => {
                let (a, b, sa, sb) = (at(0)?, at(1)?, at(2)?, at(3)?);
                check_pair(n, a, b)?;
                let cols = dims_of(b, "B")?.last().copied();
                check_q(n, "a", a.ty.dtype, sa, opt(4), None)?;
                check_q(n, "b", b.ty.dtype, sb, opt(5), cols)?;
                let out = base("MatMul", &[float(a, F32), float(b, F32)], &Attrs::new())?;
                if let Some(bias) = opt(6) {
                    if bias.ty != TensorType::new(F32, &[cols.unwrap_or(0)]) {
                        reject!("{n}: bias {} must be float32 [N]", bias.ty);
                    }
                }
                Ok(vec![out])
            }
            Kind::DynamicMatMul => {
                let (a, b) = (at(0)?, at(1)?);
                check_dtype(n, a, &[F32])?;
                check_dtype(n, b, Q)?;
                let cols = dims_of(b, "B")?.last().copied();
                check_q(n, "b", b.ty.dtype, at(2)?, opt(3), cols)?;
                if let Some(bias) = opt(4) {
                    if bias.ty != TensorType::new(F32, &[cols.unwrap_or(0)]) {
                        reject!("{n}: bias {} must be float32 [N]", bias.ty);
                    }
                }
                Ok(vec![base("MatMul", &[float(a, F32), float(b, F32)], &Attrs::new())?])
            }
            Kind::SkipLayerNorm => skip_layer_norm(n, ins),
        }
    }
}

/// SkipLayerNormalization's outputs: output and input_skip_bias_sum of the input's type, mean and inv_std_var
/// float32 [batch, sequence, 1].
fn skip_layer_norm(n: &str, ins: &[Option<Fact>]) -> Result<Vec<TensorType>, Reject> {
    let at = |i| input(ins, i);
    let opt = |i| opt_input(ins, i);
    let (x, skip, gamma) = (at(0)?, at(1)?, at(2)?);
    check_dtype(n, x, &[F32, F16])?;
    let xd = dims_of(x, "input")?;
    if xd.len() != 3 {
        reject!("{n}: input must be 3-D [batch, sequence, hidden], got {}", x.ty);
    }
    let sd = dims_of(skip, "skip")?;
    if skip.ty.dtype != x.ty.dtype
        || !(sd == xd || sd == xd[1..] || (sd.len() == 3 && sd[0] == 1 && sd[1..] == xd[1..]))
    {
        reject!("{n}: skip {} must be input's type {} (or its last two axes)", skip.ty, x.ty);
    }
    let h = TensorType::new(x.ty.dtype, &[xd[2]]);
    for (i, what) in [(2, "gamma"), (3, "beta"), (4, "bias")] {
        if let Some(p) = if i == 2 { Some(gamma) } else { opt(i) } {
            if p.ty != h {
                reject!("{n}: {what} {} must be {h}", p.ty);
            }
        }
    }
    let stat = TensorType::new(F32, &[xd[0], xd[1], 1]);
    Ok(vec![x.ty.clone(), stat.clone(), stat, x.ty.clone()])
}

fn attrs_axis(attrs: &Attrs) -> Result<Attr, Reject> {
    Ok(Attr::Int(attr_int(attrs, "axis", -1)?))
}

impl OpSpec for QOp {
    fn name(&self) -> &'static str {
        self.name
    }
    fn domain(&self) -> &'static str {
        self.domain
    }
    fn contrib(&self) -> bool {
        true
    }
    fn arity(&self) -> Arity {
        let (lo, hi) = match self.kind {
            Kind::MatMul => (8, 8),
            Kind::Conv => (8, 9),
            Kind::Binary => (7, 8),
            Kind::AvgPool | Kind::Softmax => (4, 5),
            Kind::Concat => (5, 2 + 3 * 8),
            Kind::Gemm => (6, 9),
            Kind::IntegerToFloat => (4, 7),
            Kind::DynamicMatMul => (3, 5),
            Kind::NhwcMaxPool => (1, 1),
            Kind::SkipLayerNorm => return Arity { inputs: (3, 5), outputs: (1, 4) },
        };
        Arity { inputs: (lo, hi), outputs: (1, 1) }
    }
    fn infer(&self, ins: &[Option<Fact>], attrs: &Attrs) -> Result<Vec<TensorType>, Reject> {
        self.infer_q(ins, attrs)
    }
    fn sample(&self, d: &mut Draft, rng: &mut Rng) -> Result<Proposal, Reject> {
        self.sample_q(d, rng)
    }
}

pub fn register(v: &mut Vec<Box<dyn OpSpec>>) {
    let ops = [
        ("QLinearMatMul", "", Kind::MatMul),
        ("QLinearConv", "", Kind::Conv),
        ("QLinearAdd", MS, Kind::Binary),
        ("QLinearMul", MS, Kind::Binary),
        ("QLinearAveragePool", MS, Kind::AvgPool),
        ("QLinearSoftmax", MS, Kind::Softmax),
        ("QLinearConcat", MS, Kind::Concat),
        ("QGemm", MS, Kind::Gemm),
        ("MatMulIntegerToFloat", MS, Kind::IntegerToFloat),
        ("DynamicQuantizeMatMul", MS, Kind::DynamicMatMul),
        ("NhwcMaxPool", MS, Kind::NhwcMaxPool),
        ("SkipLayerNormalization", MS, Kind::SkipLayerNorm),
    ];
    for (name, domain, kind) in ops {
        v.push(Box::new(QOp { name, domain, kind }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::ops::testutil::fact;

    #[test]
    fn quantized_ops_infer_like_their_float_ops_and_refuse_what_ort_cannot_run() {
        let spec = |d: &str, n: &str| lookup(d, n).unwrap();
        let s = || fact(F32, &[]);
        let z = |d| fact(d, &[]);
        let mm = spec("", "QLinearMatMul");
        let ins = |a, b| vec![fact(a, &[2, 3]), s(), z(a), fact(b, &[3, 4]), s(), z(b), s(), z(a)];
        assert_eq!(mm.infer(&ins(U8, I8), &Attrs::new()).unwrap()[0], TensorType::new(U8, &[2, 4]));
        assert!(mm.infer(&ins(I8, U8), &Attrs::new()).is_err(), "ORT's CPU has no int8 x uint8 QLinearMatMul");
        // per-column b scale and zero point
        let mut per = ins(U8, U8);
        per[4] = fact(F32, &[4]);
        per[5] = fact(U8, &[4]);
        assert!(mm.infer(&per, &Attrs::new()).is_ok());
        per[5] = fact(U8, &[]);
        assert!(mm.infer(&per, &Attrs::new()).is_err(), "a zero point has its scale's shape");
        let conv = spec("", "QLinearConv");
        let mut c = vec![fact(I8, &[1, 2, 4, 4]), s(), z(I8), fact(I8, &[3, 2, 3, 3]), fact(F32, &[3]), fact(I8, &[3])];
        c.extend([s(), z(I8), fact(I32, &[3])]);
        assert_eq!(conv.infer(&c, &Attrs::new()).unwrap()[0], TensorType::new(I8, &[1, 3, 2, 2]));
        c[8] = fact(F32, &[3]);
        assert!(conv.infer(&c, &Attrs::new()).is_err(), "QLinearConv's bias is int32");
        let add = spec(MS, "QLinearAdd");
        let a = vec![fact(U8, &[2, 3]), s(), None, fact(U8, &[3]), s(), None, s(), None];
        assert_eq!(add.infer(&a, &Attrs::new()).unwrap()[0], TensorType::new(U8, &[2, 3]), "zero points optional");
        // NHWC pooling, as the NHWC transformer writes it
        let pool = spec(MS, "QLinearAveragePool");
        let attrs = Attrs::from([
            ("kernel_shape".to_string(), Attr::Ints(vec![2, 2])),
            ("channels_last".to_string(), Attr::Int(1)),
        ]);
        let out = pool.infer(&[fact(U8, &[1, 4, 4, 3]), s(), z(U8), s(), z(U8)], &attrs).unwrap();
        assert_eq!(out[0], TensorType::new(U8, &[1, 3, 3, 3]));
        let qgemm = spec(MS, "QGemm");
        let g = vec![fact(U8, &[2, 3]), s(), z(U8), fact(I8, &[3, 4]), s(), z(I8)];
        assert_eq!(qgemm.infer(&g, &Attrs::new()).unwrap()[0], TensorType::new(F32, &[2, 4]), "float without y");
        let dq = spec(MS, "DynamicQuantizeMatMul");
        assert_eq!(dq.infer(&[fact(F32, &[2, 3]), fact(I8, &[3, 4]), s()], &Attrs::new()).unwrap()[0].dtype, F32);
        let sln = spec(MS, "SkipLayerNormalization");
        let x = fact(F16, &[2, 3, 4]);
        let out = sln.infer(&[x.clone(), x.clone(), fact(F16, &[4])], &Attrs::new()).unwrap();
        assert_eq!(out[0], TensorType::new(F16, &[2, 3, 4]));
        assert!(sln.infer(&[fact(F64, &[2, 3, 4]), fact(F64, &[2, 3, 4]), fact(F64, &[4])], &Attrs::new()).is_err());
        assert!(sln.infer(&[x.clone(), x, fact(F16, &[3])], &Attrs::new()).is_err(), "gamma on the hidden axis");
    }

    #[test]
    fn sampled_quantized_nodes_type_check_and_stay_out_of_other_targets_seeds() {
        use crate::seedgen::{generate, single_op, SeedConfig};
        let cfg = SeedConfig { contrib: true, ..SeedConfig::default() };
        let mut made = std::collections::BTreeMap::new();
        let ours: Vec<&Box<dyn OpSpec>> = crate::ops::registry().iter().filter(|s| s.contrib()).collect();
        for spec in ours.iter().filter(|s| s.domain().is_empty() || s.name().starts_with('Q')) {
            for seed in 0..20 {
                let mut rng = crate::seedgen::rng_for(seed, 0);
                if let Some(m) = single_op(spec.as_ref(), &mut rng, &cfg) {
                    crate::ops::check_graph(&m.graph, true).unwrap_or_else(|e| panic!("{}: {e}", spec.name()));
                    *made.entry(spec.name()).or_insert(0) += 1;
                }
            }
        }
        assert!(made.len() >= 8 && made.values().all(|&n| n >= 5), "{made:?}");
        // seeds for targets without contrib ops never hold QLinearConv or QLinearMatMul (ai.onnx, but ORT's)
        for seed in 0..200 {
            let m = generate(seed, 0, &SeedConfig::default());
            assert!(m.graph.node_ids().all(|id| !m.graph.node(id).op.name.starts_with("QLinear")), "seed {seed}");
        }
    }
}
