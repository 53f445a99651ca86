//! ONNX protobuf import/export (prost types generated at build time from proto/onnx-ml.proto).

use super::{Attr, DType, Dim, Graph, GraphError, Model, Node, OpId, Tensor, TensorData, TensorType, ValueType};
use anyhow::Context;
use prost::Message;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::path::Path;

/// The message types of onnx-ml.proto.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

/// Why a protobuf could not become a [`Model`].
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("not a valid ONNX protobuf (truncated or corrupt?): {0}")]
    Decode(#[from] prost::DecodeError),
    #[error("the model has no graph")]
    NoGraph,
    #[error("tensor '{tensor}': {why}")]
    Tensor { tensor: String, why: String },
    #[error("node '{node}' ({op}): attribute '{attr}': {why}")]
    Attribute { node: String, op: String, attr: String, why: String },
    #[error("sparse initializers are not supported (first: '{0}')")]
    SparseInitializer(String),
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// Reads and imports a model file; errors name the file.
pub fn load(path: &Path) -> anyhow::Result<Model> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    decode_model(&bytes).with_context(|| format!("{}: cannot import ONNX model", path.display()))
}

/// Exports a model and writes it atomically (temp file + rename): a failure never leaves a partial file.
pub fn save(model: &Model, path: &Path) -> anyhow::Result<()> {
    crate::util::write_atomic(path, &encode_model(model))
}

