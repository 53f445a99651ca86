//! A test's own contract: the output types its model declares. An unoptimized run that contradicts them (an
//! element type, or a static shape, that differs) means the inputs break the model's contract (a Range fed a
//! negative count where the model declares shape [3]): the test is invalid where it is made, not a finding.

use crate::graph::{Graph, NamedTensor, TensorType};

/// The declared type of every graph output of `g` that has one.
pub fn declared(g: &Graph) -> Vec<(String, TensorType)> {
    g.outputs.iter().filter_map(|o| Some((o.clone(), g.tensor_type(o)?))).collect()
}

/// How `outputs` (an unoptimized run's) contradict `declared`, if they do.
pub fn violation(declared: &[(String, TensorType)], outputs: &[NamedTensor]) -> Option<String> {
    for t in outputs {
        let Some((name, ty)) = declared.iter().find(|(name, _)| *name == t.name) else { continue };
        let dims: Vec<usize> = t.tensor.dims.iter().map(|&d| d.max(0) as usize).collect();
        let shape_differs = ty.dims().is_some_and(|want| want != dims);
        if ty.dtype != t.tensor.dtype || shape_differs {
            return Some(format!(
                "the unoptimized run gives output '{name}' as {}{dims:?} where the model declares {ty}: the inputs \
                 break the model's own contract",
                t.tensor.dtype
            ));
        }
    }
    None
}
