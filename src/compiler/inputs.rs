//! Test inputs for a model: generated deterministically from a seed with value ranges that keep results defined
//! (positive where a consumer needs it, in range for indices), or read from ONNX TensorProto `.pb` files.

use super::NamedTensor;
use crate::graph::{onnx, DType, Dim, Graph, Tensor};
use anyhow::Context;
use rand::{Rng as _, SeedableRng};
use std::path::Path;

/// Value of a symbolic dimension when inputs are generated (one a named configuration overrides takes the
/// override's size: `named::free_dim_size`).
pub const SYM_DIM: i64 = 1;

/// Which values an input should take, from what reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Range {
    Any,
    /// Read by Log/Sqrt/Reciprocal/Pow base or as a divisor: keep it > 0.
    Positive,
    /// Read as indices (Gather-like): 0 only, always valid.
    Index,
    /// A probability (Dropout ratio): in [0, 0.5).
    Ratio,
    /// An attention mask ([`read_as_mask`]): 0 or 1.
    Mask,
}

/// Whether value `name` of `g` is read as an attention mask: moved only (Unsqueeze, Squeeze, Reshape, Expand, Cast)
/// into the subtracted side of a Sub, BERT's `(1 - mask) * -10000`. ORT's AttentionFusion replaces that with its
/// Attention's mask input, defined for 0/1 masks only: other values are outside the model's domain, and a finding
/// on them is no optimizer bug.
pub fn read_as_mask(g: &Graph, name: &str) -> bool {
    let mut frontier = vec![name.to_string()];
    for _ in 0..5 {
        let mut next = Vec::new();
        for v in &frontier {
            for (id, slot) in g.consumers(v) {
                let n = g.node(id);
                match (n.op.name.as_str(), slot) {
                    ("Sub", 1) => return true,
                    ("Unsqueeze" | "Squeeze" | "Reshape" | "Expand" | "Cast", 0) => {
                        next.extend(n.outputs.iter().cloned())
                    }
                    _ => {}
                }
            }
        }
        frontier = next;
    }
    false
}

fn range_for(g: &Graph, name: &str) -> Range {
    if read_as_mask(g, name) {
        return Range::Mask;
    }
    let mut r = Range::Any;
    // what bodies of If, Loop and Scan that read it from this graph want of it (unless they define the name)
    for id in g.node_ids().filter(|&id| g.node(id).implicit_inputs().contains(name)) {
        for (_, body) in g.node(id).subgraphs().filter(|(_, b)| !b.is_defined(name)) {
            match range_for(body, name) {
                Range::Any => {}
                Range::Positive => r = Range::Positive,
                strict => return strict,
            }
        }
    }
    for (id, slot) in g.consumers(name) {
        let op = g.node(id).op.name.as_str();
        match (op, slot) {
            ("Gather" | "GatherElements" | "GatherND" | "ScatterElements" | "ScatterND" | "OneHot", 1) => {
                return Range::Index
            }
            ("Log" | "Sqrt" | "Reciprocal" | "Rsqrt", 0) | ("Pow", 0) | ("Div" | "Mod", 1) => r = Range::Positive,
            ("Dropout", 1) => return Range::Ratio,
            ("EmbedLayerNormalization", 0 | 1 | 7) | ("Attention", 3) => return Range::Index,
            _ => {}
        }
    }
    r
}

