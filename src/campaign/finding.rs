//! Findings on disk: `findings/<id>-<symptom>/` with the model, its inputs, every configuration's outcome and
//! what regenerates it, written into a temporary directory and renamed into place (atomic).

use super::source::Test;
use crate::oracle::{Judgement, Symptom, Verdict};
use crate::compiler::{inputs, Outcome};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The verdict a finding is filed under: crash, then hang, then error, then inconsistency.
pub fn primary(j: &Judgement) -> Option<&Verdict> {
    let rank = |s: Symptom| match s {
        Symptom::Crash => 0,
        Symptom::Hang => 1,
        Symptom::Error => 2,
        Symptom::Inconsistency => 3,
    };
    j.verdicts.iter().min_by_key(|v| rank(v.symptom))
}

/// A message with the parts that vary between occurrences of one bug removed: numbers, hex addresses, quoted
/// names.
pub fn normalize(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut chars = msg.chars().peekable();
    let mut in_quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = in_quote {
            if c == q {
                in_quote = None;
                out.push(q);
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                in_quote = Some(c);
                out.push(c);
                out.push('*');
            }
            // a parenthesized identifier with digits or underscores is a node or value name: `Node (conv_12)`
            '(' => {
                let rest: String = chars.clone().take_while(|&c| c != ')' && c != '(' && !c.is_whitespace()).collect();
                let closed = chars.clone().nth(rest.chars().count()) == Some(')');
                if closed && !rest.is_empty() && rest.chars().any(|c| c.is_ascii_digit() || c == '_') {
                    for _ in 0..=rest.chars().count() {
                        chars.next();
                    }
                    out.push_str("(*)");
                } else {
                    out.push('(');
                }
            }
            '0' if chars.peek() == Some(&'x') => {
                chars.next();
                while chars.peek().is_some_and(|d| d.is_ascii_hexdigit()) {
                    chars.next();
                }
                out.push('#');
            }
            '-' if chars.peek().is_some_and(|d| d.is_ascii_digit()) => {}
            d if d.is_ascii_digit() => {
                while chars.peek().is_some_and(|d| d.is_ascii_digit() || *d == '.' || *d == 'e' || *d == '-') {
                    chars.next();
                }
                out.push('#');
            }
            _ => out.push(c),
        }
    }
    out
}

/// The signature of a finding: target, symptom, configuration and normalized message, as a short stable hash.
pub fn signature(target: &str, v: &Verdict) -> String {
    let key = format!("{target}|{}|{}|{}", v.symptom, v.config, normalize(&v.detail));
    crate::util::stable_hash(&key)
}

#[derive(Serialize)]
struct OutcomeRecord<'a> {
    target: &'a str,
    config: String,
    status: &'static str,
    message: String,
    passes_fired: &'a [String],
    time_ms: f64,
    outputs: Vec<(String, String, Vec<i64>)>,
}

#[derive(Serialize)]
struct Meta<'a> {
    target: &'a str,
    target_version: &'a str,
    campaign_seed: u64,
    test_id: u64,
    origin: &'a str,
    symptom: Symptom,
    signature: String,
    verdicts: &'a [Verdict],
    reproduce: String,
}

