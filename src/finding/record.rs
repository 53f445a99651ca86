//! bug.json, the record of one entry (what triage found and every finding that is this bug): read and written
//! here only, as whatever type the caller keeps in it (`report::record::BugRecord`), so merging and attaching
//! keep the fields they do not know.

use crate::util::write_atomic;
use anyhow::Context;
use std::path::Path;

/// The file of an entry's record.
pub const FILE: &str = "bug.json";

/// Whether `dir` holds an entry (its bug.json, written last, is there).
pub fn exists(dir: &Path) -> bool {
    dir.join(FILE).is_file()
}

/// The record of the entry in `dir`; errors name the file.
pub fn read<T: serde::de::DeserializeOwned>(dir: &Path) -> anyhow::Result<T> {
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a bug record", path.display()))
}

/// The record of the entry in `dir` as its text and JSON value, every field kept (what merging compares and
/// copies); errors name the file.
pub fn read_raw(dir: &Path) -> anyhow::Result<(String, serde_json::Value)> {
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not a bug record", path.display()))?;
    anyhow::ensure!(
        value["triage"].is_object() && value["findings"].is_array(),
        "{}: not a bug record (no triage or findings)",
        path.display()
    );
    Ok((text, value))
}

/// Writes the record of the entry in `dir` (atomically).
pub fn write<T: serde::Serialize>(dir: &Path, rec: &T) -> anyhow::Result<()> {
    write_atomic(&dir.join(FILE), serde_json::to_string_pretty(rec)?.as_bytes())
}

/// Adds a finding (its source) to the entry in `dir` (its `findings`), unless it is already listed; every other
/// field is kept as it is.
pub fn add_finding(dir: &Path, source: &str) -> anyhow::Result<()> {
    let (_, mut value) = read_raw(dir)?;
    let findings = value["findings"].as_array_mut().expect("read_raw checked it");
    if !findings.iter().any(|f| f.as_str() == Some(source)) {
        findings.push(source.into());
        write(dir, &value)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_a_finding_keeps_unknown_fields_and_lists_it_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), r#"{"triage":{"x":1},"findings":["a"],"future":[1,2]}"#).unwrap();
        add_finding(dir.path(), "b").unwrap();
        add_finding(dir.path(), "b").unwrap();
        let v: serde_json::Value = read(dir.path()).unwrap();
        assert_eq!(v["findings"], serde_json::json!(["a", "b"]));
        assert_eq!(v["future"], serde_json::json!([1, 2]));
        std::fs::write(dir.path().join(FILE), r#"{"findings":[]}"#).unwrap();
        let e = add_finding(dir.path(), "c").unwrap_err().to_string();
        assert!(e.contains("bug.json") && e.contains("not a bug record"), "{e}");
    }
}
