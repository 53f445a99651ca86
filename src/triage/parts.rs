//! Judging an inconsistency by the parts of its model. The class of a whole model ([`Reproducer::classify_with`])
//! can hide what each output says: onnx.reference may lack a kernel only other outputs need (a contrib op beside
//! the deviating value), and one model's outputs may differ for unrelated reasons (a layer normalization of equal
//! values rounding one way, a mean cast to an integer rounding another). The part of a model that computes some
//! outputs computes them as the whole does, so the runs' values for those outputs are judged against the semantic
//! reference's run of that part: when onnx.reference cannot run the whole model, the differing outputs together
//! (from the values of the outputs both runs agree on, when the part still needs the kernel it lacks);
//! when the whole looks like a wrong rewrite and several outputs differ, each alone (a wrong rewrite is one that
//! some output shows by itself).

use super::classify::{Class, Classified};
use super::reduce::{tidy, Case};
use super::semantic::NoReference;
use super::Reproducer;
use crate::compiler::Outcome;
use crate::graph::onnx;

/// At most this many differing outputs are judged one by one (each costs its own semantic evaluations).
const MAX_ALONE: usize = 4;

impl Reproducer<'_> {
    /// The class of an inconsistency of `case` between its `unoptimized` and `optimized` runs: what the
    /// semantic reference says about each side. A Relax recipe has no ONNX model to ask it about.
    pub fn classify_case(&mut self, case: &Case, unoptimized: &Outcome, optimized: &Outcome) -> Classified {
        let semantic = self.semantic_run(case);
        let differ = self.differing(case, unoptimized, optimized);
        // onnx.reference may lack a kernel only other outputs need: the outputs that differ are judged together
        let failed = matches!(semantic, Err(NoReference::Failed { .. }));
        if failed && !differ.is_empty() && differ.len() < case.model.graph.outputs.len() {
            let whole = semantic.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
            let (u, o) = (only(unoptimized, &differ), only(optimized, &differ));
            // when the part needs the failing kernel too, outputs both runs agree on are given where they feed it
            let parts = [
                (part_of(case, &differ), ""),
                (
                    part_of(&given_agreed(case, unoptimized, &differ), &differ),
                    ", from the values of the outputs both runs agree on",
                ),
            ];
            for (k, (part, how)) in parts.into_iter().enumerate() {
                if let Ok(s) = self.semantic_run(&part) {
                    let mut c = self.classify_with(&part, &u, &o, Ok(s));
                    if k == 1 {
                        c = self.same_from_optimized_values(c, case, [unoptimized, optimized], &differ);
                    }
                    let names = differ.join(", ");
                    c.note = format!(
                        "{} (judged on the outputs that differ, {names}{how}; the whole model: {whole})",
                        c.note
                    );
                    return c;
                }
            }
        }
        let c = self.classify_with(case, unoptimized, optimized, semantic);
        if c.class != Class::Optimizer || differ.len() < 2 || differ.len() > MAX_ALONE {
            return c;
        }
        // several outputs differ: a wrong rewrite is one that some output shows alone
        let mut alone = Vec::new();
        for name in &differ {
            let one = std::slice::from_ref(name);
            let (part, u, o) = (part_of(case, one), only(unoptimized, one), only(optimized, one));
            let Ok(s) = self.semantic_run(&part) else { return c };
            let k = self.classify_with(&part, &u, &o, Ok(s));
            if matches!(k.class, Class::Optimizer | Class::Undecided) {
                return c;
            }
            alone.push((name.clone(), k.class));
        }
        let class = if alone.iter().all(|(_, k)| *k == alone[0].1) { alone[0].1 } else { Class::Precision };
        let each: Vec<String> = alone.iter().map(|(n, k)| format!("'{n}' {k}")).collect();
        Classified {
            class,
            note: format!(
                "{}; but judged alone, no output that differs shows a wrong rewrite: {}",
                c.note,
                each.join(", ")
            ),
        }
    }

    /// Class `c` of the outputs that differ (`differ`), judged from the unoptimized run's values of the other
    /// outputs, checked from the optimized run's: the runs agree on those only within tolerance, and a value both
    /// runs round differently can be what the differing outputs amplify (an unoptimized float16 MatMul rounded to
    /// float32, then squared: the part computed from that run's value agrees with that run). `c` when both say the
    /// same (or the values fed are equal), else undecided.
    fn same_from_optimized_values(
        &mut self,
        c: Classified,
        case: &Case,
        [unoptimized, optimized]: [&Outcome; 2],
        differ: &[String],
    ) -> Classified {
        let fed = |run: &Outcome| -> Vec<crate::compiler::NamedTensor> {
            run.outputs.iter().filter(|t| !differ.contains(&t.name)).cloned().collect()
        };
        if fed(unoptimized) == fed(optimized) {
            return c;
        }
        let part = part_of(&given_agreed(case, optimized, differ), differ);
        let Ok(s) = self.semantic_run(&part) else { return c };
        let (u, o) = (only(unoptimized, differ), only(optimized, differ));
        let other = self.classify_with(&part, &u, &o, Ok(s));
        if other.class == c.class {
            return c;
        }
        Classified {
            class: Class::Undecided,
            note: format!(
                "{}; but from the optimized run's values of the outputs the runs agree on within tolerance: {} ({})",
                c.note, other.class, other.note
            ),
        }
    }

    /// Why an inconsistency of `case` judged a wrong rewrite is rounding's to decide: the optimized run is NaN or
    /// infinite where the model evaluated in float64 is finite, and the unoptimized run keeps no correct digit there
    /// either (a square root of a variance the model cancels: about 1e6 exactly, 3547 unoptimized, NaN fused).
    pub(super) fn without_digits(&mut self, case: &Case, unoptimized: &Outcome, optimized: &Outcome) -> Option<String> {
        if self.finding.symptom != super::Symptom::Inconsistency {
            return None;
        }
        let differing: Vec<usize> = (0..unoptimized.outputs.len())
            .filter(|&k| optimized.outputs.get(k).is_none_or(|o| o.tensor != unoptimized.outputs[k].tensor))
            .collect();
        let mut once = None;
        let exact = self.float64(case, &mut once)?.clone();
        no_digit_where_not_finite(unoptimized, optimized, &exact, &differing).then(|| {
            "the optimized run is not finite where the model evaluated in float64 is, and the unoptimized run keeps \
             no correct digit there either: rounding decides those values"
                .to_string()
        })
    }

    /// `case` evaluated in float64 by the semantic reference, asked once per judgement (`once` keeps the answer).
    pub(super) fn float64<'a>(&mut self, case: &Case, once: &'a mut Option<Option<Outcome>>) -> Option<&'a Outcome> {
        if once.is_none() {
            let model = onnx::encode_model(&case.model);
            *once = Some(self.semantic.as_mut().and_then(|s| s.run_float64(&model, &case.feeds).ok()));
        }
        once.as_ref().and_then(|e| e.as_ref())
    }

    /// [`super::conditioning::refine_float64`] of `c` with `case` evaluated in float64 ([`Self::float64`]; `c` when
    /// it cannot be).
    pub(super) fn by_float64(
        &mut self,
        c: Classified,
        case: &Case,
        [unoptimized, optimized]: [&Outcome; 2],
        rounding: Option<&Outcome>,
        once: &mut Option<Option<Outcome>>,
    ) -> Classified {
        let tol = self.oracle.tolerance;
        let Some(exact) = self.float64(case, once) else { return c };
        let comparable = super::holds::outputs_without_quantized_ops(&case.model);
        let c = super::conditioning::refine_float64(c, tol, unoptimized, optimized, exact, &comparable, rounding);
        if !matches!(c.class, Class::Optimizer | Class::Undecided) {
            return c;
        }
        // outputs a quantized op computes, when the unoptimized run agrees with onnx.reference on them (the same
        // levels, as far as they show): judged with those levels given as onnx.reference computes them, so that
        // the float64 evaluation moves no quantization boundary (a float16 ConvMulFusion after a QuantizeLinear)
        let quantized: Vec<String> = unoptimized
            .outputs
            .iter()
            .zip(&optimized.outputs)
            .filter(|(u, o)| u.tensor != o.tensor && !comparable.contains(&u.name))
            .map(|(u, _)| u.name.clone())
            .collect();
        let Some(r) = rounding.filter(|_| !quantized.is_empty()) else { return c };
        let hints = self.hints();
        if self.oracle.inconsistency_with(&only(unoptimized, &quantized), &only(r, &quantized), &hints).is_some() {
            return c;
        }
        let Some(given) = self.quantized_given(case, &quantized) else { return c };
        let model = onnx::encode_model(&given.model);
        let Some(exact) = self.semantic.as_mut().and_then(|s| s.run_float64(&model, &given.feeds).ok()) else {
            return c;
        };
        let comparable = super::holds::outputs_without_quantized_ops(&given.model);
        let k =
            super::conditioning::refine_float64(c.clone(), tol, unoptimized, optimized, &exact, &comparable, rounding);
        if k.class == c.class {
            return c;
        }
        Classified {
            class: k.class,
            note: format!("{} (the levels its quantized ops compute given, as onnx.reference computes them)", k.note),
        }
    }

    /// `case` with the values that quantized ops of its main graph compute for the outputs `names` given, as
    /// onnx.reference computes them in the model's types; None when there are none or onnx.reference fails.
    fn quantized_given(&mut self, case: &Case, names: &[String]) -> Option<Case> {
        let g = &case.model.graph;
        let cone = super::holds::behind(g, names.to_vec());
        let values: Vec<String> = g
            .node_ids()
            .map(|id| g.node(id))
            .filter(|n| super::holds::is_quantized(n) && n.subgraphs().next().is_none())
            .flat_map(|n| n.outputs.iter().filter(|o| !o.is_empty() && cone.contains(*o)).cloned())
            .collect();
        if values.is_empty() {
            return None;
        }
        let mut exposed = case.clone();
        exposed.model.graph.outputs.retain(|o| !values.contains(o));
        exposed.model.graph.outputs.extend(values.iter().cloned());
        let run = self.semantic_run(&exposed).ok()?;
        let levels: Vec<&crate::compiler::NamedTensor> =
            run.outputs.iter().filter(|t| values.contains(&t.name)).collect();
        (levels.len() == values.len()).then(|| give(case, levels))
    }

    /// The semantic reference's run of `case` (or why there is none).
    fn semantic_run(&mut self, case: &Case) -> Result<Outcome, NoReference> {
        match (&mut self.semantic, &self.finding.relax) {
            (None, _) => Err(NoReference::NotAsked("no semantic reference in this triage".into())),
            (Some(_), Some(_)) => {
                Err(NoReference::NotAsked("a Relax-level test (a recipe) has no ONNX model for onnx.reference".into()))
            }
            (Some(s), None) => s.run(&onnx::encode_model(&case.model), &case.feeds),
        }
    }

    /// The outputs of `case` where `u` and `o` differ beyond the oracle's tolerance, in the graph's order.
    fn differing(&self, case: &Case, u: &Outcome, o: &Outcome) -> Vec<String> {
        let hints = self.hints();
        let outputs = &case.model.graph.outputs;
        outputs
            .iter()
            .filter(|n| {
                let one = std::slice::from_ref(*n);
                self.oracle.inconsistency_with(&only(u, one), &only(o, one), &hints).is_some()
            })
            .cloned()
            .collect()
    }
}

