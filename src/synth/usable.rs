//! Which ONNX patterns a campaign can use: each library pattern is checked in workers the way synthesis will use
//! it (made concrete and shrunk to small ports, not random by the spec, still firing its pass at the seeds'
//! opset). Relax patterns are checked by `relax_usable`.

/// Patterns larger than this are left out of synthesis: their sessions cost more than they add; but a pass none
/// of whose patterns is that small keeps its smallest ones up to [`MAX_ALONE_NODES`] (AttentionFusion's context
/// patterns hold 35 nodes), so that no pass is lost to the limit alone.
const MAX_PATTERN_NODES: usize = 32;
const MAX_ALONE_NODES: usize = 48;
const MAX_PATTERN_CONST_BYTES: usize = 64 << 10;
/// The same for constants: a pass none of whose patterns is within [`MAX_PATTERN_CONST_BYTES`] keeps its
/// smallest up to this (ort-transformers' conformer attention patterns carry 65-66 KiB of weights).
const MAX_ALONE_CONST_BYTES: usize = 128 << 10;
const MAX_PORT_ELEMS: usize = 8192;
/// The lowest ai.onnx opset a pattern that no longer fires at the seeds' opset is kept at (its tests are written
/// at its own opset, into seeds without the ops whose signature changed since and through bridges of the forms
/// that opset has): ONNX Runtime's oldest, 7 (UnsqueezeElimination matches only the attribute form of Unsqueeze,
/// before 13; AttentionFusion's patterns fuse only at their own opset 9).
pub const MIN_OWN_OPSET: i64 = 7;

/// Symbolic and empty dims (a captured model's batch size, which extraction ran as 0) fixed to 1 in a pattern's
/// graph inputs and outputs and its ports, so that it can be fed and spliced; inner values declared with such
/// dims lose that declaration. Verification then tells whether the pattern still fires.
fn concretize(p: &mut crate::pattern::Pattern) {
    use crate::graph::{Dim, TensorType, ValueType};
    let free = |d: &Dim| matches!(d, Dim::Sym(_) | Dim::Fixed(0));
    let symbolic = |t: &TensorType| t.shape.as_ref().is_some_and(|s| s.iter().any(free));
    let fix = |t: &mut TensorType| {
        for d in t.shape.iter_mut().flatten().filter(|d| free(d)) {
            *d = Dim::Fixed(1);
        }
    };
    let g = &mut p.model.graph;
    let io: Vec<String> = g.inputs.iter().chain(&g.outputs).cloned().collect();
    g.types.retain(|n, vt| io.contains(n) || !matches!(vt, ValueType::Tensor(t) if symbolic(t)));
    for n in &io {
        if let Some(ValueType::Tensor(t)) = g.types.get_mut(n) {
            fix(t);
        }
    }
    for port in p.meta.inputs.iter_mut().chain(p.meta.outputs.iter_mut()) {
        fix(&mut port.ty);
    }
}

