//! Class `platform`: a wrong quantized result on x86-64 that ONNX Runtime's precise mode
//! ([`super::holds::PRECISE_X64_QUANT`]) computes right with the same optimization is the fast U8S8 kernels'
//! documented overflow, not a bug of the passes. The precise mode also runs QDQS8ToU8Transformer, which fails on
//! some graphs ("Attempt to replace the existing tensor", its own bug with an entry of its own): when the precise
//! run fails, it is tried once more without that pass (the precise kernels still take the int8 weights).

use super::classify::{Class, Classified};
use super::holds;
use super::reduce::Case;
use super::Reproducer;
use crate::compiler::{Outcome, Status};
use crate::graph::onnx;

/// The pass only ORT's precise mode runs, converting int8 weights to uint8.
const PRECISE_ONLY: &str = "QDQS8ToU8Transformer";

/// `c` (the class of an inconsistency of `case` between `unoptimized` and `optimized`), `platform` when the
/// precise mode cures it.
pub fn refine(
    r: &mut Reproducer,
    c: Classified,
    case: &Case,
    unoptimized: &Outcome,
    optimized: &Outcome,
) -> Classified {
    let (key, value) = holds::PRECISE_X64_QUANT;
    let precise_already = optimized.config.options.iter().any(|(k, _)| k == key);
    if c.class != Class::Optimizer
        || r.finding.target != "ort"
        || !cfg!(target_arch = "x86_64")
        || precise_already
        || !holds::has_quantized_ops(&case.model)
    {
        return c;
    }
    let mut precise = optimized.config.clone();
    precise.options.push((key.to_string(), value.to_string()));
    let model = onnx::encode_model(&case.model);
    let mut o = r.run(&model, &case.feeds, &precise);
    let mut how = String::new();
    if o.status != Status::Ok && !precise.disabled.iter().any(|p| p == PRECISE_ONLY) {
        how = format!(" (with {PRECISE_ONLY} disabled: the precise mode failed with it, {})", o.status.kind());
        precise.disabled.push(PRECISE_ONLY.to_string());
        o = r.run(&model, &case.feeds, &precise);
    }
    if o.status == Status::Ok && r.oracle.inconsistency_with(unoptimized, &o, &r.hints()).is_none() {
        return Classified {
            class: Class::Platform,
            note: format!("{}; with {key}={value} the same optimization computes the expected values{how}", c.note),
        };
    }
    c
}
