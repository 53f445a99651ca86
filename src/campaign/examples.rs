//! Passing tests kept as regression seeds: the first clean test that fires each pass, under `examples/<pass>/`.

use crate::case::Test;
use crate::compiler::{inputs, Outcome};
use crate::util::write_dir_atomic as write_dir;
use std::path::{Path, PathBuf};

/// Passing tests kept as regression seeds: the first clean test that fires each pass is written to
/// `examples/<pass>/` (model.onnx, or recipe.json for a Relax test; input_K.pb, output_K.pb from the reference,
/// example.json).
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
                std::fs::write(tmp.join(test.payload.file_name()), test.payload.bytes())?;
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
