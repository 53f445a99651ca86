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

/// The rule container of a rewrite rule, if `pass` is one.
pub fn container_of(pass: &str) -> Option<&'static str> {
    RULE_CONTAINERS.iter().find(|(_, rules)| rules.contains(&pass)).map(|(c, _)| *c)
}
