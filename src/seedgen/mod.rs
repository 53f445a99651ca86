//! Random seed graphs, valid by construction: forward construction from the op catalog with rollback
//! (NNSmith / MLIRSmith style). Every proposal is sampled by its spec, inferred, size-checked, and only then
//! applied; a rejected proposal leaves no trace.

use crate::graph::{DType, Graph, Model, Node, OpId, Tensor, TensorType};
use crate::ops::{infer_node, random_type, registry, Draft, Fact, Limits, OpSpec, Proposal, Rng, Value};
use rand::{Rng as _, SeedableRng};
use std::collections::{HashMap, HashSet};

mod control;

/// What to generate.
#[derive(Clone, Debug)]
pub struct SeedConfig {
    pub min_nodes: usize,
    pub max_nodes: usize,
    pub limits: Limits,
    pub ir_version: i64,
    pub opset: i64,
    /// (op, dtype) pairs the target cannot run (a node of that op with an input or output of that dtype is
    /// never added; `None` avoids the op). Empty for ONNX Runtime, whose CPU dtypes the op specs already follow.
    pub avoid: Vec<(String, Option<DType>)>,
    /// Also ONNX Runtime's contrib ops (`com.microsoft`); the model then imports that domain. Off: the seeds are
    /// exactly those of a catalog without contrib ops.
    pub contrib: bool,
    /// Share of seeds that hold one control-flow node (If, Loop or Scan) whose bodies are generated too and read
    /// values of the enclosing graph (`control.rs`). 0: the seeds are exactly those without control flow.
    pub control_flow: f64,
}

impl Default for SeedConfig {
    fn default() -> Self {
        SeedConfig {
            min_nodes: 3,
            max_nodes: 10,
            limits: Limits::default(),
            ir_version: crate::graph::DEFAULT_IR_VERSION,
            opset: crate::graph::DEFAULT_OPSET,
            avoid: Vec::new(),
            contrib: false,
            control_flow: 0.0,
        }
    }
}

impl SeedConfig {
    /// The same configuration for a graph written at ai.onnx `opset` (below the catalog's 20): the ops whose
    /// signature is newer than `opset` are avoided (`ops::since`), and so is control flow when If, Loop or Scan
    /// is (Scan took no batch dim before 9).
    pub fn at_opset(&self, opset: i64) -> SeedConfig {
        let mut c = self.clone();
        c.opset = opset;
        let newer = crate::ops::since::newer_than(opset);
        if newer.iter().any(|op| matches!(*op, "If" | "Loop" | "Scan")) {
            c.control_flow = 0.0;
        }
        c.avoid.extend(newer.into_iter().map(|op| (op.to_string(), None)));
        c
    }
}

/// dtypes of the first graph inputs (float32 most often).
const INPUT_DTYPES: &[DType] = &[
    DType::F32,
    DType::F32,
    DType::F32,
    DType::F64,
    DType::F16,
    DType::I8,
    DType::U8,
    DType::I32,
    DType::I64,
    DType::Bool,
];

/// The rng of test `index` in a campaign with seed `seed`: independent streams, so any one test regenerates alone.
pub fn rng_for(seed: u64, index: u64) -> Rng {
    let mut r = Rng::seed_from_u64(seed);
    r.set_stream(index);
    r
}

/// A graph under construction.
struct Builder {
    values: Vec<Value>,
    consts: HashMap<String, Tensor>,
    inputs: Vec<Value>,
    nodes: Vec<Node>,
    /// Node outputs, in creation order.
    produced: Vec<Value>,
    counter: u64,
    limits: Limits,
    /// Prefix of node and value names (a body's, so names stay unique across the model's graphs).
    prefix: String,
    /// A body: proposals that would add a graph input are refused (a body reads the enclosing scope instead).
    closed: bool,
}

impl Builder {
    fn new(limits: Limits) -> Builder {
        Builder {
            values: Vec::new(),
            consts: HashMap::new(),
            inputs: Vec::new(),
            nodes: Vec::new(),
            produced: Vec::new(),
            counter: 0,
            limits,
            prefix: String::new(),
            closed: false,
        }
    }

