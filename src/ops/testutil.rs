//! Test helpers for op specs: sample a spec many times in a small context and check inference accepts it.

use super::draft::Limits;
use super::{infer_node, Draft, Fact, OpSpec, Rng, Value};
use crate::graph::{DType, Tensor, TensorType};
use rand::SeedableRng;
use std::collections::HashMap;

/// The inference fact of a value of type `d[s]` without a known value.
pub fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
    Some(Fact { ty: TensorType::new(d, s), value: None })
}

/// A context with a few values of common types.
pub fn context() -> Vec<Value> {
    let v = |n: &str, d: DType, s: &[usize]| Value { name: n.into(), ty: TensorType::new(d, s) };
    vec![
        v("a", DType::F32, &[2, 3, 4, 4]),
        v("b", DType::F32, &[3, 4]),
        v("c", DType::I64, &[2, 3]),
        v("d", DType::Bool, &[3, 4]),
        v("e", DType::F16, &[]),
        v("f", DType::U8, &[4]),
    ]
}

/// Samples `spec` `n` times; returns how many proposals were made. Every proposal must infer.
pub fn sample_many(spec: &dyn OpSpec, n: usize) -> usize {
    let values = context();
    let consts: HashMap<String, Tensor> = HashMap::new();
    let mut rng = Rng::seed_from_u64(1);
    let mut made = 0;
    let mut counter = 0;
    for _ in 0..n {
        let mut d = Draft::new(&values, &consts, Limits::default(), &mut counter);
        let Ok(p) = spec.sample(&mut d, &mut rng) else {
            continue;
        };
        let facts: Vec<Option<Fact>> = p
            .inputs
            .iter()
            .map(|i| {
                if i.is_empty() {
                    None
                } else {
                    Some(d.fact(i).unwrap_or_else(|| panic!("{}: unknown input {i}", spec.name())))
                }
            })
            .collect();
        if let Err(e) = infer_node(spec, &facts, &p.attrs, p.outputs) {
            panic!("{}: a sampled proposal does not infer: {e}\n{p:?}", spec.name());
        }
        made += 1;
    }
    made
}

/// A graph reading bool `c` whose one If node (`if`) runs `body` in both branches, its result `o` (not a graph
/// output): a test of what oatest sees inside bodies.
pub fn if_of(body: crate::graph::Graph) -> crate::graph::Graph {
    use crate::graph::{Attr, Graph, Node, OpId};
    let mut g = Graph::new("g");
    g.add_input("c", TensorType::new(DType::Bool, &[]));
    let node = Node::new("if", OpId::onnx("If"), vec!["c".into()], vec!["o".into()])
        .with_attr("then_branch", Attr::Graph(Box::new(body.clone())))
        .with_attr("else_branch", Attr::Graph(Box::new(body)));
    g.add_node(node).expect("one If node");
    g
}
