//! Element types of tensors, with their ONNX `TensorProto.DataType` codes and byte sizes.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An element type. Codes follow ONNX's `TensorProto.DataType`; a code oatest does not model is kept as
/// `Other(code)` so a model round-trips unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    F32,
    U8,
    I8,
    U16,
    I16,
    I32,
    I64,
    Str,
    Bool,
    F16,
    F64,
    U32,
    U64,
    C64,
    C128,
    BF16,
    Other(i32),
}

impl DType {
    /// Every modelled type, for sweeps and tests.
    pub const ALL: [DType; 16] = [
        DType::F32,
        DType::U8,
        DType::I8,
        DType::U16,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::Str,
        DType::Bool,
        DType::F16,
        DType::F64,
        DType::U32,
        DType::U64,
        DType::C64,
        DType::C128,
        DType::BF16,
    ];

    pub fn from_onnx(code: i32) -> DType {
        match code {
            1 => DType::F32,
            2 => DType::U8,
            3 => DType::I8,
            4 => DType::U16,
            5 => DType::I16,
            6 => DType::I32,
            7 => DType::I64,
            8 => DType::Str,
            9 => DType::Bool,
            10 => DType::F16,
            11 => DType::F64,
            12 => DType::U32,
            13 => DType::U64,
            14 => DType::C64,
            15 => DType::C128,
            16 => DType::BF16,
            c => DType::Other(c),
        }
    }

    pub fn onnx(self) -> i32 {
        match self {
            DType::F32 => 1,
            DType::U8 => 2,
            DType::I8 => 3,
            DType::U16 => 4,
            DType::I16 => 5,
            DType::I32 => 6,
            DType::I64 => 7,
            DType::Str => 8,
            DType::Bool => 9,
            DType::F16 => 10,
            DType::F64 => 11,
            DType::U32 => 12,
            DType::U64 => 13,
            DType::C64 => 14,
            DType::C128 => 15,
            DType::BF16 => 16,
            DType::Other(c) => c,
        }
    }

    /// Bytes per element in ONNX raw_data layout; `None` for strings and sub-byte or unknown types.
    pub fn size(self) -> Option<usize> {
        Some(match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::U16 | DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
            DType::C128 => 16,
            DType::Str | DType::Other(_) => return None,
        })
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::I64 | DType::U32 | DType::U64
        )
    }

    pub fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64) || self.is_float()
    }

    /// Lowercase name as in numpy (`float32`, `int64`, `bool`, ...).
    pub fn name(self) -> String {
        match self {
            DType::F32 => "float32".into(),
            DType::U8 => "uint8".into(),
            DType::I8 => "int8".into(),
            DType::U16 => "uint16".into(),
            DType::I16 => "int16".into(),
            DType::I32 => "int32".into(),
            DType::I64 => "int64".into(),
            DType::Str => "string".into(),
            DType::Bool => "bool".into(),
            DType::F16 => "float16".into(),
            DType::F64 => "float64".into(),
            DType::U32 => "uint32".into(),
            DType::U64 => "uint64".into(),
            DType::C64 => "complex64".into(),
            DType::C128 => "complex128".into(),
            DType::BF16 => "bfloat16".into(),
            DType::Other(c) => format!("onnx_type_{c}"),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn onnx_codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_onnx(d.onnx()), d);
        }
        assert_eq!(DType::from_onnx(23), DType::Other(23));
        assert_eq!(DType::Other(23).onnx(), 23);
    }

    #[test]
    fn sizes_match_onnx_layout() {
        assert_eq!(DType::F16.size(), Some(2));
        assert_eq!(DType::F64.size(), Some(8));
        assert_eq!(DType::Bool.size(), Some(1));
        assert_eq!(DType::Str.size(), None);
    }
}