    /// Samples one node of `spec`; applies it only if it infers and stays small.
    fn try_add(&mut self, spec: &dyn OpSpec, rng: &mut Rng, avoid: &[(String, Option<DType>)]) -> bool {
        let mut draft = Draft::new(&self.values, &self.consts, self.limits, &mut self.counter);
        let Ok(p) = spec.sample(&mut draft, rng) else {
            return false;
        };
        let Some(out) = infer_proposal(spec, &draft, &p) else {
            return false;
        };
        if avoid.iter().any(|(op, _)| op == spec.name()) {
            let dtypes: Vec<DType> = p
                .inputs
                .iter()
                .filter_map(|i| draft.fact(i).map(|f| f.ty.dtype))
                .chain(out.iter().map(|t| t.dtype))
                .collect();
            if avoid.iter().any(|(op, d)| op == spec.name() && d.is_none_or(|d| dtypes.contains(&d))) {
                return false;
            }
        }
        if out.iter().any(|t| t.numel().is_none_or(|n| n == 0 || n > self.limits.max_elems)) {
            return false;
        }
        if self.closed && !draft.new_inputs.is_empty() {
            return false;
        }
        let (new_consts, new_inputs) = (draft.new_consts, draft.new_inputs);
        self.consts.extend(new_consts.iter().cloned());
        // empty constants (e.g. no axes) are inputs of their node only, never data for later nodes
        self.values
            .extend(new_consts.into_iter().filter(|(_, t)| t.numel() > 0).map(|(name, t)| Value { name, ty: t.ty() }));
        self.values.extend(new_inputs.iter().cloned());
        self.inputs.extend(new_inputs);
        let (k, pre) = (self.nodes.len(), &self.prefix);
        let outputs: Vec<String> = (0..out.len()).map(|i| format!("{pre}t{k}_{i}")).collect();
        let mut node = Node::new(
            format!("{pre}n{k}_{}", spec.name()),
            OpId { domain: spec.domain().into(), name: spec.name().into() },
            p.inputs,
            outputs.clone(),
        );
        node.attrs = p.attrs;
        self.nodes.push(node);
        let outs: Vec<Value> = outputs.into_iter().zip(out).map(|(name, ty)| Value { name, ty }).collect();
        self.values.extend(outs.iter().cloned());
        self.produced.extend(outs);
        true
    }

    /// The finished model: unconsumed node outputs (and sometimes a consumed one) become graph outputs;
    /// unused inputs and constants are dropped.
    fn finish(self, rng: &mut Rng, cfg: &SeedConfig) -> Option<Model> {
        let used: HashSet<String> = self.nodes.iter().flat_map(|n| n.reads()).collect();
        let produced: Vec<&Value> = self.produced.iter().collect();
        let mut outputs: Vec<&Value> =
            produced.iter().copied().filter(|v| !used.contains(v.name.as_str()) || rng.random_bool(0.1)).collect();
        if outputs.is_empty() {
            outputs.push(produced.last()?);
        }
        let mut g = Graph::new("oatest_seed");
        for v in self.inputs.iter().filter(|v| used.contains(v.name.as_str())) {
            g.add_input(&v.name, v.ty.clone());
        }
        let mut consts: Vec<(&String, &Tensor)> =
            self.consts.iter().filter(|(n, _)| used.contains(n.as_str())).collect();
        consts.sort_by_key(|(n, _)| n[1..].parse::<u64>().unwrap_or(0));
        for (n, t) in consts {
            g.add_initializer(n, t.clone());
        }
        for node in self.nodes {
            g.add_node(node).ok()?;
        }
        let out_names: HashSet<&str> = outputs.iter().map(|v| v.name.as_str()).collect();
        for v in &produced {
            if !out_names.contains(v.name.as_str()) && used.contains(v.name.as_str()) {
                g.types.insert(v.name.clone(), v.ty.clone().into());
            }
        }
        for v in outputs {
            g.add_output(&v.name, v.ty.clone());
        }
        let mut m = Model::new(g);
        m.ir_version = cfg.ir_version;
        m.opsets.insert(String::new(), cfg.opset);
        if m.graph.node_ids().any(|id| m.graph.node(id).op.domain == crate::graph::MS_DOMAIN) {
            m.opsets.insert(crate::graph::MS_DOMAIN.to_string(), 1);
        }
        Some(m)
    }
}

