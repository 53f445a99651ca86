//! Since which opset each ai.onnx op has its opset-20 signature (data/onnx-op-since.tsv, written by
//! scripts/onnx-op-since.py from onnx's schemas): a graph written at a lower opset must avoid the newer ones.

const TABLE: &str = include_str!("../../data/onnx-op-since.tsv");

/// The ai.onnx ops whose opset-20 signature (inputs, outputs, attributes, types) is newer than `opset`: at
/// `opset` they do not exist or mean something else. Ops the table does not list (contrib ops) are never newer.
pub fn newer_than(opset: i64) -> Vec<&'static str> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('\t'))
        .filter(|(_, v)| v.trim().parse::<i64>().is_ok_and(|v| v > opset))
        .map(|(op, _)| op)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ops_onnx_changed_late_are_newer_than_old_opsets() {
        let at19 = super::newer_than(19);
        assert!(at19.contains(&"Gelu") && at19.contains(&"ReduceMax") && !at19.contains(&"ReduceMean"), "{at19:?}");
        let at16 = super::newer_than(16);
        for op in ["LayerNormalization", "ReduceMean", "Split", "Pad", "Cast", "Gelu"] {
            assert!(at16.contains(&op), "{op} changed after opset 16");
        }
        assert!(!at16.contains(&"Add") && !at16.contains(&"MatMul") && !at16.contains(&"Reshape"));
        assert!(super::newer_than(20).is_empty());
    }
}
