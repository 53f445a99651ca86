//! Which side of an inconsistency is wrong, and where a triaged finding belongs. The semantic reference
//! (onnx.reference in a worker of its own, [`Semantic`]) runs the model as the ONNX specification defines it;
//! comparing it with the unoptimized and the optimized run gives the finding's [`Class`]. Only class
//! `optimizer` goes to `bugs/`; every other class has a folder of its own beside it.

pub use super::semantic::{NoReference, Semantic};
use crate::compiler::{Config, Level, NamedTensor, Outcome, Status};
use crate::graph::{DType, Tensor};
use crate::oracle::{Hints, Oracle};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How the class note of an inconsistency no semantic reference could judge starts.
pub const NO_REFERENCE: &str = "no semantic reference";

/// What a triaged finding is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The optimized run is wrong (it deviates from the semantic reference, the unoptimized run agrees), or
    /// it crashes, fails or hangs where the unoptimized run does not, and disabling the culprits cures it.
    #[default]
    Optimizer,
    /// The unoptimized run deviates from ONNX semantics and the optimized one does not, or the unoptimized
    /// run crashes or fails as well: a real compiler bug, but not of the passes that fired.
    Reference,
    /// Both runs are within the dtype's tolerance of the semantic reference: rounding, not a bug.
    Precision,
    /// The optimized run deviates only in ONNX Runtime's fast x64 quantized kernels: with its precise mode
    /// (session configuration [`super::holds::PRECISE_X64_QUANT`]) the same optimized graph computes the
    /// expected values. That is the documented U8S8 overflow of AVX2/AVX-512 kernels without VNNI, a platform
    /// trade-off.
    Platform,
    /// The optimized run deviates from ONNX semantics only by skipping float16/bfloat16 roundings: it matches
    /// the model evaluated with every 16-bit float widened to float32 ([`crate::compiler::HALF_ROUNDING`]).
    Widened,
    /// The optimized run deviates from ONNX semantics only by an approximation its configuration asks for by
    /// design (a named configuration's `approximates`, e.g. `gelu_approx`): it matches the model evaluated with
    /// that approximation ([`crate::compiler::APPROXIMATE`]).
    Approximated,
    /// The runs differ only where the expected value is NaN or ±Inf (or both runs are non-finite there).
    Nonfinite,
    /// The semantic reference cannot tell (it failed, or both runs deviate from it), or the symptom did not
    /// come back when re-checked.
    Undecided,
    /// The symptom stays with every pass that fired disabled: no pass set explains it.
    Unattributed,
    /// The model breaks a contract the compiler relies on: its values contradict the shapes ONNX shape inference
    /// gives them (Slice-10 copies its input's symbolic dimension to a shorter result), and the compiler plans
    /// memory and fuses by those shapes. An ONNX or model problem, not a bug of the passes.
    Contract,
}