/// A pattern whose ports exceed [`MAX_PORT_ELEMS`] with its inputs' spatial dims (from the third on) cut to 8 and,
/// if still too large, the first dim to 1, then the spatial dims to 4 (3-D convolutions of 64 channels), its
/// outputs re-inferred by the op catalog (every op must be known);
/// false, and the pattern unchanged, when that is not possible. Verification then tells whether it still fires.
fn shrink(p: &mut crate::pattern::Pattern) -> bool {
    use crate::graph::{Dim, ValueType};
    let too_big = |p: &crate::pattern::Pattern| {
        p.meta.inputs.iter().chain(&p.meta.outputs).any(|port| port.ty.numel().is_some_and(|n| n > MAX_PORT_ELEMS))
    };
    if !too_big(p) {
        return false;
    }
    let mut g = p.model.graph.clone();
    for round in 0..3 {
        for name in g.inputs.clone() {
            let Some(ValueType::Tensor(t)) = g.types.get_mut(&name) else { continue };
            for (k, d) in t.shape.iter_mut().flatten().enumerate() {
                match (round, k, &d) {
                    (0, 2.., Dim::Fixed(n)) if *n > 8 => *d = Dim::Fixed(8),
                    (1, 0, Dim::Fixed(n)) if *n > 1 => *d = Dim::Fixed(1),
                    (2, 2.., Dim::Fixed(n)) if *n > 4 => *d = Dim::Fixed(4),
                    _ => {}
                }
            }
        }
        let inputs = g.inputs.clone();
        g.types.retain(|n, _| inputs.contains(n));
        let Ok(types) = crate::ops::infer_types(&g, true) else { return false };
        for o in g.outputs.clone() {
            let Some(t) = types.get(&o) else { return false };
            g.types.insert(o, t.clone().into());
        }
        let mut q = p.clone();
        q.model.graph = g.clone();
        for port in q.meta.inputs.iter_mut().chain(q.meta.outputs.iter_mut()) {
            match q.model.graph.tensor_type(&port.name) {
                Some(t) => port.ty = t,
                None => return false,
            }
        }
        if !too_big(&q) {
            *p = q;
            return true;
        }
    }
    false
}

/// Whether a pattern's results are random by the ONNX spec (a Dropout in training mode, the Random* ops): its
/// unoptimized run is no reference, and an optimizer that removes the randomness (ORT's inference build drops
/// every Dropout) would be reported as computing wrong results.
fn random(p: &crate::pattern::Pattern) -> bool {
    let g = &p.model.graph;
    g.node_ids().map(|id| g.node(id)).any(|n| match n.op.name.as_str() {
        "RandomNormal" | "RandomNormalLike" | "RandomUniform" | "RandomUniformLike" | "Bernoulli" | "Multinomial" => {
            true
        }
        "Dropout" => n.inputs.get(2).is_some_and(|t| {
            !t.is_empty()
                && g.initializers.get(t).and_then(|v| v.raw().map(|r| r.iter().all(|b| *b == 0))) != Some(true)
        }),
        _ => false,
    })
}

/// Whether a pattern's unoptimized run works on generated inputs (two draws): one whose open inputs decide shapes
/// (an Expand's shape computed from one) fails its reference on most values, and every test of it is invalid.
fn runs_clean(w: &mut crate::compiler::worker::Worker, p: &crate::pattern::Pattern) -> bool {
    use crate::compiler::{Config, Level, Status};
    let Ok(bytes) = p.encode() else { return false };
    (1..=2).all(|seed| {
        let Ok(feeds) = crate::compiler::inputs::generate(&p.model.graph, seed) else { return false };
        w.run(&bytes, &feeds, &Config::level(Level::Disable)).status == Status::Ok
    })
}

/// A pattern kept at its own opset, if it fires there, with the type of every inner value declared (from one
/// run): the catalog follows opset-20 signatures, so synthesis takes the types of its ops that changed since
/// (ReduceMean's axes attribute before 18) from these declarations instead of inferring them.
fn own_opset_usable(
    w: &mut crate::compiler::worker::Worker,
    mut p: crate::pattern::Pattern,
) -> Option<crate::pattern::Pattern> {
    if !crate::pattern::extract::verify(w, &p) || !runs_clean(w, &p) {
        return None;
    }
    let feeds = crate::compiler::inputs::generate(&p.model.graph, 0).ok()?;
    let mut types: Vec<_> = crate::pattern::extract::value_types(w, &p.model, &feeds).into_iter().collect();
    types.sort_by(|a, b| a.0.cmp(&b.0)); // in name order: the tests' bytes must not depend on a hash map's
    let g = &mut p.model.graph;
    for (n, t) in types {
        if !g.inputs.contains(&n) && !g.outputs.contains(&n) && !g.initializers.contains_key(&n) {
            g.types.entry(n).or_insert(t.into());
        }
    }
    Some(p)
}

fn constant_bytes(p: &crate::pattern::Pattern) -> usize {
    p.model.graph.initializers.values().map(|t| t.raw().map_or(0, |r| r.len())).sum()
}

