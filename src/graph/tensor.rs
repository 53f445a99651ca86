//! Constant tensors (initializers, tensor attributes) as typed little-endian bytes.

use super::{DType, TensorType};
use half::f16;

/// The payload of a tensor: ONNX `raw_data` layout for fixed-size types, one byte string per element for strings.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum TensorData {
    Raw(Vec<u8>),
    Strings(Vec<Vec<u8>>),
}

/// A constant tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Tensor {
    pub dtype: DType,
    pub dims: Vec<i64>,
    pub data: TensorData,
}

impl Tensor {
    pub fn numel(&self) -> usize {
        self.dims.iter().map(|&d| d.max(0) as usize).product()
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, &self.dims.iter().map(|&d| d.max(0) as usize).collect::<Vec<_>>())
    }

    pub fn raw(&self) -> Option<&[u8]> {
        match &self.data {
            TensorData::Raw(b) => Some(b),
            TensorData::Strings(_) => None,
        }
    }

    pub fn from_i64(dims: &[usize], v: &[i64]) -> Tensor {
        Tensor::from_f64s(DType::I64, dims, &v.iter().map(|&x| x as f64).collect::<Vec<_>>())
    }

    pub fn from_f32(dims: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_f64s(DType::F32, dims, &v.iter().map(|&x| x as f64).collect::<Vec<_>>())
    }

    /// Builds a tensor of a numeric or bool dtype from f64 values (cast with Rust `as` semantics; bool = != 0).
    /// Panics on strings/unknown dtypes: callers pass modelled numeric types only.
    pub fn from_f64s(dtype: DType, dims: &[usize], v: &[f64]) -> Tensor {
        let mut b = Vec::with_capacity(v.len() * dtype.size().expect("fixed-size dtype"));
        for &x in v {
            match dtype {
                DType::F32 => b.extend((x as f32).to_le_bytes()),
                DType::F64 => b.extend(x.to_le_bytes()),
                DType::F16 => b.extend(f16::from_f64(x).to_le_bytes()),
                DType::BF16 => b.extend(half::bf16::from_f64(x).to_le_bytes()),
                DType::I8 => b.extend((x as i8).to_le_bytes()),
                DType::U8 => b.extend((x as u8).to_le_bytes()),
                DType::I16 => b.extend((x as i16).to_le_bytes()),
                DType::U16 => b.extend((x as u16).to_le_bytes()),
                DType::I32 => b.extend((x as i32).to_le_bytes()),
                DType::U32 => b.extend((x as u32).to_le_bytes()),
                DType::I64 => b.extend((x as i64).to_le_bytes()),
                DType::U64 => b.extend((x as u64).to_le_bytes()),
                DType::Bool => b.push((x != 0.0) as u8),
                DType::C64 => {
                    b.extend((x as f32).to_le_bytes());
                    b.extend(0f32.to_le_bytes())
                }
                DType::C128 => {
                    b.extend(x.to_le_bytes());
                    b.extend(0f64.to_le_bytes())
                }
                DType::Str | DType::Other(_) => panic!("from_f64s on {dtype}"),
            }
        }
        Tensor { dtype, dims: dims.iter().map(|&d| d as i64).collect(), data: TensorData::Raw(b) }
    }

    /// The values as f64 (real part for complex types); `None` for strings, unknown dtypes or a payload of the
    /// wrong length.
    pub fn to_f64s(&self) -> Option<Vec<f64>> {
        let raw = self.raw()?;
        let size = self.dtype.size()?;
        if raw.len() != size * self.numel() {
            return None;
        }
        let v = raw
            .chunks_exact(size)
            .map(|c| match self.dtype {
                DType::F32 | DType::C64 => f32::from_le_bytes(c[..4].try_into().unwrap()) as f64,
                DType::F64 | DType::C128 => f64::from_le_bytes(c[..8].try_into().unwrap()),
                DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
                DType::BF16 => half::bf16::from_le_bytes([c[0], c[1]]).to_f64(),
                DType::I8 => c[0] as i8 as f64,
                DType::U8 | DType::Bool => c[0] as f64,
                DType::I16 => i16::from_le_bytes([c[0], c[1]]) as f64,
                DType::U16 => u16::from_le_bytes([c[0], c[1]]) as f64,
                DType::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
                DType::U32 => u32::from_le_bytes(c.try_into().unwrap()) as f64,
                DType::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
                DType::U64 => u64::from_le_bytes(c.try_into().unwrap()) as f64,
                DType::Str | DType::Other(_) => unreachable!("size() is None"),
            })
            .collect();
        Some(v)
    }

    /// Integer values (exact for I64/I32 and the small integer types); `None` for non-integer dtypes.
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        if self.dtype == DType::I64 {
            let raw = self.raw()?;
            if raw.len() != 8 * self.numel() {
                return None;
            }
            return Some(raw.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect());
        }
        if !self.dtype.is_int() {
            return None;
        }
        Some(self.to_f64s()?.into_iter().map(|x| x as i64).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_values_round_trip_through_bytes() {
        for dt in [DType::F32, DType::F64, DType::F16, DType::I8, DType::U8, DType::I32, DType::I64, DType::Bool] {
            let vals = if dt == DType::Bool {
                [0.0, 1.0, 1.0, 0.0]
            } else if dt.is_signed() {
                [0.0, 1.0, 2.0, -3.0]
            } else {
                [0.0, 1.0, 2.0, 3.0]
            };
            let t = Tensor::from_f64s(dt, &[2, 2], &vals);
            assert_eq!(t.raw().unwrap().len(), 4 * dt.size().unwrap());
            assert_eq!(t.to_f64s().unwrap(), vals, "{dt}");
        }
    }

    #[test]
    fn i64_values_are_exact() {
        let t = Tensor::from_i64(&[2], &[i64::MAX, -3]);
        assert_eq!(t.to_i64s().unwrap(), vec![i64::MAX, -3]);
    }

    #[test]
    fn wrong_payload_length_is_none() {
        let t = Tensor { dtype: DType::F32, dims: vec![3], data: TensorData::Raw(vec![0; 8]) };
        assert!(t.to_f64s().is_none());
    }
}

/// A named tensor (a graph input or output value).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NamedTensor {
    pub name: String,
    pub tensor: Tensor,
}
