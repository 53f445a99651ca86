//! Convolutions and pooling over 1-D/2-D/3-D spatial inputs (rank 3..=5, layout N x C x D1 ...): Conv,
//! ConvTranspose, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, registered here in catalog order.
//!
//! Output sizes follow ONNX (opset 20); dtype lists are what ONNX Runtime 1.31's CPU provider runs
//! (docs/ort-cpu-dtypes.tsv).

mod convolution;
mod pool;
mod window;

use crate::graph::DType;
use convolution::{Conv, ConvTranspose};
use pool::{GlobalPool, Pool};

use DType::*;
const CONV_DTYPES: &[DType] = &[F32, F16];

/// How the catalog refuses a pool with a window wholly in the padding (its value unspecified).
pub const WHOLLY_PADDED: &str = "a window lies wholly in the padding";
const MAXPOOL_DTYPES: &[DType] = &[F32, F64, F16, I8, U8];

pub fn register(v: &mut Vec<Box<dyn super::OpSpec>>) {
    v.push(Box::new(Conv));
    v.push(Box::new(ConvTranspose));
    v.push(Box::new(Pool { name: "MaxPool", dtypes: MAXPOOL_DTYPES, max: true }));
    v.push(Box::new(Pool { name: "AveragePool", dtypes: CONV_DTYPES, max: false }));
    v.push(Box::new(GlobalPool { name: "GlobalAveragePool" }));
    v.push(Box::new(GlobalPool { name: "GlobalMaxPool" }));
}

#[cfg(test)]
mod tests {
    use super::super::testutil::sample_many;
    use super::super::{infer_node, lookup, Fact};
    use super::*;
    use crate::graph::{Attr, Attrs, TensorType};
    use crate::ops::Reject;

    pub(super) fn fact(d: DType, s: &[usize]) -> Option<Fact<'static>> {
        Some(Fact { ty: TensorType::new(d, s), value: None })
    }

    fn attrs(list: &[(&str, Attr)]) -> Attrs {
        list.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    pub(super) fn ints(v: &[i64]) -> Attr {
        Attr::Ints(v.to_vec())
    }

    pub(super) fn run(
        op: &str,
        ins: &[Option<Fact>],
        a: &[(&str, Attr)],
        outs: usize,
    ) -> Result<Vec<TensorType>, Reject> {
        infer_node(lookup("", op).unwrap(), ins, &attrs(a), outs)
    }

    #[test]
    fn every_conv_spec_samples_valid_proposals() {
        let mut v = Vec::new();
        register(&mut v);
        for s in &v {
            assert!(sample_many(s.as_ref(), 100) > 0, "{} never sampled", s.name());
        }
    }
}
