//! Named filters for errors that say an op or type is not implemented or not supported: when the reference run
//! fails this way the test is invalid for this compiler, not a finding. Kept as data, matched in one place.

/// (filter name, message fragments; any fragment matches, case-sensitive).
pub const UNSUPPORTED: &[(&str, &[&str])] = &[
    ("no-kernel", &["Could not find an implementation for", "NOT_IMPLEMENTED"]),
    ("not-implemented", &["not implemented", "Not implemented", "unimplemented", "Unimplemented"]),
    ("unsupported", &["not supported", "unsupported", "Unsupported", "is not a registered function/op"]),
];

/// The name of the first filter whose fragment occurs in `message`.
pub fn unsupported_reason(message: &str) -> Option<&'static str> {
    UNSUPPORTED.iter().find(|(_, frags)| frags.iter().any(|f| message.contains(f))).map(|(name, _)| *name)
}
