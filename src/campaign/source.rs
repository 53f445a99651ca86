//! Where tests come from: one interface for the seed generator, directories of existing models, and (later)
//! synthesized tests. A test is reproducible from (campaign seed, test id).

use crate::graph::onnx;
use crate::seedgen::{generate, SeedConfig};
use crate::target::{inputs, NamedTensor};
use anyhow::Context;
use std::path::PathBuf;

/// One test: a model, its inputs, and where it came from.
#[derive(Clone, Debug)]
pub struct Test {
    pub id: u64,
    pub model: Vec<u8>,
    pub inputs: Vec<NamedTensor>,
    /// `seedgen` or the seed file's path.
    pub origin: String,
    /// The pass this test was built to trigger (synthesized tests only).
    pub target_pass: Option<String>,
}

/// Makes test `id` of a campaign; the same id always gives the same test.
pub trait TestSource: Send {
    fn make(&mut self, id: u64) -> anyhow::Result<Test>;
}

/// Random seed graphs (`oatest seeds gen`), inputs from the same seed.
pub struct SeedgenSource {
    pub seed: u64,
    pub cfg: SeedConfig,
}

impl TestSource for SeedgenSource {
    fn make(&mut self, id: u64) -> anyhow::Result<Test> {
        let m = generate(self.seed, id, &self.cfg);
        let inputs = inputs::generate(&m.graph, self.seed ^ id.rotate_left(17))?;
        Ok(Test { id, model: onnx::encode_model(&m), inputs, origin: "seedgen".into(), target_pass: None })
    }
}

/// Existing models from a directory, taken in turn; inputs generated per test id.
pub struct DirSource {
    files: Vec<PathBuf>,
    seed: u64,
}

impl DirSource {
    pub fn new(dir: &std::path::Path, seed: u64) -> anyhow::Result<DirSource> {
        let files = crate::util::onnx_files(dir)?;
        anyhow::ensure!(!files.is_empty(), "--seeds {}: no .onnx files", dir.display());
        Ok(DirSource { files, seed })
    }
}

impl TestSource for DirSource {
    fn make(&mut self, id: u64) -> anyhow::Result<Test> {
        // a hash of the id, so that interleaving with other sources still reaches every file
        let h = id.wrapping_add(0x9e3779b97f4a7c15).wrapping_mul(0xbf58476d1ce4e5b9).rotate_left(31);
        let path = &self.files[(h % self.files.len() as u64) as usize];
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let m = onnx::decode_model(&bytes).with_context(|| format!("{}: cannot import ONNX model", path.display()))?;
        let inputs = inputs::generate(&m.graph, self.seed ^ id.rotate_left(17))
            .with_context(|| format!("{}: cannot generate inputs", path.display()))?;
        Ok(Test { id, model: bytes, inputs, origin: path.display().to_string(), target_pass: None })
    }
}

/// Alternates between sources by test id (id % n picks the source), so every id still maps to one test.
pub struct Mix(pub Vec<Box<dyn TestSource>>);

impl TestSource for Mix {
    fn make(&mut self, id: u64) -> anyhow::Result<Test> {
        let n = self.0.len() as u64;
        self.0[(id % n) as usize].make(id)
    }
}
