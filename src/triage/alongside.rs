//! Another pass failing alongside the culprits. Disabling an entry's culprits should leave a model that runs: its
//! report says so, and a maintainer checks it. When another pass then fails the model on its own (ORT's
//! SimplifiedLayerNormFusion fusing what LayerNormFusionL1 no longer does, and tripping on the same broadcast
//! scale: a bug of its own, with its own entry), it is disabled in the entry's configuration too and named in
//! `also_faulty`, so that the entry's repro shows its culprits alone cure it.

use super::dd::Probe;
use super::Reproducer;
use crate::compiler::{Config, NamedTensor, Outcome, Status};

/// What disabling another pass alongside the culprits settles.
pub struct Alongside {
    /// The pass that fails the model once the culprits are disabled.
    pub pass: String,
    /// The entry's configuration with it disabled, where the culprits still show the symptom.
    pub config: Config,
    /// The run under that configuration.
    pub shown: Outcome,
    /// The run with the culprits disabled too: clean.
    pub without: Outcome,
}

/// When `without` (the run under `config` with `culprits` disabled) fails, the first pass it fired whose disabling
/// too makes the model run and agree with `reference`, while the symptom still shows with only it disabled.
pub fn settle(
    r: &mut Reproducer,
    (model, feeds): (&[u8], &[NamedTensor]),
    config: &Config,
    culprits: &[String],
    without: &Outcome,
    reference: Option<&Outcome>,
) -> Option<Alongside> {
    if matches!(without.status, Status::Ok) {
        return None;
    }
    let fired: Vec<String> = without
        .passes_fired
        .iter()
        .filter(|p| !culprits.contains(p) && !config.disabled.contains(p))
        .cloned()
        .collect();
    for pass in fired {
        let mut cured = config.clone();
        cured.disabled.extend(culprits.iter().cloned());
        cured.disabled.push(pass.clone());
        let clean = r.run(model, feeds, &cured);
        if !matches!(clean.status, Status::Ok) || r.classify(&clean, reference) != Probe::Clean {
            continue;
        }
        let mut with = config.clone();
        with.disabled.push(pass.clone());
        let shown = r.run(model, feeds, &with);
        if r.classify(&shown, reference) == Probe::Symptom {
            return Some(Alongside { pass, config: with, shown, without: clean });
        }
    }
    None
}
