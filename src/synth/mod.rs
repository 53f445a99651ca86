//! Optimization-aware synthesis: splice a pattern into a seed graph at a random point (open inputs fed from the
//! preceding context: exact type, abstract type, then `bridges`; open outputs feed the succeeding context or
//! become graph outputs; the result is validated), or into a control-flow body (`branch`). Also where tests come from (`source`), the Relax `recipe`,
//! and which library patterns a campaign can use (`usable`).

pub mod branch;
pub mod bridges;
pub mod lower;
mod ports;
pub mod recipe;
pub mod relax_usable;
pub mod schedule;
pub mod source;
mod splice;
pub mod usable;
pub mod vary;
pub mod vary_attrs;
pub mod vary_axis;
pub mod vary_broadcast;
pub mod vary_const;
mod vary_negative;

#[cfg(test)]
use ports::edge_types;
pub use splice::{splice, splice_varied, Refused};

/// How each open input of a pattern was fed (counted in tests and stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feed {
    Exact,
    Abstract,
    Bridge,
    /// A new graph input: for ports whose values must stay in a range (indices, ratios), which context values
    /// would break; the input generator gives them valid values.
    Fresh,
    /// A constant: the value a port must hold for the pattern's own types to hold ([`shape_value`]).
    Constant,
    /// An edge shape on purpose (see [`EDGE_SHARE`]): the port fed, through a bridge, a tensor of its dtype with
    /// every dim 1, or of rank 0, where the pattern's ops accept it (catalog inference decides).
    Edge,
}

/// The share of splices that feed one open input of the pattern an edge shape ([`Feed::Edge`]): fused kernels
/// check ranks and sizes the unfused ops do not, and a pattern's own test rarely has size-1 dims or scalars.
/// Chosen by the splice's tag, apart from the splice's own random stream.
pub const EDGE_SHARE: f64 = 0.125;

/// The share of splices whose pattern took a `broadcast` variant ([`vary_broadcast`]) that feed one port an edge
/// shape: a constant of a higher rank than the rank-0 or all-ones value its reader takes then sets the output's
/// rank, which fusions that replace the reader drop (GeluFusion's and SimplifiedLayerNormFusion's bugs).
pub const BROADCAST_EDGE_SHARE: f64 = 0.5;

/// What a splice did, for statistics and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpliceInfo {
    pub point: usize,
    pub feeds: Vec<Feed>,
    /// Open outputs connected to a later node's input (the rest became graph outputs).
    pub connected: usize,
    pub bridge_ops: Vec<String>,
    /// How the spliced pattern differs from its own test ([`vary`]).
    pub variations: Vec<vary::Variation>,
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_vary;
