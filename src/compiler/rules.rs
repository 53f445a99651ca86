//! ORT's rule-based transformers and the rewrite rules inside them (data shared by the ORT target,
//! extraction and the campaign).

/// The rewrite rules inside ORT's rule-based transformers, by container (from ORT 1.31's
/// optimizer registration; tests/data/ort-transform-testdata/TRANSFORMERS.txt). Rules are not logged one
/// by one: a rule fired if its container still modifies the graph when every other rule of it is disabled.
pub const RULE_CONTAINERS: &[(&str, &[&str])] = &[
    (
        "Level1_RuleBasedTransformer",
        &[
            "EliminateIdentity",
            "EliminateSlice",
            "UnsqueezeElimination",
            "EliminateDropout",
            "ExpandElimination",
            "CastElimination",
            "CastChainElimination",
            "PreShapeNodeElimination",
            "NoopElimination",
            "DivMulFusion",
            "FuseReluClip",
            "GemmSumFusion",
            "GemmTransposeFusion",
            "NotWhereFusion",
            "ConvAddFusion",
            "ConvMulFusion",
            "ConvBNFusion",
            "Pad_Fusion",
            "MatMul_BatchNormalization_Fusion",
            "LabelEncoderFusion",
        ],
    ),
    ("Level2_RuleBasedTransformer", &["ClipQuantRewrite", "ReluQuantRewrite", "GemmTransposeFusion"]),
];

/// Every rewrite rule once, in container order (GemmTransposeFusion is in both containers).
pub fn all_rules() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in RULE_CONTAINERS.iter().flat_map(|(_, rules)| rules.iter()) {
        if !out.contains(r) {
            out.push(r);
        }
    }
    out
}

/// The rule container of a rewrite rule, if `pass` is one.
pub fn container_of(pass: &str) -> Option<&'static str> {
    RULE_CONTAINERS.iter().find(|(_, rules)| rules.contains(&pass)).map(|(c, _)| *c)
}

/// The suffix under which ORT runs a second instance of a transformer for an execution provider
/// (`TransposeOptimizer` at level 1, `TransposeOptimizer_CPUExecutionProvider` after partitioning).
pub const EP_INSTANCE_SUFFIX: &str = "_CPUExecutionProvider";

/// The provider instances ORT runs (tests/data/ort-transform-testdata/TRANSFORMERS.txt lists one).
pub const KNOWN_EP_INSTANCES: &[&str] = &["TransposeOptimizer_CPUExecutionProvider"];

/// One pass's name for all of its instances: `TransposeOptimizer_CPUExecutionProvider` is `TransposeOptimizer`.
pub fn canonical(pass: &str) -> &str {
    pass.strip_suffix(EP_INSTANCE_SUFFIX).filter(|base| !base.is_empty()).unwrap_or(pass)
}

/// Every name ORT may run `pass` under: disabling a pass disables all of its instances.
pub fn instances(pass: &str) -> [String; 2] {
    let base = canonical(pass);
    [base.to_string(), format!("{base}{EP_INSTANCE_SUFFIX}")]
}

/// `passes` with the provider instances ORT is known to run them under too ([`KNOWN_EP_INSTANCES`]): the names a
/// user disables them by (disabling `TransposeOptimizer` alone leaves its second instance running).
pub fn with_known_instances(passes: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in passes {
        for n in instances(p) {
            if (n == *p || KNOWN_EP_INSTANCES.contains(&n.as_str())) && !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_and_its_provider_instance_are_one_pass() {
        assert_eq!(canonical("TransposeOptimizer_CPUExecutionProvider"), "TransposeOptimizer");
        assert_eq!(canonical("TransposeOptimizer"), "TransposeOptimizer");
        assert_eq!(instances("TransposeOptimizer_CPUExecutionProvider"), instances("TransposeOptimizer"));
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            with_known_instances(&names(&["TransposeOptimizer", "ConvBNFusion"])),
            names(&["TransposeOptimizer", "TransposeOptimizer_CPUExecutionProvider", "ConvBNFusion"])
        );
        assert_eq!(canonical(EP_INSTANCE_SUFFIX), EP_INSTANCE_SUFFIX);
    }

    #[test]
    fn every_rule_is_listed_once() {
        let all = all_rules();
        assert_eq!(all.len(), 22, "20 level-1 rules and ClipQuantRewrite, ReluQuantRewrite: {all:?}");
        assert_eq!(all.iter().filter(|r| **r == "GemmTransposeFusion").count(), 1);
        assert!(all.iter().all(|r| container_of(r).is_some()));
    }
}