fn infer_proposal(spec: &dyn OpSpec, draft: &Draft, p: &Proposal) -> Option<Vec<TensorType>> {
    let facts: Option<Vec<Option<Fact>>> =
        p.inputs.iter().map(|i| if i.is_empty() { Some(None) } else { draft.fact(i).map(Some) }).collect();
    infer_node(spec, &facts?, &p.attrs, p.outputs).ok()
}

/// One random seed graph. Deterministic in (`seed`, `index`).
pub fn generate(seed: u64, index: u64, cfg: &SeedConfig) -> Model {
    let mut rng = rng_for(seed, index);
    loop {
        if let Some(m) = attempt(&mut rng, cfg) {
            return m;
        }
    }
}

fn attempt(rng: &mut Rng, cfg: &SeedConfig) -> Option<Model> {
    let reg: Vec<&Box<dyn OpSpec>> = registry().iter().filter(|s| cfg.contrib || !s.contrib()).collect();
    let target = rng.random_range(cfg.min_nodes..=cfg.max_nodes.max(cfg.min_nodes));
    let mut b = Builder::new(cfg.limits);
    for _ in 0..rng.random_range(1..=2) {
        let dtype = INPUT_DTYPES[rng.random_range(0..INPUT_DTYPES.len())];
        let ty = random_type(rng, &[dtype], 0..=4, cfg.limits.max_elems);
        b.counter += 1;
        let v = Value { name: format!("x{}", b.counter), ty };
        b.values.push(v.clone());
        b.inputs.push(v);
    }
    let mut tries = 0;
    // where a control-flow node goes, if this seed has one (drawn only when asked, so other seeds are unchanged)
    let mut control_at = (cfg.control_flow > 0.0 && rng.random_bool(cfg.control_flow.min(1.0)))
        .then(|| rng.random_range(0..target.max(1)));
    while b.nodes.len() < target && tries < target * 30 {
        tries += 1;
        if control_at.is_some_and(|at| b.nodes.len() >= at) && control::add(&mut b, rng, cfg, &reg) {
            control_at = None;
            continue;
        }
        let spec = reg[rng.random_range(0..reg.len())].as_ref();
        b.try_add(spec, rng, &cfg.avoid);
    }
    if b.nodes.is_empty() {
        return None;
    }
    b.finish(rng, cfg)
}

