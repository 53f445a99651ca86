//! The one in-memory graph type: typed values, dialect-agnostic nodes in a petgraph DAG, validation, ONNX I/O.

mod dtype;
#[allow(clippy::module_inception)]
mod graph;
mod node;
pub mod onnx;
mod prune;
mod tensor;
mod types;
mod validate;

pub use dtype::DType;
pub use graph::{Graph, Model, NodeId, Outlet, Wire, DEFAULT_IR_VERSION, DEFAULT_OPSET};
pub use node::{Attr, Attrs, Node, OpId};
pub use prune::{prune, MS_DOMAIN};
pub use tensor::{NamedTensor, Tensor, TensorData};
pub use types::{Dim, TensorType, ValueType};
pub use validate::GraphError;

#[cfg(test)]
mod tests;