/// A model's graph outputs only (ModelProto.graph = 7, GraphProto.output = 12): prost skips every other field.
#[derive(Clone, PartialEq, prost::Message)]
struct OutputsOnly {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphOutputsOnly>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct GraphOutputsOnly {
    #[prost(message, repeated, tag = "12")]
    output: Vec<pb::ValueInfoProto>,
}

/// The declared tensor type of each graph output of an encoded model (outputs without one left out), read
/// without decoding the rest of the model; empty when the bytes are no model.
pub fn declared_outputs(bytes: &[u8]) -> Vec<(String, TensorType)> {
    let Ok(m) = OutputsOnly::decode(bytes) else { return Vec::new() };
    let outputs = m.graph.map(|g| g.output).unwrap_or_default();
    outputs
        .iter()
        .filter_map(|v| match import_type(v.r#type.as_ref()) {
            ValueType::Tensor(t) => Some((v.name().to_string(), t)),
            ValueType::Opaque(_) => None,
        })
        .collect()
}

pub fn decode_model(bytes: &[u8]) -> Result<Model, OnnxError> {
    let mp = pb::ModelProto::decode(bytes)?;
    let gp = mp.graph.as_ref().ok_or(OnnxError::NoGraph)?;
    let graph = import_graph(gp)?;
    Ok(Model {
        ir_version: mp.ir_version(),
        opsets: mp.opset_import.iter().map(|o| (o.domain().to_string(), o.version())).collect(),
        producer_name: mp.producer_name().to_string(),
        producer_version: mp.producer_version().to_string(),
        doc_string: mp.doc_string().to_string(),
        metadata: mp.metadata_props.iter().map(|p| (p.key().to_string(), p.value().to_string())).collect(),
        functions: mp.functions.iter().map(|f| f.encode_to_vec()).collect(),
        graph,
    })
}

pub fn encode_model(m: &Model) -> Vec<u8> {
    let mp = pb::ModelProto {
        ir_version: Some(m.ir_version),
        opset_import: m
            .opsets
            .iter()
            .map(|(d, &v)| pb::OperatorSetIdProto { domain: Some(d.clone()), version: Some(v) })
            .collect(),
        producer_name: Some(m.producer_name.clone()),
        producer_version: Some(m.producer_version.clone()),
        doc_string: (!m.doc_string.is_empty()).then(|| m.doc_string.clone()),
        metadata_props: m
            .metadata
            .iter()
            .map(|(k, v)| pb::StringStringEntryProto { key: Some(k.clone()), value: Some(v.clone()) })
            .collect(),
        functions: m.functions.iter().filter_map(|f| pb::FunctionProto::decode(f.as_slice()).ok()).collect(),
        graph: Some(export_graph(&m.graph)),
        ..Default::default()
    };
    mp.encode_to_vec()
}

fn import_graph(gp: &pb::GraphProto) -> Result<Graph, OnnxError> {
    let mut g = Graph::new(gp.name());
    if let Some(s) = gp.sparse_initializer.first() {
        let name = s.values.as_ref().map(|v| v.name().to_string()).unwrap_or_default();
        return Err(OnnxError::SparseInitializer(name));
    }
    for t in &gp.initializer {
        g.add_initializer(t.name(), import_tensor(t)?);
    }
    for vi in &gp.input {
        g.add_input(vi.name(), import_type(vi.r#type.as_ref()));
    }
    for vi in &gp.value_info {
        g.types.insert(vi.name().to_string(), import_type(vi.r#type.as_ref()));
    }
    for vi in &gp.output {
        g.add_output(vi.name(), import_type(vi.r#type.as_ref()));
    }
    let mut nodes: Vec<Node> = gp.node.iter().map(import_node).collect::<Result<_, _>>()?;
    last_constant_wins(&mut g, &mut nodes);
    for i in sorted_by_dependencies(&nodes)? {
        g.add_node(nodes[i].clone())?;
    }
    Ok(g)
}

/// A value several constants define (Constant nodes, an initializer) takes the last one, as ONNX Runtime reads
/// such a model ("Duplicate initializer ... the model will use the latest encountered initializer"): initializers
/// come first, then Constant nodes in file order. Any other value defined twice stays an error.
fn last_constant_wins(g: &mut Graph, nodes: &mut Vec<Node>) {
    let constant = |n: &Node| n.op == OpId::onnx("Constant") && n.inputs.is_empty() && n.outputs.len() == 1;
    let mut last: HashMap<String, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate().filter(|(_, n)| constant(n)) {
        last.insert(n.outputs[0].clone(), i);
    }
    let mut k = 0;
    nodes.retain(|n| {
        k += 1;
        !constant(n) || last[&n.outputs[0]] == k - 1
    });
    for v in last.keys() {
        if !g.inputs.contains(v) {
            g.initializers.shift_remove(v);
        }
    }
}

/// File order where it is already topological (ONNX requires it; some tools do not comply).
fn sorted_by_dependencies(nodes: &[Node]) -> Result<Vec<usize>, GraphError> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.entry(o.as_str()).or_insert(i);
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut indeg = vec![0usize; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for p in n.reads().iter().filter_map(|x| producer.get(x.as_str())).filter(|&&p| p != i) {
            users[*p].push(i);
            indeg[i] += 1;
        }
    }
    let mut ready: BinaryHeap<std::cmp::Reverse<usize>> =
        (0..nodes.len()).filter(|&i| indeg[i] == 0).map(std::cmp::Reverse).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.push(std::cmp::Reverse(u));
            }
        }
    }
    match (0..nodes.len()).find(|&i| indeg[i] > 0) {
        Some(i) => Err(GraphError::Cycle { node: nodes[i].name.clone() }),
        None => Ok(order),
    }
}

fn export_graph(g: &Graph) -> pb::GraphProto {
    let nodes = g.nodes_in_order().unwrap_or_else(|_| g.node_ids().map(|id| g.node(id)).collect());
    let io: std::collections::HashSet<&str> = g.inputs.iter().chain(&g.outputs).map(|s| s.as_str()).collect();
    let value_info = |name: &String| pb::ValueInfoProto {
        name: Some(name.clone()),
        // a value imported without a type (an untyped subgraph output) is written without one
        r#type: g.types.get(name).filter(|t| !matches!(t, ValueType::Opaque(b) if b.is_empty())).map(export_type),
        ..Default::default()
    };
    pb::GraphProto {
        name: Some(g.name.clone()),
        node: nodes.into_iter().map(export_node).collect(),
        initializer: g.initializers.iter().map(|(n, t)| export_tensor(n, t)).collect(),
        input: g.inputs.iter().map(value_info).collect(),
        output: g.outputs.iter().map(value_info).collect(),
        value_info: g.types.keys().filter(|k| !io.contains(k.as_str())).map(value_info).collect(),
        ..Default::default()
    }
}

fn import_type(tp: Option<&pb::TypeProto>) -> ValueType {
    use pb::tensor_shape_proto::dimension::Value as D;
    match tp.and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => ValueType::Tensor(TensorType {
            dtype: DType::from_onnx(t.elem_type()),
            shape: t.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .map(|d| match &d.value {
                        Some(D::DimValue(v)) => Dim::Fixed(*v),
                        Some(D::DimParam(p)) => Dim::Sym(p.clone()),
                        None => Dim::Sym(String::new()),
                    })
                    .collect()
            }),
        }),
        _ => ValueType::Opaque(tp.map(|t| t.encode_to_vec()).unwrap_or_default()),
    }
}