impl Class {
    pub const ALL: [Class; 10] = [
        Class::Optimizer,
        Class::Reference,
        Class::Precision,
        Class::Widened,
        Class::Approximated,
        Class::Platform,
        Class::Nonfinite,
        Class::Undecided,
        Class::Unattributed,
        Class::Contract,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Optimizer => "optimizer",
            Class::Reference => "reference",
            Class::Precision => "precision",
            Class::Widened => "widened",
            Class::Approximated => "approximated",
            Class::Platform => "platform",
            Class::Nonfinite => "nonfinite",
            Class::Undecided => "undecided",
            Class::Unattributed => "unattributed",
            Class::Contract => "contract",
        }
    }

    /// The run directory's folder for this class: `bugs` for optimizer bugs, else the class name.
    pub fn folder(self) -> &'static str {
        match self {
            Class::Optimizer => "bugs",
            c => c.name(),
        }
    }

    /// Whether findings of this class are minimized: not rounding, NaN/Inf-only or platform differences.
    pub fn worth_reducing(self) -> bool {
        !matches!(self, Class::Precision | Class::Nonfinite | Class::Widened | Class::Platform | Class::Approximated)
    }

    /// Whether all findings of this class (per target and symptom) are one entry, whatever passes let it show:
    /// one known behaviour of the compiler.
    pub fn one_entry(self) -> bool {
        matches!(self, Class::Widened | Class::Platform | Class::Approximated)
    }

    /// One line for reports: what the class means for whoever reads it.
    pub fn meaning(self) -> &'static str {
        match self {
            Class::Optimizer => "a bug of the culprit passes: the optimized run deviates from ONNX semantics",
            Class::Reference => {
                "the unoptimized run deviates from ONNX semantics (onnx.reference), or fails too: a compiler bug, \
                 but not of the passes that fired"
            }
            Class::Precision => "both runs are within the dtype's tolerance of ONNX semantics: rounding, not a bug",
            Class::Platform => {
                "the deviation disappears in ONNX Runtime's precise x64 quantization mode (session config \
                 session.x64quantprecision=1): the documented U8S8 overflow of AVX2/AVX-512 kernels without VNNI, \
                 a platform trade-off, not a bug of the pass"
            }
            Class::Widened => {
                "the optimized run skips float16/bfloat16 roundings the model asks for (it matches the model computed \
                 in float32): ONNX Runtime's CPU provider computes 16-bit float ops in float32 through casts it \
                 inserts, and merging those casts drops a rounding; a known trade-off, not filed as a bug"
            }
            Class::Approximated => {
                "the optimized run deviates only by an approximation its configuration asks for (it matches the model \
                 evaluated with that approximation, e.g. Gelu by FastGelu's tanh formula under \
                 optimization.enable_gelu_approximation=1): by design, not filed as a bug"
            }
            Class::Nonfinite => "the runs differ only where the expected value is NaN or infinite",
            Class::Undecided => "oatest cannot tell which side is wrong; check by hand before reporting",
            Class::Unattributed => "the symptom stays with every pass disabled: no optimization pass explains it",
            Class::Contract => {
                "the model's values contradict the shapes ONNX shape inference gives them, which the compiler relies on \
                 (memory planning, fusions): an ONNX shape-inference or model problem, not a bug of the passes"
            }
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A class and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Classified {
    pub class: Class,
    pub note: String,
}

/// Classifies an inconsistency between `unoptimized` and `optimized` (both ran) with the semantic
/// reference's run (or why there is none), judged with the oracle's `hints` about the case's model.
pub fn classify(
    oracle: &Oracle,
    hints: &Hints,
    unoptimized: &Outcome,
    optimized: &Outcome,
    semantic: Result<&Outcome, &NoReference>,
) -> Classified {
    let semantic = match semantic {
        Ok(s) => s,
        Err(why) => return Classified { class: Class::Undecided, note: format!("{NO_REFERENCE}: {why}") },
    };
    // differences only at elements whose expected value is not finite (or where neither run is)
    if let Some((u, o)) = finite_parts(&unoptimized.outputs, &optimized.outputs, &semantic.outputs) {
        if same(oracle, hints, &u, &o) {
            let note =
                "every difference is at an element where onnx.reference gives NaN/Inf (an infinity of the other \
                        sign included: the sign of a zero it divides by), or where both runs do";
            return Classified { class: Class::Nonfinite, note: note.into() };
        }
    }
    let deviates = |run: &Outcome| oracle.inconsistency_with(semantic, run, hints).map(|v| v.detail);
    match (deviates(unoptimized), deviates(optimized)) {
        (None, Some(d)) => Classified {
            class: Class::Optimizer,
            note: format!("the unoptimized run agrees with onnx.reference; the optimized one does not: {d}"),
        },
        (Some(d), None) => Classified {
            class: Class::Reference,
            note: format!("the optimized run agrees with onnx.reference; the unoptimized one does not: {d}"),
        },
        (None, None) => {
            Classified { class: Class::Precision, note: "both runs are within tolerance of onnx.reference".into() }
        }
        (Some(du), Some(dopt)) => match clean_deviation(oracle, hints, semantic, unoptimized, optimized) {
            // one output decides: where the reference is clean, a wrong optimized value is wrong whatever the
            // other outputs do (a noisy float16 output beside it made whole models undecided)
            Some((name, at)) => Classified {
                class: Class::Optimizer,
                note: format!(
                    "at output '{name}' the unoptimized run agrees with onnx.reference and the optimized one does \
                     not ({at}); other outputs deviate in both runs (unoptimized: {du})"
                ),
            },
            None => Classified {
                class: Class::Undecided,
                note: format!("both runs deviate from onnx.reference (unoptimized: {du}; optimized: {dopt})"),
            },
        },
    }
}

/// The first output (by name) where `unoptimized` agrees with `semantic` and `optimized` does not, with how
/// the optimized one deviates there.
fn clean_deviation(
    oracle: &Oracle,
    hints: &Hints,
    semantic: &Outcome,
    unoptimized: &Outcome,
    optimized: &Outcome,
) -> Option<(String, String)> {
    let named = |o: &Outcome, name: &str| o.outputs.iter().find(|t| t.name == name).cloned();
    semantic.outputs.iter().find_map(|e| {
        let (u, o) = (named(unoptimized, &e.name)?, named(optimized, &e.name)?);
        let one = std::slice::from_ref(e);
        if !same(oracle, hints, one, &[u]) {
            return None;
        }
        deviation(oracle, hints, one, &[o]).map(|d| (e.name.clone(), d))
    })
}

/// Refines class `optimizer` of `optimized` to [`Class::Widened`] when its deviation from `semantic` is only
/// skipped 16-bit roundings: it matches `widened` (the model computed with its 16-bit floats widened to
/// float32), or every output where it deviates is a float32/float64 output holding 16-bit values whose
/// optimized values, rounded to that 16-bit type, are the expected ones (a Cast from float16 computed without
/// the rounding).
pub fn refine_widened(
    oracle: &Oracle,
    hints: &Hints,
    classified: Classified,
    semantic: &Outcome,
    optimized: &Outcome,
    widened: Option<&Outcome>,
) -> Classified {
    if classified.class != Class::Optimizer {
        return classified;
    }
    let how = if widened.is_some_and(|w| oracle.inconsistency_with(w, optimized, hints).is_none()) {
        "it matches the model computed with its float16/bfloat16 values widened to float32"
    } else if skips_final_rounding(oracle, hints, semantic, optimized) {
        "its deviating outputs hold float16/bfloat16 values in float32, and rounded to that type they are the \
         expected ones"
    } else {
        return classified;
    };
    Classified {
        class: Class::Widened,
        note: format!("{}; the optimized run skips 16-bit roundings the model asks for: {how}", classified.note),
    }
}

/// See [`refine_widened`]: whether every output where `optimized` deviates from `semantic` is a float32/float64
/// output whose expected values are all exact 16-bit floats (of one type) and whose optimized values, rounded to
/// that type, agree with them.
fn skips_final_rounding(oracle: &Oracle, hints: &Hints, semantic: &Outcome, optimized: &Outcome) -> bool {
    if semantic.outputs.len() != optimized.outputs.len() {
        return false;
    }
    let mut deviating = 0;
    for (e, o) in semantic.outputs.iter().zip(&optimized.outputs) {
        if same(oracle, hints, std::slice::from_ref(e), std::slice::from_ref(o)) {
            continue;
        }
        deviating += 1;
        let (te, to) = (&e.tensor, &o.tensor);
        if te.dtype != to.dtype || te.dims != to.dims || !matches!(te.dtype, DType::F32 | DType::F64) {
            return false;
        }
        let (Some(ve), Some(vo)) = (te.to_f64s(), to.to_f64s()) else { return false };
        let dims: Vec<usize> = te.dims.iter().map(|&d| d.max(0) as usize).collect();
        let rounded = |half: DType, v: &[f64], name: &str| NamedTensor {
            name: name.to_string(),
            tensor: Tensor::from_f64s(half, &dims, v),
        };
        let explained = [DType::F16, DType::BF16].into_iter().any(|half| {
            let exact = rounded(half, &ve, &e.name);
            let representable =
                exact.tensor.to_f64s().is_some_and(|back| back.iter().zip(&ve).all(|(b, v)| !v.is_finite() || b == v));
            representable && same(oracle, hints, &[exact], &[rounded(half, &vo, &o.name)])
        });
        if !explained {
            return false;
        }
    }
    deviating > 0
}

/// How `run` (an unoptimized run of `model`) contradicts the model's declared output types, if it does
/// ([`crate::oracle::contract`]).
pub fn contract_violation(model: &crate::graph::Model, run: &Outcome) -> Option<String> {
    crate::oracle::contract::violation(&crate::oracle::contract::declared(&model.graph), &run.outputs)
}

/// Whether two output lists agree under the oracle.
pub(super) fn same(oracle: &Oracle, hints: &Hints, a: &[NamedTensor], b: &[NamedTensor]) -> bool {
    deviation(oracle, hints, a, b).is_none()
}

/// How outputs `b` deviate from `a` under the oracle, if they do.
fn deviation(oracle: &Oracle, hints: &Hints, a: &[NamedTensor], b: &[NamedTensor]) -> Option<String> {
    let wrap = |outputs: &[NamedTensor]| Outcome {
        target: String::new(),
        config: Config::level(Level::Disable),
        status: Status::Ok,
        outputs: outputs.to_vec(),
        passes_fired: Vec::new(),
        passes_ran: Vec::new(),
        time_ms: 0.0,
    };
    oracle.inconsistency_with(&wrap(a), &wrap(b), hints).map(|v| v.detail)
}

/// The two runs' outputs with every real float element set to 0 where the semantic value is NaN/±Inf or both
/// runs are non-finite: what remains is the part of the difference that involves finite values. `None` when
/// the three runs' outputs do not line up (count, dtype, shape).
pub(super) fn finite_parts(
    u: &[NamedTensor],
    o: &[NamedTensor],
    s: &[NamedTensor],
) -> Option<(Vec<NamedTensor>, Vec<NamedTensor>)> {
    if u.len() != o.len() || u.len() != s.len() {
        return None;
    }
    let (mut mu, mut mo) = (Vec::new(), Vec::new());
    for ((a, b), e) in u.iter().zip(o).zip(s) {
        let (ta, tb, te) = (&a.tensor, &b.tensor, &e.tensor);
        if ta.dims != tb.dims || ta.dims != te.dims || ta.dtype != tb.dtype || ta.dtype != te.dtype {
            return None;
        }
        let real_float = ta.dtype.is_float() && !matches!(ta.dtype, DType::C64 | DType::C128);
        let values = (ta.to_f64s(), tb.to_f64s(), te.to_f64s());
        let (Some(va), Some(vb), Some(ve), true) = (values.0, values.1, values.2, real_float) else {
            mu.push(a.clone());
            mo.push(b.clone());
            continue;
        };
        let mask: Vec<bool> = ve
            .iter()
            .zip(&va)
            .zip(&vb)
            .map(|((e, x), y)| {
                // an infinity of the other sign counts here too: it is the sign of a zero divided by, which
                // passes that drop `x + 0` do not keep (IEEE: -0 + 0 = +0), as most graph compilers do not
                !e.is_finite() || (!x.is_finite() && !y.is_finite())
            })
            .collect();
        let dims: Vec<usize> = ta.dims.iter().map(|&d| d.max(0) as usize).collect();
        let zero = |v: Vec<f64>| -> Tensor {
            let v: Vec<f64> = v.into_iter().zip(&mask).map(|(x, &m)| if m { 0.0 } else { x }).collect();
            Tensor::from_f64s(ta.dtype, &dims, &v)
        };
        mu.push(NamedTensor { name: a.name.clone(), tensor: zero(va) });
        mo.push(NamedTensor { name: b.name.clone(), tensor: zero(vb) });
    }
    Some((mu, mo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Graph, Model, Node, OpId, TensorType};

    fn run(outputs: Vec<NamedTensor>) -> Outcome {
        Outcome {
            target: String::new(),
            config: Config::level(Level::Disable),
            status: Status::Ok,
            outputs,
            passes_fired: Vec::new(),
            passes_ran: Vec::new(),
            time_ms: 0.0,
        }
    }

    fn out(dims: &[usize], v: &[f32]) -> Vec<NamedTensor> {
        vec![NamedTensor { name: "y".into(), tensor: Tensor::from_f32(dims, v) }]
    }

    #[test]
    fn a_run_that_breaks_the_declared_output_shape_breaks_the_contract() {
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[3]));
        g.add_node(Node::new("n", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[3]));
        let m = Model::new(g);
        assert!(contract_violation(&m, &run(out(&[0], &[]))).is_some());
        assert!(contract_violation(&m, &run(out(&[3], &[1.0, 2.0, 3.0]))).is_none());
    }

    #[test]
    fn classes_follow_which_side_deviates_from_the_semantic_reference() {
        let oracle = Oracle { tolerance: crate::oracle::Tolerance::default() };
        let h = Hints::default();
        let (truth, off) = (run(out(&[2], &[1.0, 2.0])), run(out(&[2], &[1.0, 2.5])));
        let class = |u: &Outcome, o: &Outcome| classify(&oracle, &h, u, o, Ok(&truth)).class;
        assert_eq!(class(&truth, &off), Class::Optimizer);
        assert_eq!(class(&off, &truth), Class::Reference);
        assert_eq!(class(&off, &run(out(&[2], &[1.0, 1.5]))), Class::Undecided);
        assert_eq!(
            classify(&oracle, &h, &truth, &off, Err(&NoReference::NotAsked("no onnx".into()))).class,
            Class::Undecided
        );
        let nan = run(out(&[2], &[f32::NAN, 2.0]));
        let inf = run(out(&[2], &[f32::INFINITY, 2.0]));
        assert_eq!(classify(&oracle, &h, &nan, &inf, Ok(&nan)).class, Class::Nonfinite);
        // an infinity of the other sign is the sign of a zero (x / (-0 + 0) once the Add of +0 is removed)
        let minus = run(out(&[2], &[f32::NEG_INFINITY, 2.0]));
        assert_eq!(classify(&oracle, &h, &inf, &minus, Ok(&inf)).class, Class::Nonfinite);
        assert_eq!(classify(&oracle, &h, &inf, &nan, Ok(&inf)).class, Class::Nonfinite);
        // one output decides when its reference is clean, whatever another output does
        let two = |y: &[f32], z: &[f32]| {
            let mut o = out(&[2], y);
            o.push(NamedTensor { name: "z".into(), tensor: Tensor::from_f32(&[2], z) });
            run(o)
        };
        let truth2 = two(&[1.0, 2.0], &[5.0, 6.0]);
        let class2 = |u: &Outcome, o: &Outcome| classify(&oracle, &h, u, o, Ok(&truth2)).class;
        assert_eq!(class2(&two(&[1.0, 2.0], &[5.0, 9.0]), &two(&[1.0, 2.5], &[5.0, 7.0])), Class::Optimizer);
        assert_eq!(class2(&two(&[1.0, 2.4], &[5.0, 9.0]), &two(&[1.0, 2.5], &[5.0, 7.0])), Class::Undecided);
        // a NaN where the true value is finite is a wrong result, not a NaN-handling difference
        let wrong_nan = run(out(&[2], &[f32::NAN, 2.0]));
        assert_eq!(classify(&oracle, &h, &truth, &wrong_nan, Ok(&truth)).class, Class::Optimizer);
    }
}