/// The patterns of a library that still fire their pass when placed in a model of ai.onnx opset `opset`
/// (seeds are written at that opset): each is bumped to max(its opset, `opset`), its symbolic port dims fixed to
/// 1, shrunk when its ports are too large, and verified in a worker (patterns whose results are random by the
/// spec, [`random`], and those whose unoptimized run fails on generated inputs, [`runs_clean`], are left out);
/// one that does not fire bumped but does at its own opset (at least
/// [`MIN_OWN_OPSET`]) is kept at its own opset. Also returns the passes none of whose
/// patterns is usable, each with why (`too large`, `do not fire at opset N or fail their unoptimized run`).
pub fn usable_ort_patterns(
    spec: &crate::compiler::worker::WorkerSpec,
    jobs: usize,
    patterns: Vec<crate::pattern::Pattern>,
    opset: i64,
) -> anyhow::Result<(Vec<crate::pattern::Pattern>, Vec<(String, String)>)> {
    let pool = crate::compiler::worker::Pool::start(spec, jobs.clamp(1, patterns.len().max(1)))?;
    let mut why: std::collections::BTreeMap<String, [usize; 3]> = Default::default();
    let mut fewest: std::collections::HashMap<String, usize> = Default::default();
    let mut least: std::collections::HashMap<String, usize> = Default::default();
    for p in &patterns {
        let n = fewest.entry(p.meta.pass.clone()).or_insert(usize::MAX);
        *n = (*n).min(p.model.graph.node_count());
        let c = least.entry(p.meta.pass.clone()).or_insert(usize::MAX);
        *c = (*c).min(constant_bytes(p));
    }
    let small = |p: &crate::pattern::Pattern| {
        let nodes = p.model.graph.node_count();
        (nodes <= MAX_PATTERN_NODES || (nodes <= MAX_ALONE_NODES && fewest.get(&p.meta.pass) == Some(&nodes)))
            && (constant_bytes(p) <= MAX_PATTERN_CONST_BYTES
                || (constant_bytes(p) <= MAX_ALONE_CONST_BYTES && least.get(&p.meta.pass) == Some(&constant_bytes(p))))
            && p.meta
                .inputs
                .iter()
                .chain(&p.meta.outputs)
                .all(|port| port.ty.numel().is_some_and(|n| n > 0 && n <= MAX_PORT_ELEMS))
    };
    let mut bumped = Vec::new();
    let mut own_opset = Vec::new();
    for mut p in patterns {
        concretize(&mut p);
        shrink(&mut p);
        let e = why.entry(p.meta.pass.clone()).or_default();
        e[0] += 1;
        if !small(&p) || random(&p) {
            e[1] += 1;
            continue;
        }
        let old = p.model.opsets.remove("ai.onnx");
        let own = *p.model.opsets.entry(String::new()).or_insert(old.unwrap_or(opset));
        own_opset.push((own >= MIN_OWN_OPSET && own < opset).then(|| p.clone()));
        p.model.opsets.insert(String::new(), own.max(opset));
        bumped.push(p);
    }
    // a pattern that fires only at its own opset (at least MIN_OWN_OPSET) is kept there: its tests are written at
    // that opset, with seeds that avoid the newer ops (SynthSource)
    let verified = pool.map(bumped, |w, p| match crate::pattern::extract::verify(w, &p) && runs_clean(w, &p) {
        true => Ok(p),
        false => Err(()),
    });
    let retry: Vec<crate::pattern::Pattern> =
        verified.iter().zip(own_opset).filter_map(|(v, own)| own.filter(|_| v.is_err())).collect();
    let mut ok: Vec<crate::pattern::Pattern> = verified.into_iter().flatten().collect();
    ok.extend(pool.map(retry, own_opset_usable).into_iter().flatten());
    for p in &ok {
        why.entry(p.meta.pass.clone()).or_default()[2] += 1;
    }
    let lost = why
        .into_iter()
        .filter(|(_, [_, _, usable])| *usable == 0)
        .map(|(pass, [total, big, _])| {
            let reason = match big {
                0 => format!("{total} do not fire at opset {opset} or fail their unoptimized run"),
                b if b == total => format!("{total} too large, without static ports or random"),
                b => format!("{b} too large or random, {} do not fire at opset {opset} or fail unoptimized", total - b),
            };
            (pass, reason)
        })
        .collect();
    Ok((ok, lost))
}

