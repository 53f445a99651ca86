//! Variation after splicing: what a pattern's own test never wrote, where a pass's corner cases live. A kind is
//! chosen by the splice's tag, apart from the splice's own random stream, so a test without it is the same test.
//! - `extra-reader`: a value inside the pattern (a node output that is no pattern output) is also read by a later
//!   node of the seed that takes its type (half of the time, when one does), else returned as a graph output, so
//!   a pass that removes its producer must keep it (the review of a 30-minute ORT campaign found FastGelu,
//!   BiasSkipLayerNorm, EmbedLayerNorm and Attention fusions deleting a node whose output was still read).

use crate::graph::{Graph, TensorType};
use crate::ops::{check_graph, Rng};
use rand::{Rng as _, SeedableRng as _};
use std::collections::HashMap;

/// The share of splices whose pattern gets an extra reader of one inner value ([`Variation::ExtraReader`]).
pub const EXTRA_READER_SHARE: f64 = 0.25;

/// A way a spliced pattern differs from its own test (`--vary`; counted per kind in stats.json `variations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variation {
    ExtraReader,
}

impl Variation {
    pub const ALL: &'static [Variation] = &[Variation::ExtraReader];

    pub fn name(self) -> &'static str {
        match self {
            Variation::ExtraReader => "extra-reader",
        }
    }

    pub fn parse(s: &str) -> anyhow::Result<Variation> {
        Variation::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Variation::ALL.iter().map(|v| v.name()).collect();
            anyhow::anyhow!("--vary {s}: expected one of {}", names.join(", "))
        })
    }
}

/// The extra reader a splice adds: which inner value, its type, and who reads it.
pub(super) struct Reader {
    /// The value, by its name in the pattern.
    pub value: String,
    pub ty: TensorType,
    /// A later seed node reads it (when one takes its type), rather than a new graph output.
    pub by_node: bool,
    /// Which of the seed nodes' free inputs of its type (modulo their count).
    pub pick: usize,
}

/// For [`EXTRA_READER_SHARE`] of the tags: one inner value of pattern graph `pg` to read again, typed with the
/// pattern's inputs as `ports` says where they differ from the pattern's own (abstract reuse, edge shapes); None
/// for the other tags, or when no inner value has a type.
pub(super) fn extra_reader(pg: &Graph, ports: &HashMap<String, TensorType>, tag: u64) -> Option<Reader> {
    let mut vrng = Rng::seed_from_u64(tag ^ 0x7a11_0e0d_e000_0002);
    if !vrng.random_bool(EXTRA_READER_SHARE) {
        return None;
    }
    let types = if ports.is_empty() {
        check_graph(pg, false).ok()?
    } else {
        // the pattern's declared inner types hold only for its own input shapes
        let mut probe = pg.clone();
        probe.types.retain(|v, _| pg.inputs.contains(v));
        for (n, t) in ports {
            probe.types.insert(n.clone(), t.clone().into());
        }
        check_graph(&probe, false).ok()?
    };
    let inner: Vec<(String, TensorType)> = pg
        .nodes_in_order()
        .ok()?
        .iter()
        .flat_map(|n| n.outputs.iter())
        .filter(|o| !o.is_empty() && !pg.outputs.contains(*o))
        .filter_map(|o| Some((o.clone(), types.get(o)?.clone())))
        .collect();
    let (value, ty) = inner.get(vrng.random_range(0..inner.len().max(1)))?.clone();
    Some(Reader { value, ty, by_node: vrng.random_bool(0.5), pick: vrng.random_range(0..1 << 16) })
}