/// Inputs for every graph input that is not an initializer. Deterministic in (`graph`, `seed`).
pub fn generate(g: &Graph, seed: u64) -> anyhow::Result<Vec<NamedTensor>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut total = 0usize;
    for name in g.inputs.iter().filter(|n| !g.initializers.contains_key(*n)) {
        let ty = g.tensor_type(name).with_context(|| format!("graph input '{name}' is not a tensor"))?;
        // an input of unknown rank gets shape [1]: the compiler still optimizes; running may then fail
        let shape = ty.shape.clone().unwrap_or_else(|| vec![Dim::Fixed(1)]);
        let dims: Vec<usize> = shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => (*n).max(0) as usize,
                Dim::Sym(name) => super::named::free_dim_size(name).unwrap_or(SYM_DIM) as usize,
            })
            .collect();
        let n: usize = dims.iter().product();
        total = total.saturating_add(n.saturating_mul(ty.dtype.size().unwrap_or(8)));
        anyhow::ensure!(
            total <= super::worker::MAX_INPUT_BYTES,
            "inputs would exceed {} bytes (input '{name}' has shape {dims:?})",
            super::worker::MAX_INPUT_BYTES
        );
        if ty.dtype == DType::Str {
            let data = (0..n).map(|i| format!("s{}", i % 3).into_bytes()).collect();
            let tensor = Tensor {
                dtype: DType::Str,
                dims: dims.iter().map(|&d| d as i64).collect(),
                data: crate::graph::TensorData::Strings(data),
            };
            out.push(NamedTensor { name: name.clone(), tensor });
            continue;
        }
        anyhow::ensure!(ty.dtype.size().is_some(), "graph input '{name}' has unsupported type {}", ty.dtype);
        let range = range_for(g, name);
        let vals: Vec<f64> = (0..n).map(|_| value(&mut rng, ty.dtype, range)).collect();
        out.push(NamedTensor { name: name.clone(), tensor: Tensor::from_f64s(ty.dtype, &dims, &vals) });
    }
    Ok(out)
}

fn value(rng: &mut rand_chacha::ChaCha8Rng, dtype: DType, range: Range) -> f64 {
    match (range, dtype) {
        (Range::Index, _) => 0.0,
        (Range::Mask, _) => rng.random_range(0..2) as f64,
        (Range::Ratio, _) => rng.random_range(0.0..0.5),
        (_, DType::Bool) => rng.random_range(0..2) as f64,
        (Range::Positive, d) if d.is_float() => {
            if rng.random_bool(0.1) {
                1.0
            } else {
                rng.random_range(0.125..4.0)
            }
        }
        (Range::Positive, _) => rng.random_range(1..8) as f64,
        (Range::Any, d) if d.is_float() => {
            const EDGE: [f64; 5] = [0.0, 1.0, -1.0, 0.5, -0.0];
            if rng.random_bool(0.1) {
                EDGE[rng.random_range(0..EDGE.len())]
            } else {
                (rng.random_range(-4.0..4.0f64) * 256.0).round() / 256.0
            }
        }
        (Range::Any, d) if d.is_signed() => rng.random_range(-8..8) as f64,
        (Range::Any, _) => rng.random_range(0..8) as f64,
    }
}

/// Reads inputs from a directory of ONNX TensorProto files (`input_0.pb`, ... as in ONNX test data sets) or
/// from one `.pb` file. Tensors without a name take the graph's non-initializer inputs in order.
pub fn read(path: &Path, g: &Graph) -> anyhow::Result<Vec<NamedTensor>> {
    let mut files: Vec<std::path::PathBuf> = if path.is_dir() {
        std::fs::read_dir(path)
            .with_context(|| format!("cannot list {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|x| x == "pb")
                    && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("input"))
            })
            .collect()
    } else {
        vec![path.to_path_buf()]
    };
    files.sort_by_key(|p| {
        let s = p.file_stem().unwrap_or_default().to_string_lossy().to_string();
        (s.rsplit('_').next().and_then(|k| k.parse::<u64>().ok()).unwrap_or(u64::MAX), s)
    });
    let names: Vec<&String> = g.inputs.iter().filter(|n| !g.initializers.contains_key(*n)).collect();
    // a model without inputs (a bug directory of a constant-only model) takes none
    anyhow::ensure!(!files.is_empty() || names.is_empty(), "{}: no input_*.pb files", path.display());
    files
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let bytes = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
            let (name, tensor) =
                onnx::decode_tensor(&bytes).with_context(|| format!("{}: not a TensorProto", f.display()))?;
            let name = if name.is_empty() {
                names
                    .get(k)
                    .map(|s| s.to_string())
                    .with_context(|| format!("{}: more inputs than the model takes", f.display()))?
            } else {
                name
            };
            Ok(NamedTensor { name, tensor })
        })
        .collect()
}

