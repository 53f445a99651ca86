//! The filing gate's second half: a new entry's minimized model must show its symptom under the entry's
//! configuration in each of [`RUNS`] fresh worker processes (what users see running repro.py); else it is
//! `undecided`: the symptom needs what the process ran before (a value an earlier run left in memory). A hang is
//! exempt (each run costs the time limit; three runs confirmed it already).

use super::classify::Class;
use super::dd::Culprits;
use super::{Minimized, Reproducer, Triaged};
use crate::compiler::Config;
use crate::oracle::Symptom;

/// Fresh processes an entry's repro must show its symptom in, each.
pub const RUNS: usize = 3;

/// Applies the gate to an `optimizer` triage `t` of `m` (other classes pass through): its class, note and
/// signature change when a fresh process does not show it.
pub fn gate(r: &mut Reproducer, t: &mut Triaged, m: &Minimized) {
    if t.class != Class::Optimizer || r.finding.symptom == Symptom::Hang {
        return;
    }
    let Ok(config) = Config::parse(&t.config) else { return };
    match r.shown_fresh((&m.model_bytes, &m.case.feeds), &config, m.reference.as_ref(), RUNS) {
        RUNS => t.class_note = format!("{}; shown in {RUNS} of {RUNS} fresh processes", t.class_note),
        k => {
            t.class = Class::Undecided;
            t.class_note = format!(
                "shown in {k} of {RUNS} fresh processes under `{config}`: the symptom depends on what the process \
                 ran before (a value an earlier run left), so its repro would not show it"
            );
            let faulty = Culprits { passes: t.faulty(), ..Culprits::default() };
            t.signature = super::signature(&r.finding, &faulty, &t.detail, t.class);
        }
    }
}