/// `run` with only the outputs `names`.
fn only(run: &Outcome, names: &[String]) -> Outcome {
    let mut run = run.clone();
    run.outputs.retain(|t| names.contains(&t.name));
    run
}

/// `case` with each output the runs agree on (all but `names`) given where it is read: a graph input fed with its
/// value in `u` (a kernel onnx.reference lacks, a grouped ConvTranspose, before a layer normalization that the
/// optimizer fused wrongly).
fn given_agreed(case: &Case, u: &Outcome, names: &[String]) -> Case {
    give(case, u.outputs.iter().filter(|t| !names.contains(&t.name)).collect())
}

/// `case` with `values` given: each a new graph input its readers read instead (fed the tensor).
fn give(case: &Case, values: Vec<&crate::compiler::NamedTensor>) -> Case {
    let mut part = case.clone();
    let g = &mut part.model.graph;
    for t in values {
        let readers = g.consumers(&t.name);
        if readers.is_empty() || g.producer(&t.name).is_none() {
            continue;
        }
        let given = format!("{}__given", t.name);
        let dims: Vec<usize> = t.tensor.dims.iter().map(|&d| d.max(0) as usize).collect();
        g.add_input(&given, crate::graph::TensorType::new(t.tensor.dtype, &dims));
        for (id, slot) in readers {
            g.set_input(id, slot, &given);
        }
        part.feeds.push(crate::compiler::NamedTensor { name: given, tensor: t.tensor.clone() });
    }
    tidy(&mut part);
    part
}