/// Writes tensors as `<prefix>_K.pb` files into `dir` (atomically each).
pub fn write(dir: &Path, prefix: &str, tensors: &[NamedTensor]) -> anyhow::Result<()> {
    for (k, t) in tensors.iter().enumerate() {
        crate::util::write_atomic(&dir.join(format!("{prefix}_{k}.pb")), &onnx::encode_tensor(&t.name, &t.tensor))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Attr, Node, OpId, TensorType};

    /// An input read as Gather indices inside an If branch gets valid indices, as one read at the top level does.
    #[test]
    fn inputs_read_inside_a_body_get_the_range_the_body_needs() {
        let mut then = Graph::new("then");
        then.add_node(Node::new("g", OpId::onnx("Gather"), vec!["x".into(), "idx".into()], vec!["y".into()])).unwrap();
        then.add_output("y", TensorType::new(DType::F32, &[3]));
        let mut els = Graph::new("else");
        els.add_node(Node::new("i", OpId::onnx("Identity"), vec!["x".into()], vec!["e".into()])).unwrap();
        els.add_output("e", TensorType::new(DType::F32, &[3]));
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[3]));
        g.add_input("idx", TensorType::new(DType::I64, &[3]));
        g.add_input("c", TensorType::new(DType::Bool, &[]));
        let node = Node::new("if", OpId::onnx("If"), vec!["c".into()], vec!["o".into()])
            .with_attr("then_branch", Attr::Graph(Box::new(then)))
            .with_attr("else_branch", Attr::Graph(Box::new(els)));
        g.add_node(node).unwrap();
        g.add_output("o", TensorType::new(DType::F32, &[3]));
        assert_eq!(range_for(&g, "idx"), Range::Index);
        assert_eq!(range_for(&g, "x"), Range::Any);
        for seed in 0..20 {
            let feeds = generate(&g, seed).unwrap();
            let idx = feeds.iter().find(|f| f.name == "idx").unwrap();
            assert!(idx.tensor.to_i64s().unwrap().iter().all(|&i| i == 0), "seed {seed}");
        }
    }

    /// BERT's mask idiom, `(1 - Cast(Unsqueeze(mask))) * -10000`: the mask gets 0/1 values, the other input any.
    #[test]
    fn an_attention_mask_gets_zeros_and_ones() {
        let mut g = Graph::new("g");
        g.add_input("mask", TensorType::new(DType::I64, &[2, 3]));
        g.add_input("x", TensorType::new(DType::I64, &[2, 1, 3]));
        g.add_initializer("one", crate::graph::Tensor::from_f32(&[], &[1.0]));
        g.add_initializer("axes", crate::graph::Tensor::from_i64(&[1], &[1]));
        g.add_node(Node::new("u", OpId::onnx("Unsqueeze"), vec!["mask".into(), "axes".into()], vec!["m1".into()]))
            .unwrap();
        let cast =
            Node::new("c", OpId::onnx("Cast"), vec!["m1".into()], vec!["m2".into()]).with_attr("to", Attr::Int(1));
        g.add_node(cast).unwrap();
        g.add_node(Node::new("s", OpId::onnx("Sub"), vec!["one".into(), "m2".into()], vec!["y".into()])).unwrap();
        g.add_node(Node::new("a", OpId::onnx("Add"), vec!["x".into(), "x".into()], vec!["z".into()])).unwrap();
        g.add_output("y", TensorType::new(DType::F32, &[2, 1, 3]));
        g.add_output("z", TensorType::new(DType::I64, &[2, 1, 3]));
        assert_eq!(range_for(&g, "mask"), Range::Mask);
        assert_eq!(range_for(&g, "x"), Range::Any);
        let (mut masks, mut others) = (Vec::new(), Vec::new());
        for seed in 0..20 {
            let feeds = generate(&g, seed).unwrap();
            masks.extend(feeds.iter().find(|f| f.name == "mask").unwrap().tensor.to_i64s().unwrap());
            others.extend(feeds.iter().find(|f| f.name == "x").unwrap().tensor.to_i64s().unwrap());
        }
        assert!(masks.iter().all(|&m| m == 0 || m == 1) && masks.contains(&0) && masks.contains(&1), "{masks:?}");
        assert!(others.iter().any(|&v| v != 0 && v != 1), "only the mask is narrowed");
    }
}
