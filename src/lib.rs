//! oatest: optimization-aware test generation for deep-learning compiler optimizers.
//! Data moves one way: extract → synthesize → run → judge → triage.

/// `reject!("...")` returns a [`ops::Reject`] with a formatted message.
macro_rules! reject {
    ($($t:tt)*) => { return Err($crate::ops::Reject(format!($($t)*))) };
}

pub mod campaign;
pub mod case;
pub mod cli;
pub mod compiler;
pub mod finding;
pub mod graph;
pub mod ops;
pub mod oracle;
pub mod pattern;
pub mod report;
pub mod seedgen;
pub mod synth;
pub mod triage;
pub mod util;