/// Writes the finding directory for a test; returns its path. An existing directory (a resumed campaign
/// re-running a test) is kept as it is.
pub fn write(
    out: &Path,
    target: &str,
    version: &str,
    seed: u64,
    test: &Test,
    outcomes: &[Outcome],
    j: &Judgement,
) -> anyhow::Result<PathBuf> {
    let v = primary(j).expect("a finding has a verdict");
    let findings = out.join("findings");
    let dir = findings.join(format!("{:08}-{}", test.id, v.symptom));
    write_dir(&dir, |tmp| {
        std::fs::write(tmp.join("model.onnx"), &test.model)?;
        inputs::write(tmp, "input", &test.inputs)?;
        let records: Vec<OutcomeRecord> = outcomes
            .iter()
            .map(|o| OutcomeRecord {
                target: &o.target,
                config: o.config.to_string(),
                status: o.status.kind(),
                message: o.status.message(),
                passes_fired: &o.passes_fired,
                time_ms: o.time_ms,
                outputs: o
                    .outputs
                    .iter()
                    .map(|t| (t.name.clone(), t.tensor.dtype.name(), t.tensor.dims.clone()))
                    .collect(),
            })
            .collect();
        std::fs::write(tmp.join("outcome.json"), serde_json::to_string_pretty(&records)?)?;
        let meta = Meta {
            target,
            target_version: version,
            campaign_seed: seed,
            test_id: test.id,
            origin: &test.origin,
            symptom: v.symptom,
            signature: signature(target, v),
            verdicts: &j.verdicts,
            reproduce: format!("oatest run model.onnx --target {target} --inputs . --judge"),
        };
        std::fs::write(tmp.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
        Ok(())
    })?;
    Ok(dir)
}

/// Keeps an invalid test (one the reference configuration refused) as `invalid/<test id>/`: model.onnx,
/// input_K.pb and reason.txt (the reference's message), so that the seed generator's gaps can be seen.
pub fn write_invalid(out: &Path, test: &Test, outcomes: &[Outcome]) -> anyhow::Result<()> {
    let reason = outcomes.first().map(|o| format!("{}: {}\n", o.config, o.status.message())).unwrap_or_default();
    write_dir(&out.join("invalid").join(format!("{:08}", test.id)), |tmp| {
        std::fs::write(tmp.join("model.onnx"), &test.model)?;
        inputs::write(tmp, "input", &test.inputs)?;
        std::fs::write(tmp.join("reason.txt"), reason)?;
        Ok(())
    })
}

/// Creates directory `dir` atomically: `fill` writes into a temporary directory beside it, which is then
/// renamed into place. An existing `dir` (a resumed campaign re-running a test) is kept as it is.
fn write_dir(dir: &Path, fill: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let parent = dir.parent().expect("a directory inside the run directory");
    std::fs::create_dir_all(parent)?;
    let tmp = tempfile::Builder::new().prefix(".tmp-").tempdir_in(parent)?;
    fill(tmp.path())?;
    std::fs::rename(tmp.keep(), dir)?;
    Ok(())
}

/// Passing tests kept as regression seeds: the first clean test that fires each pass is written to
/// `examples/<pass>/` (model.onnx, input_K.pb, output_K.pb from the reference, example.json).
pub struct Examples {
    dir: PathBuf,
    covered: std::collections::HashSet<String>,
}

impl Examples {
    /// Passes already covered in `out/examples` (a resumed campaign keeps its examples).
    pub fn open(out: &Path) -> Examples {
        let dir = out.join("examples");
        let covered = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| std::fs::read_to_string(e.path().join("example.json")).ok())
                    .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                    .filter_map(|v| v["pass"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Examples { dir, covered }
    }

    /// Keeps `test` for each pass it fired that no kept test covers yet. `outcomes[0]` is the reference.
    pub fn offer(&mut self, test: &Test, outcomes: &[Outcome]) -> anyhow::Result<()> {
        let Some(reference) = outcomes.first().filter(|r| r.status == crate::compiler::Status::Ok) else {
            return Ok(());
        };
        let mut fired: Vec<&String> = outcomes.iter().flat_map(|o| &o.passes_fired).collect();
        fired.sort();
        fired.dedup();
        let new: Vec<&String> = fired.iter().copied().filter(|p| !self.covered.contains(*p)).collect();
        for pass in new {
            let name: String =
                pass.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
            write_dir(&self.dir.join(&name), |tmp| {
                std::fs::write(tmp.join("model.onnx"), &test.model)?;
                inputs::write(tmp, "input", &test.inputs)?;
                inputs::write(tmp, "output", &reference.outputs)?;
                let info = serde_json::json!({
                    "pass": pass,
                    "passes_fired": fired,
                    "source": format!("test {}", test.id),
                    "origin": test.origin,
                });
                std::fs::write(tmp.join("example.json"), serde_json::to_string_pretty(&info)?)?;
                Ok(())
            })?;
            self.covered.insert(pass.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_removes_numbers_addresses_and_names() {
        assert_eq!(
            normalize("node 'conv_12' at 0x7ffd12ab: shape [3, 4] vs 2.5e-3, expected -1"),
            normalize("node 'relu_3' at 0x55aa00: shape [7, 1] vs 9.1e-2, expected 0")
        );
        assert_ne!(normalize("Gather failed"), normalize("Reshape failed"));
        assert_eq!(
            normalize("Node (p1264_conv_q) Op (QuantizeLinear) input (c6) of (x)"),
            normalize("Node (t2_0_q) Op (QuantizeLinear) input (c4) of (x)")
        );
        assert_ne!(normalize("Op (QuantizeLinear)"), normalize("Op (DequantizeLinear)"));
    }

    #[test]
    fn signatures_group_findings_that_differ_only_in_context() {
        let v = |detail: &str| Verdict {
            symptom: Symptom::Error,
            config: "all".into(),
            detail: detail.into(),
            max_diff: None,
        };
        assert_eq!(signature("ort", &v("node 'a1' failed at 12")), signature("ort", &v("node 'b7' failed at 40")));
        assert_ne!(signature("ort", &v("x failed")), signature("tract", &v("x failed")));
    }
}
