//! Named filters for errors that make a test invalid for a compiler, not a finding, when the reference run fails
//! this way: an op or type not implemented or not supported, or a pass's stated precondition broken (TVM's
//! contracts). Kept as data, matched in one place.

/// (filter name, message fragments; any fragment matches, case-sensitive).
pub const UNSUPPORTED: &[(&str, &[&str])] = &[
    // a test that breaks a pass's stated precondition (TVM's runner: `contracts` in oatest_tvm_pipeline.json)
    ("contract", &["oatest contract: "]),
    ("no-kernel", &["Could not find an implementation for", "NOT_IMPLEMENTED"]),
    ("not-implemented", &["not implemented", "Not implemented", "unimplemented", "Unimplemented"]),
    ("unsupported", &["not supported", "unsupported", "Unsupported", "is not a registered function/op"]),
];

/// The name of the first filter whose fragment occurs in `message`.
pub fn unsupported_reason(message: &str) -> Option<&'static str> {
    UNSUPPORTED.iter().find(|(_, frags)| frags.iter().any(|f| message.contains(f))).map(|(name, _)| *name)
}