/// The part of `case` that computes only the outputs `names`.
fn part_of(case: &Case, names: &[String]) -> Case {
    let mut part = case.clone();
    part.model.graph.outputs.retain(|v| names.contains(v));
    tidy(&mut part);
    part
}

/// Whether at every element of the outputs `only` where the runs differ, `optimized` is NaN or infinite, the model
/// evaluated in float64 (`exact`) is finite, and `unoptimized` is off the exact value by half its magnitude or more,
/// or not finite.
fn no_digit_where_not_finite(unoptimized: &Outcome, optimized: &Outcome, exact: &Outcome, only: &[usize]) -> bool {
    let mut seen = false;
    for &k in only {
        let values = |run: &Outcome| run.outputs.get(k).and_then(|t| t.tensor.to_f64s());
        let (Some(u), Some(o), Some(e)) = (values(unoptimized), values(optimized), values(exact)) else { return false };
        for ((x, y), z) in u.iter().zip(&o).zip(&e) {
            if x == y || (x.is_nan() && y.is_nan()) {
                continue;
            }
            // every element the runs differ on: optimized not finite, exact finite, unoptimized without a digit (a
            // NaN is none either); a finite wrong element elsewhere is a wrong result
            if y.is_finite() || !z.is_finite() || (x.is_finite() && (x - z).abs() < 0.5 * z.abs()) {
                return false;
            }
            seen = true;
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DType;
    use crate::triage::conditioning::tests::run;

    /// A review found a NaN filed where the exact value is about 1e6 and the unoptimized run gives 3547: no digit on
    /// either side. A NaN beside a finite wrong element, or where the unoptimized run is right, is no such case.
    #[test]
    fn a_nan_where_the_unoptimized_run_keeps_no_digit_either() {
        let nan = f64::NAN;
        let no_digit = |u: &[f64], o: &[f64], e: &[f64]| {
            let (u, o, e) = (run(u, DType::F32), run(o, DType::F32), run(e, DType::F64));
            no_digit_where_not_finite(&u, &o, &e, &[0])
        };
        assert!(no_digit(&[nan, 3547.0, 0.0], &[nan, nan, nan], &[1e6, 1e6, 2e6]));
        assert!(!no_digit(&[nan, 9.9e5, 0.0], &[nan, nan, nan], &[1e6, 1e6, 2e6]), "the unoptimized run is right");
        assert!(!no_digit(&[1.0, 3547.0], &[2.0, nan], &[1.0, 1e6]), "a finite wrong element");
        assert!(!no_digit(&[1.0, 2.0], &[1.0, 2.0], &[1.0, 2.0]), "nothing differs");
    }
}