/// A model with a single node of `spec` whose inputs are all fresh graph inputs or constants; `None` if the
/// spec rejected every attempt. Used to check each spec's inference against a real runtime.
pub fn single_op(spec: &dyn OpSpec, rng: &mut Rng, cfg: &SeedConfig) -> Option<Model> {
    for _ in 0..50 {
        let mut b = Builder::new(Limits { fresh_input: 1.0, ..cfg.limits });
        if b.try_add(spec, rng, &cfg.avoid) {
            return b.finish(rng, cfg);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_of_seeds_generate_valid_graphs() {
        let cfg = SeedConfig::default();
        for seed in [0, 7, 8, 9] {
            for i in 0..1500 {
                let m = generate(seed, i, &cfg);
                crate::ops::check_graph(&m.graph, true).unwrap_or_else(|e| panic!("seed {seed}/{i}: {e}"));
            }
        }
    }

    #[test]
    fn seeds_at_an_older_opset_declare_it_and_hold_no_newer_op() {
        // down to ONNX Runtime's oldest opset, 7: fewer ops, no control flow below 16, never an empty graph
        for (opset, varied) in [(16, 20), (12, 15), (7, 8)] {
            let cfg = SeedConfig { contrib: true, control_flow: 0.5, ..Default::default() }.at_opset(opset);
            let newer = crate::ops::since::newer_than(opset);
            let mut ops = HashSet::new();
            for i in 0..300 {
                let m = generate(3, i, &cfg);
                assert_eq!(m.opset(), opset);
                let nodes = m.graph.nodes_in_order().unwrap();
                assert!(!nodes.is_empty(), "opset {opset}, seed {i}: no node");
                for n in nodes {
                    assert!(
                        !newer.contains(&n.op.name.as_str()),
                        "seed {i}: {} is newer than opset {opset}",
                        n.op.name
                    );
                    ops.insert(n.op.name.clone());
                }
            }
            assert!(ops.len() > varied, "opset {opset}: still a varied catalog: {ops:?}");
            let control = ["If", "Loop", "Scan"].iter().any(|op| ops.contains(*op));
            assert_eq!(
                control,
                opset >= 16,
                "opset {opset}: control flow only where If, Loop and Scan have their form"
            );
        }
    }

    #[test]
    fn avoided_ops_and_dtypes_never_appear() {
        let cfg = SeedConfig {
            avoid: vec![("Relu".into(), None), ("Add".into(), Some(DType::F32)), ("Mul".into(), Some(DType::F16))],
            ..Default::default()
        };
        let (mut adds, mut muls) = (0, 0);
        for i in 0..800 {
            let m = generate(5, i, &cfg);
            let g = &m.graph;
            let types = crate::ops::check_graph(g, true).unwrap();
            for n in g.nodes_in_order().unwrap() {
                let dtypes: Vec<DType> =
                    n.inputs.iter().chain(&n.outputs).filter_map(|v| types.get(v).map(|t| t.dtype)).collect();
                assert_ne!(n.op.name, "Relu", "seed {i}");
                if n.op.name == "Add" {
                    adds += 1;
                    assert!(!dtypes.contains(&DType::F32), "seed {i}: float32 Add");
                }
                if n.op.name == "Mul" {
                    muls += 1;
                    assert!(!dtypes.contains(&DType::F16), "seed {i}: float16 Mul");
                }
            }
        }
        assert!(adds > 0 && muls > 0, "only the avoided dtypes are avoided, not the ops");
    }

    #[test]
    fn control_flow_seeds_are_valid_deterministic_and_read_their_scope() {
        let cfg = SeedConfig { control_flow: 1.0, contrib: true, ..Default::default() };
        let (mut control, mut outer) = (0, 0);
        for i in 0..600 {
            let m = generate(11, i, &cfg);
            crate::ops::check_graph(&m.graph, true).unwrap_or_else(|e| panic!("seed {i}: {e}"));
            let again = crate::graph::onnx::decode_model(&crate::graph::onnx::encode_model(&m)).unwrap();
            assert_eq!(again.graph, m.graph, "seed {i} round-trips");
            assert_eq!(crate::graph::onnx::encode_model(&generate(11, i, &cfg)), crate::graph::onnx::encode_model(&m));
            for id in m.graph.node_ids() {
                let n = m.graph.node(id);
                if crate::ops::is_control(&n.op) {
                    control += 1;
                    outer += usize::from(!n.implicit_inputs().is_empty());
                }
            }
        }
        assert!(control >= 450, "only {control} of 600 seeds hold a control-flow node");
        assert!(outer >= control / 2, "{outer} of {control} bodies read the enclosing graph");
        // without control flow asked for, seeds are those of a catalog without it
        let plain = SeedConfig::default();
        assert!((0..300).all(|i| !generate(11, i, &plain).graph.has_subgraphs()));
    }

    #[test]
    fn generation_is_deterministic_per_index() {
        let cfg = SeedConfig::default();
        let a = crate::graph::onnx::encode_model(&generate(3, 42, &cfg));
        let b = crate::graph::onnx::encode_model(&generate(3, 42, &cfg));
        let c = crate::graph::onnx::encode_model(&generate(3, 43, &cfg));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