fn export_type(vt: &ValueType) -> pb::TypeProto {
    use pb::tensor_shape_proto::{dimension::Value as D, Dimension};
    match vt {
        ValueType::Tensor(t) => pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(t.dtype.onnx()),
                shape: t.shape.as_ref().map(|s| pb::TensorShapeProto {
                    dim: s
                        .iter()
                        .map(|d| Dimension {
                            value: match d {
                                Dim::Fixed(v) => Some(D::DimValue(*v)),
                                Dim::Sym(p) if p.is_empty() => None,
                                Dim::Sym(p) => Some(D::DimParam(p.clone())),
                            },
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        },
        ValueType::Opaque(b) => pb::TypeProto::decode(b.as_slice()).unwrap_or_default(),
    }
}

fn import_tensor(t: &pb::TensorProto) -> Result<Tensor, OnnxError> {
    let bad = |why: String| OnnxError::Tensor { tensor: t.name().to_string(), why };
    if t.data_location.unwrap_or(0) == 1 || !t.external_data.is_empty() {
        return Err(bad("external data is not supported".into()));
    }
    let dtype = DType::from_onnx(t.data_type());
    if t.dims.iter().any(|&d| d < 0) {
        return Err(bad(format!("negative dimension in {:?}", t.dims)));
    }
    let numel: usize = t.dims.iter().map(|&d| d as usize).product();
    let data = if dtype == DType::Str {
        TensorData::Strings(t.string_data.clone())
    } else if let Some(raw) = &t.raw_data {
        TensorData::Raw(raw.clone())
    } else {
        let mut b = Vec::new();
        match dtype {
            DType::F32 | DType::C64 => t.float_data.iter().for_each(|v| b.extend(v.to_le_bytes())),
            DType::F64 | DType::C128 => t.double_data.iter().for_each(|v| b.extend(v.to_le_bytes())),
            DType::I64 => t.int64_data.iter().for_each(|v| b.extend(v.to_le_bytes())),
            DType::U64 => t.uint64_data.iter().for_each(|v| b.extend(v.to_le_bytes())),
            DType::U32 => t.uint64_data.iter().for_each(|v| b.extend((*v as u32).to_le_bytes())),
            DType::I32 => t.int32_data.iter().for_each(|v| b.extend(v.to_le_bytes())),
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => {
                t.int32_data.iter().for_each(|v| b.extend((*v as u16).to_le_bytes()))
            }
            DType::I8 | DType::U8 | DType::Bool => t.int32_data.iter().for_each(|v| b.push(*v as u8)),
            DType::Str | DType::Other(_) if numel == 0 => {}
            // float8 (17-20, 24): one value per int32; 4-bit (21-23) and 2-bit (25, 26): packed into each int32's
            // low byte, which is exactly their raw_data layout
            DType::Other(17..=26) => t.int32_data.iter().for_each(|v| b.push(*v as u8)),
            DType::Str | DType::Other(_) => {
                return Err(bad(format!("ONNX data type {} stored in typed fields is not supported", t.data_type())))
            }
        }
        TensorData::Raw(b)
    };
    match (&data, dtype.size()) {
        (TensorData::Raw(b), Some(size)) if b.len() != size * numel => {
            Err(bad(format!("{} bytes of data for {numel} elements of {dtype}", b.len())))
        }
        (TensorData::Strings(s), _) if s.len() != numel => {
            Err(bad(format!("{} strings for {numel} elements", s.len())))
        }
        _ => Ok(Tensor { dtype, dims: t.dims.clone(), data }),
    }
}

fn export_tensor(name: &str, t: &Tensor) -> pb::TensorProto {
    let mut tp = pb::TensorProto {
        name: Some(name.to_string()),
        dims: t.dims.clone(),
        data_type: Some(t.dtype.onnx()),
        ..Default::default()
    };
    match &t.data {
        TensorData::Raw(b) => tp.raw_data = Some(b.clone()),
        TensorData::Strings(s) => tp.string_data = s.clone(),
    }
    tp
}

fn import_node(np: &pb::NodeProto) -> Result<Node, OnnxError> {
    let mut node = Node::new(
        np.name(),
        OpId { domain: np.domain().to_string(), name: np.op_type().to_string() },
        np.input.clone(),
        np.output.clone(),
    );
    for a in &np.attribute {
        let attr = import_attr(a).map_err(|why| OnnxError::Attribute {
            node: np.name().to_string(),
            op: np.op_type().to_string(),
            attr: a.name().to_string(),
            why: why.0,
        })?;
        node.attrs.insert(a.name().to_string(), attr);
    }
    Ok(node)
}

/// Why an attribute cannot be imported (the node's error names it).
struct BadAttr(String);

impl From<&str> for BadAttr {
    fn from(why: &str) -> BadAttr {
        BadAttr(why.to_string())
    }
}

fn import_attr(a: &pb::AttributeProto) -> Result<Attr, BadAttr> {
    if a.ref_attr_name.is_some() {
        return Ok(Attr::Opaque(a.encode_to_vec()));
    }
    // Old writers omit the type: infer it from the field that is set.
    let ty = match a.r#type.unwrap_or(0) {
        0 if a.f.is_some() => 1,
        0 if a.i.is_some() => 2,
        0 if a.s.is_some() => 3,
        0 if a.t.is_some() => 4,
        0 if !a.floats.is_empty() => 6,
        0 if !a.ints.is_empty() => 7,
        0 if !a.strings.is_empty() => 8,
        t => t,
    };
    Ok(match ty {
        1 => Attr::Float(a.f()),
        2 => Attr::Int(a.i()),
        3 => Attr::String(a.s().to_vec()),
        4 => {
            let t = a.t.as_ref().ok_or("TENSOR attribute without a tensor")?;
            Attr::Tensor(import_tensor(t).map_err(|e| BadAttr(e.to_string()))?)
        }
        6 => Attr::Floats(a.floats.clone()),
        7 => Attr::Ints(a.ints.clone()),
        8 => Attr::Strings(a.strings.clone()),
        5 => {
            let g = a.g.as_ref().ok_or("GRAPH attribute without a graph")?;
            Attr::Graph(Box::new(import_graph(g).map_err(|e| BadAttr(format!("subgraph '{}': {e}", g.name())))?))
        }
        _ => Attr::Opaque(a.encode_to_vec()),
    })
}

fn export_node(n: &Node) -> pb::NodeProto {
    pb::NodeProto {
        name: (!n.name.is_empty()).then(|| n.name.clone()),
        op_type: Some(n.op.name.clone()),
        domain: (!n.op.domain.is_empty()).then(|| n.op.domain.clone()),
        input: n.inputs.clone(),
        output: n.outputs.clone(),
        attribute: n.attrs.iter().map(|(k, v)| export_attr(k, v)).collect(),
        ..Default::default()
    }
}

fn export_attr(name: &str, a: &Attr) -> pb::AttributeProto {
    let mut p = pb::AttributeProto { name: Some(name.to_string()), ..Default::default() };
    let ty = match a {
        Attr::Float(f) => {
            p.f = Some(*f);
            1
        }
        Attr::Int(i) => {
            p.i = Some(*i);
            2
        }
        Attr::String(s) => {
            p.s = Some(s.clone());
            3
        }
        Attr::Tensor(t) => {
            p.t = Some(export_tensor("", t));
            4
        }
        Attr::Floats(v) => {
            p.floats = v.clone();
            6
        }
        Attr::Ints(v) => {
            p.ints = v.clone();
            7
        }
        Attr::Strings(v) => {
            p.strings = v.clone();
            8
        }
        Attr::Graph(g) => {
            p.g = Some(export_graph(g));
            5
        }
        Attr::Opaque(b) => {
            let mut q = pb::AttributeProto::decode(b.as_slice()).unwrap_or_default();
            q.name = Some(name.to_string());
            return q;
        }
    };
    p.r#type = Some(ty);
    p
}

/// Encodes one tensor as a standalone `TensorProto` (the `.pb` files of ONNX test data sets).
pub fn encode_tensor(name: &str, t: &Tensor) -> Vec<u8> {
    export_tensor(name, t).encode_to_vec()
}

/// Decodes a standalone `TensorProto`, returning its name and value.
pub fn decode_tensor(bytes: &[u8]) -> Result<(String, Tensor), OnnxError> {
    let tp = pb::TensorProto::decode(bytes)?;
    Ok((tp.name().to_string(), import_tensor(&tp)?))
}

/// Opset versions by domain, for messages.
pub fn describe_opsets(m: &Model) -> String {
    let v: BTreeMap<&str, i64> =
        m.opsets.iter().map(|(d, v)| (if d.is_empty() { "ai.onnx" } else { d.as_str() }, *v)).collect();
    v.iter().map(|(d, v)| format!("{d}:{v}")).collect::<Vec<_>>().join(",")
}