#[cfg(test)]
mod tests {
    #[test]
    fn symbolic_and_empty_port_dims_become_one_and_inner_declarations_using_them_go() {
        use crate::graph::{DType, Dim, Graph, Model, Node, OpId, TensorType};
        use crate::pattern::{abstract_type, Granularity, Pattern, PatternMeta, Port};
        let ty =
            TensorType { dtype: DType::F32, shape: Some(vec![Dim::Sym("N".into()), Dim::Fixed(0), Dim::Fixed(4)]) };
        let mut g = Graph::new("p");
        g.add_input("x", ty.clone());
        g.add_node(Node::new("a", OpId::onnx("Abs"), vec!["x".into()], vec!["a".into()])).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["a".into()], vec!["y".into()])).unwrap();
        g.types.insert("a".into(), ty.clone().into());
        g.types.insert("kept".into(), TensorType::new(DType::F32, &[2]).into());
        g.add_output("y", ty.clone());
        let port = |n: &str| Port { name: n.into(), ty: ty.clone(), abstract_ty: abstract_type(&ty, &[]) };
        let meta = PatternMeta {
            format: 1,
            compiler: "ort".into(),
            compiler_version: "x".into(),
            pass: "P".into(),
            granularity: Granularity::Block,
            inputs: vec![port("x")],
            outputs: vec![port("y")],
            provenance: vec![],
            key: String::new(),
        };
        let mut p = Pattern { model: Model::new(g), meta };
        super::concretize(&mut p);
        let fixed = TensorType::new(DType::F32, &[1, 1, 4]);
        let g = &p.model.graph;
        assert_eq!((g.tensor_type("x"), g.tensor_type("y")), (Some(fixed.clone()), Some(fixed.clone())));
        assert_eq!(p.meta.inputs[0].ty.numel(), Some(4));
        assert!(!g.types.contains_key("a") && g.types.contains_key("kept"));
    }

    #[test]
    fn a_dropout_in_training_mode_makes_a_pattern_random() {
        use crate::graph::{DType, Graph, Model, Node, OpId, Tensor, TensorType};
        use crate::pattern::{Granularity, Pattern, PatternMeta};
        let with_mode = |mode: Option<bool>| {
            let mut g = Graph::new("p");
            g.add_input("x", TensorType::new(DType::F32, &[2]));
            let mut ins = vec!["x".to_string()];
            if let Some(m) = mode {
                g.add_initializer("ratio", Tensor::from_f32(&[], &[0.5]));
                g.add_initializer(
                    "mode",
                    Tensor { dtype: DType::Bool, dims: vec![], data: crate::graph::TensorData::Raw(vec![m as u8]) },
                );
                ins.extend(["ratio".to_string(), "mode".to_string()]);
            }
            g.add_node(Node::new("d", OpId::onnx("Dropout"), ins, vec!["y".into()])).unwrap();
            g.add_output("y", TensorType::new(DType::F32, &[2]));
            let meta = PatternMeta {
                format: 1,
                compiler: "ort".into(),
                compiler_version: "x".into(),
                pass: "EliminateDropout".into(),
                granularity: Granularity::Block,
                inputs: vec![],
                outputs: vec![],
                provenance: vec![],
                key: String::new(),
            };
            Pattern { model: Model::new(g), meta }
        };
        assert!(super::random(&with_mode(Some(true))), "training mode: random by the spec");
        assert!(!super::random(&with_mode(Some(false))));
        assert!(!super::random(&with_mode(None)), "no training_mode input: inference");
    }
}
