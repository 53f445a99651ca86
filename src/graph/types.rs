//! Value types: a tensor's element type and shape (static dims, symbolic dims, or unknown rank).

use super::DType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One dimension: a fixed size or a symbolic name (e.g. a batch size `N`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    Fixed(i64),
    Sym(String),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Sym(s) if s.is_empty() => f.write_str("?"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// A tensor type. `shape: None` means the rank is unknown; `Some(vec![])` is a scalar (rank 0).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Option<Vec<Dim>>,
}

impl TensorType {
    /// A fully static type.
    pub fn new(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType { dtype, shape: Some(dims.iter().map(|&d| Dim::Fixed(d as i64)).collect()) }
    }

    pub fn rank(&self) -> Option<usize> {
        self.shape.as_ref().map(|s| s.len())
    }

    /// The dims when every one is fixed.
    pub fn dims(&self) -> Option<Vec<usize>> {
        self.shape
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) if *n >= 0 => Some(*n as usize),
                _ => None,
            })
            .collect()
    }

    /// Number of elements when static.
    pub fn numel(&self) -> Option<usize> {
        self.dims().map(|d| d.iter().product())
    }

    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType { dtype, shape: self.shape.clone() }
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shape {
            None => write!(f, "{}[*]", self.dtype),
            Some(s) => {
                let dims: Vec<String> = s.iter().map(|d| d.to_string()).collect();
                write!(f, "{}[{}]", self.dtype, dims.join(","))
            }
        }
    }
}

/// The type of a graph value. Non-tensor ONNX types (sequences, maps, optionals) are kept as their encoded
/// `TypeProto` so they round-trip, but no op in the catalog consumes them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    Tensor(TensorType),
    Opaque(Vec<u8>),
}

impl ValueType {
    pub fn tensor(&self) -> Option<&TensorType> {
        match self {
            ValueType::Tensor(t) => Some(t),
            ValueType::Opaque(_) => None,
        }
    }
}

impl From<TensorType> for ValueType {
    fn from(t: TensorType) -> Self {
        ValueType::Tensor(t)
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Tensor(t) => t.fmt(f),
            ValueType::Opaque(_) => f.write_str("<non-tensor>"),
        }
    }
}
