//! The approximated class: an optimized run that deviates only by an approximation its configuration makes by
//! design (GeluApproximation's tanh formula, WeightBiasQuantization's levels) matches the model evaluated with
//! that approximation, wherever the approximation itself is determined.

use super::classify::{finite_parts, same, Class, Classified};
use crate::compiler::{NamedTensor, Outcome};
use crate::graph::{DType, Tensor};
use crate::oracle::{Hints, Oracle};

/// Refines class `optimizer` of `optimized` to [`Class::Approximated`] when it matches `approximated`, the model
/// evaluated with the approximations `names` its configuration makes by design, wherever that evaluation is finite,
/// on the outputs where it differs from `unoptimized` (another output may deviate from onnx.reference in both).
pub fn refine_approximated(
    oracle: &Oracle,
    hints: &Hints,
    classified: Classified,
    [unoptimized, optimized]: [&Outcome; 2],
    approximated: &Outcome,
    names: &[String],
) -> Classified {
    let n = optimized.outputs.len();
    if classified.class != Class::Optimizer || unoptimized.outputs.len() != n || approximated.outputs.len() != n {
        return classified;
    }
    let differ: Vec<usize> = (0..n)
        .filter(|&k| {
            let one = |o: &Outcome| std::slice::from_ref(&o.outputs[k]).to_vec();
            !same(oracle, hints, &one(unoptimized), &one(optimized))
        })
        .collect();
    let pick = |o: &Outcome| differ.iter().map(|&k| o.outputs[k].clone()).collect::<Vec<_>>();
    // where the approximation gives NaN or an infinity it moved a value across a singularity (a Gelu of -5 is
    // -1e-6 exactly and -0 approximated; a Pow of it by -3.1 is NaN or inf): the elements left decide
    let Some((a, o)) = finite_parts(&pick(approximated), &pick(optimized), &pick(approximated)) else {
        return classified;
    };
    if !same(oracle, hints, &a, &o) {
        return classified;
    }
    Classified {
        class: Class::Approximated,
        note: format!(
            "{}; it matches the model evaluated with the approximation {} that its configuration makes by design",
            classified.note,
            names.join(" + ")
        ),
    }
}

/// [`refine_approximated`] with the approximations `all` of a configuration added one at a time (GeluApproximation's
/// Gelu, then its Erf), as far as one explains the deviation; `evaluate` gives the model evaluated with some of them.
pub fn refine_by_approximations(
    oracle: &Oracle,
    hints: &Hints,
    classified: Classified,
    runs: [&Outcome; 2],
    all: &[String],
    mut evaluate: impl FnMut(&[String]) -> Option<Outcome>,
) -> Classified {
    let mut c = classified;
    for names in (1..=all.len()).map(|k| &all[..k]) {
        if let Some(a) = evaluate(names) {
            // the elements the approximation decides only to its tanh kernel's few ULPs (a Gelu of -5 is -0 or
            // -1.5e-7, and a Reciprocal of it -inf or -6.5e6): those of the evaluations at either end that differ
            let ends = ["tanh_up", "tanh_down"].map(|end| {
                let with: Vec<String> = names.iter().cloned().chain([end.to_string()]).collect();
                evaluate(&with)
            });
            let a = match ends {
                [Some(up), Some(down)] => undetermined_as(&a, &up, &down),
                _ => a,
            };
            c = refine_approximated(oracle, hints, c, runs, &a, names);
        }
        if c.class != Class::Optimizer {
            break;
        }
    }
    c
}

/// `approximated` with each float element where `up` and `down` (evaluations at either end of the approximation's
/// accuracy) differ by more than 1e-3 of their magnitude, or in finiteness, made NaN: undetermined, which
/// [`refine_approximated`] leaves out as it does the approximation's own NaN and infinities.
fn undetermined_as(approximated: &Outcome, up: &Outcome, down: &Outcome) -> Outcome {
    let mut out = approximated.clone();
    if up.outputs.len() != out.outputs.len() || down.outputs.len() != out.outputs.len() {
        return out;
    }
    for ((t, u), d) in out.outputs.iter_mut().zip(&up.outputs).zip(&down.outputs) {
        let same_form = |x: &NamedTensor| x.tensor.dims == t.tensor.dims && x.tensor.dtype == t.tensor.dtype;
        let real_float = t.tensor.dtype.is_float() && !matches!(t.tensor.dtype, DType::C64 | DType::C128);
        let (Some(va), Some(vu), Some(vd), true) =
            (t.tensor.to_f64s(), u.tensor.to_f64s(), d.tensor.to_f64s(), real_float && same_form(u) && same_form(d))
        else {
            continue;
        };
        let differ = |x: f64, y: f64| {
            x.is_finite() != y.is_finite() || (x.is_finite() && (x - y).abs() > 1e-3 * x.abs().max(y.abs()))
        };
        let v: Vec<f64> =
            va.iter().zip(vu.iter().zip(&vd)).map(|(&a, (&x, &y))| if differ(x, y) { f64::NAN } else { a }).collect();
        let dims: Vec<usize> = t.tensor.dims.iter().map(|&k| k.max(0) as usize).collect();
        t.tensor = Tensor::from_f64s(t.tensor.dtype, &dims, &v);
    }
    out
}
