//! Triage: which passes cause a finding (delta debugging of the pass set). Graph reduction, signatures from
//! culprit passes, reports and regression export are not built yet.

pub mod dd;
