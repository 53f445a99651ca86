//! Where tests come from: one interface (`TestSource`) over the seed generator, directories of models,
//! pattern synthesis and Relax-level recipes. A test is reproducible from (campaign seed, test id).

use super::recipe::{Recipe, RecipeUse};
pub use super::schedule::POOL_LAG;
use super::schedule::{Coverage, Schedule};
use crate::compiler::inputs;
use crate::graph::onnx;
use crate::seedgen::{generate, SeedConfig};
use anyhow::Context;
use std::path::PathBuf;

pub use crate::case::{Payload, Test};

/// Makes test `id` of a campaign; the same id always gives the same test. Shared by the campaign's generator
/// threads: `make` may be called for several ids at once, in any order, but for an id `i` only after every
/// test `<= i - POOL_LAG * stride` has had its `feedback`.
pub trait TestSource: Send + Sync {
    fn make(&self, id: u64) -> anyhow::Result<Test>;
    /// Told, in test-id order, how each test ended (`clean`: valid and no finding) and the passes it fired.
    fn feedback(&self, _test: &Test, _clean: bool, _fired: &[String]) {}
    /// Told, right after the `feedback` of a passing test, a second-order seed made from it (ORT's optimized
    /// graph of the test, in `test.payload`); `fired`: what the test fired.
    fn feed_seed(&self, _test: &Test, _fired: &[String]) {}
    /// Told, before the first test, how many configurations the campaign's rotation has (`Test::extra` indexes
    /// them).
    fn rotation(&self, _configs: usize) {}
}

/// Random seed graphs (`oatest seeds gen`), inputs from the same seed.
pub struct SeedgenSource {
    pub seed: u64,
    pub cfg: SeedConfig,
}

impl TestSource for SeedgenSource {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        let m = generate(self.seed, id, &self.cfg);
        let inputs = inputs::generate(&m.graph, self.seed ^ id.rotate_left(17))?;
        Ok(Test {
            id,
            payload: Payload::Onnx(onnx::encode_model(&m)),
            inputs,
            origin: "seedgen".into(),
            target_pass: None,
            extra: None,
            asks: None,
            variations: Vec::new(),
        })
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

    /// The given model files (not empty), taken in turn.
    pub fn from_files(files: Vec<PathBuf>, seed: u64) -> DirSource {
        DirSource { files, seed }
    }

    /// How many model files it takes in turn.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

impl TestSource for DirSource {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        // a hash of the id, so that interleaving with other sources still reaches every file
        let h = id.wrapping_add(0x9e3779b97f4a7c15).wrapping_mul(0xbf58476d1ce4e5b9).rotate_left(31);
        let path = &self.files[(h % self.files.len() as u64) as usize];
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let m = onnx::decode_model(&bytes).with_context(|| format!("{}: cannot import ONNX model", path.display()))?;
        let inputs = inputs::generate(&m.graph, self.seed ^ id.rotate_left(17))
            .with_context(|| format!("{}: cannot generate inputs", path.display()))?;
        Ok(Test {
            id,
            payload: Payload::Onnx(bytes),
            inputs,
            origin: path.display().to_string(),
            target_pass: None,
            extra: None,
            asks: crate::compiler::named::asked(&m.metadata)
                .with_context(|| format!("{}: metadata {}", path.display(), crate::compiler::named::SETTING))?
                .map(|n| n.name.clone()),
            variations: Vec::new(),
        })
    }
}

/// Alternates between sources by test id (id % n picks the source), so every id still maps to one test.
pub struct Mix(pub Vec<Box<dyn TestSource>>);

impl TestSource for Mix {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        let n = self.0.len() as u64;
        self.0[(id % n) as usize].make(id)
    }
    fn feedback(&self, test: &Test, clean: bool, fired: &[String]) {
        let n = self.0.len() as u64;
        self.0[(test.id % n) as usize].feedback(test, clean, fired)
    }
    fn feed_seed(&self, test: &Test, fired: &[String]) {
        let n = self.0.len() as u64;
        self.0[(test.id % n) as usize].feed_seed(test, fired)
    }
    fn rotation(&self, configs: usize) {
        self.0.iter().for_each(|s| s.rotation(configs))
    }
}

/// A model ONNX Runtime saved after optimizing a test (`optimized_model_filepath`), as a seed for the pool: its
/// unused opset imports dropped, and only when the catalog type-checks every node (contrib ops included; NCHWc
/// layouts and other ops the catalog lacks are refused), with every value's type recorded.
pub fn optimized_seed(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut m = onnx::decode_model(bytes).ok()?;
    // ORT keeps the model's opset; the catalog and the bridges follow opset-20 signatures
    if m.opset() < crate::graph::DEFAULT_OPSET {
        return None;
    }
    crate::graph::prune(&mut m);
    let mut types: Vec<_> = crate::ops::check_graph(&m.graph, true).ok()?.into_iter().collect();
    types.sort_by(|a, b| a.0.cmp(&b.0)); // in name order: a seed's bytes must not depend on a hash map's
    for (name, ty) in types {
        if m.graph.tensor_type(&name).is_none() {
            m.graph.types.insert(name, ty.into());
        }
    }
    Some(onnx::encode_model(&m))
}

/// The settings a pattern's test optimized it with ([`crate::pattern::is_setting`]) onto the model it was spliced
/// into, replacing those of an earlier splice: the optimizer treats the test as the pattern's test did.
pub fn carry_settings(m: &mut crate::graph::Model, pattern: &crate::graph::Model) {
    use crate::pattern::is_setting;
    let settings: Vec<(String, String)> = pattern.metadata.iter().filter(|(k, _)| is_setting(k)).cloned().collect();
    if !settings.is_empty() {
        m.metadata.retain(|(k, _)| !is_setting(k));
        m.metadata.extend(settings);
    }
}

/// Optimization-aware tests: a pattern spliced into a seed graph (a fresh one, or a passing test from the pool,
/// so patterns of different passes combine: high-order synthesis). A pattern kept at its own opset X below the
/// seeds' (it fires only there) takes a fresh seed written at X or a passing test written at X; the pool keeps
/// those in a part of their own, which also takes the opset-20 patterns that are the same pattern at X
/// ([`super::lower`]), so that the passes of older opsets meet the others.
pub struct SynthSource {
    pub seed: u64,
    pub cfg: SeedConfig,
    pub patterns: Vec<crate::pattern::Pattern>,
    /// Seed graphs given with `--seeds DIR` (only those whose ops the catalog knows can be spliced into).
    pub extra_seeds: Vec<crate::graph::Model>,
    /// By ai.onnx opset: (test id, model, passes it fired) of passing synthesized tests in id order; each part
    /// bounded (see [`SynthSource::pool_push`]).
    pool: std::sync::Mutex<std::collections::BTreeMap<i64, Vec<PoolEntry>>>,
    /// By pattern: its copies at the older opsets of the patterns kept at their own (see [`super::lower`]).
    lowered: Vec<Vec<(i64, std::sync::Arc<crate::pattern::Pattern>)>>,
    /// The distance between the ids this source is asked for (a shard of N makes every N-th id): the pool lag
    /// counts in steps of it, so that a shard's tests depend on (seed, id) and the shard alone.
    stride: u64,
    /// Which pattern and base to draw (`--schedule`), from what the campaign's tests fired.
    coverage: Coverage,
    /// The variations splices may make (`--vary`; none by default).
    pub vary: Vec<crate::synth::vary::Variation>,
}

type PoolEntry = (u64, std::sync::Arc<crate::graph::Model>, std::sync::Arc<[u32]>);

/// How many passing tests a test's seed pool holds: test `i` draws from the last `POOL_CAP` passing tests
/// `<= i - POOL_LAG * stride`.
pub const POOL_CAP: usize = 256;
/// The same for the tests written at one older opset (those of patterns kept at their own opset).
pub const OLDER_POOL_CAP: usize = 64;
/// The most nodes a passing test may have to join the pool (its graph's and its bodies').
pub const POOL_MAX_NODES: usize = 64;

impl SynthSource {
    /// A source over `patterns`; `stride`: every how many ids it is asked for (a shard's count).
    pub fn new(
        seed: u64,
        cfg: SeedConfig,
        patterns: Vec<crate::pattern::Pattern>,
        schedule: Schedule,
        stride: u64,
    ) -> SynthSource {
        let passes: Vec<&str> = patterns.iter().map(|p| p.meta.pass.as_str()).collect();
        let coverage = Coverage::new(schedule, &passes, stride);
        let older: std::collections::BTreeSet<i64> =
            patterns.iter().map(|p| p.model.opset()).filter(|&o| o < cfg.opset).collect();
        let lowered = patterns
            .iter()
            .map(|p| if p.model.opset() >= cfg.opset { super::lower::lowered(p, &older) } else { Vec::new() })
            .collect();
        let pool = Default::default();
        SynthSource { seed, cfg, patterns, extra_seeds: Vec::new(), pool, lowered, stride, coverage, vary: Vec::new() }
    }
}

impl TestSource for SynthSource {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        use rand::Rng as _;
        anyhow::ensure!(!self.patterns.is_empty(), "no patterns to synthesize from");
        let mut rng = crate::seedgen::rng_for(self.seed ^ 0x5eed_5eed, id);
        let pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        // the view of test `id`, by opset: the last POOL_CAP passing tests old enough (a function of (seed, id))
        let view: std::collections::BTreeMap<i64, Vec<_>> = pool
            .iter()
            .map(|(&opset, part)| {
                let end = part.partition_point(|(pid, _, _)| pid + POOL_LAG * self.stride <= id);
                let cap = self.pool_cap(opset);
                (opset, part[end.saturating_sub(cap)..end].iter().map(|e| (e.1.clone(), e.2.clone())).collect())
            })
            .collect();
        drop(pool);
        let counts = self.coverage.view(id);
        let mut last = String::new();
        for attempt in 0..6u64 {
            let k = self.coverage.pick_pattern(&counts, &mut rng);
            let own = self.patterns[k].model.opset();
            // the bases pattern `k` may take from the pool: tests at its opset (or at the seeds' and above), and,
            // for a pattern at the seeds' opset, tests at each older opset it has a copy for (spliced as that copy)
            let opsets = std::iter::once(self.part(own)).chain(self.lowered[k].iter().map(|(x, _)| *x));
            let bases: Vec<(i64, &(std::sync::Arc<crate::graph::Model>, std::sync::Arc<[u32]>))> =
                opsets.flat_map(|o| view.get(&o).into_iter().flatten().map(move |e| (o, e))).collect();
            let fired: Vec<&[u32]> = bases.iter().map(|(_, e)| &*e.1).collect();
            let mut p = &self.patterns[k];
            // a pattern kept at its own older opset (usable: it fires only there) goes into a seed written at that
            // opset, without the ops that changed since, or a passing test written there
            let base = if !bases.is_empty() && rng.random_bool(0.5) {
                let (opset, (m, _)) = bases[self.coverage.pick_base(&counts, k, &fired, &mut rng)];
                if opset != self.part(own) {
                    p = &self.lowered[k].iter().find(|(x, _)| *x == opset).expect("a base of a lowered opset").1;
                }
                (**m).clone()
            } else if own < self.cfg.opset {
                generate(self.seed, id.wrapping_mul(8).wrapping_add(attempt), &self.cfg.at_opset(own))
            } else if !self.extra_seeds.is_empty() && rng.random_bool(0.5) {
                self.extra_seeds[rng.random_range(0..self.extra_seeds.len())].clone()
            } else {
                generate(self.seed, id.wrapping_mul(8).wrapping_add(attempt), &self.cfg)
            };
            let tag = id * 8 + attempt;
            // a base with an If, Loop or Scan takes the pattern into one of its bodies half of the time
            let into_body = crate::synth::branch::has_body(&base) && rng.random_bool(crate::synth::branch::BODY_SHARE);
            let spliced = match into_body {
                true => crate::synth::branch::splice_into_body(&base, p, &mut rng, tag, &self.vary),
                false => crate::synth::splice_varied(&base, p, &mut rng, tag, None, &self.vary),
            };
            self.coverage.attempted(id, k, spliced.is_ok());
            match spliced {
                Ok((mut m, info)) => {
                    carry_settings(&mut m, &p.model);
                    let asks = crate::compiler::named::asked_name(&m.metadata);
                    let inputs = inputs::generate(&m.graph, self.seed ^ id.rotate_left(17))?;
                    let origin = format!("synth:{}", p.file_name().display());
                    return Ok(Test {
                        id,
                        payload: Payload::Onnx(onnx::encode_model(&m)),
                        inputs,
                        origin,
                        target_pass: Some(p.meta.pass.clone()),
                        // (its own random stream: the test is the same whatever the schedule picks here)
                        extra: self.coverage.pick_config(
                            &counts,
                            k,
                            &mut crate::seedgen::rng_for(self.seed ^ 0xc0f1, id),
                        ),
                        asks,
                        variations: info.variations.iter().map(|v| v.name()).collect(),
                    });
                }
                Err(e) => last = e.0,
            }
        }
        anyhow::bail!("synthesis failed 6 times (last: {last})")
    }

    fn feedback(&self, test: &Test, clean: bool, fired: &[String]) {
        let fired = self.coverage.feed(test.id, test.target_pass.as_deref(), fired, test.extra);
        if clean {
            self.pool_push(test, fired);
        }
    }

    fn rotation(&self, configs: usize) {
        self.coverage.set_configs(configs);
    }

    fn feed_seed(&self, test: &Test, fired: &[String]) {
        // a seed, not a test: it joins the pool without counting towards coverage again
        self.pool_push(test, self.coverage.ids(fired));
    }
}

impl SynthSource {
    /// Adds a passing synthesized test's model to the seed pool (in test-id order), dropping what no later test
    /// can draw.
    fn pool_push(&self, test: &Test, fired: std::sync::Arc<[u32]>) {
        if test.target_pass.is_none() {
            return;
        }
        let Some(Ok(m)) = test.payload.onnx().map(onnx::decode_model) else { return };
        // a test whose inputs have symbolic dims (freed for a free-dimension override) is no base: splicing wants
        // fixed dims; nor is one past POOL_MAX_NODES, its bodies' nodes counted (chains of splices would grow
        // without end, into bodies too, and ORT's session creation, most of a test's time, with them); one written
        // at an older opset goes to that opset's part
        if m.graph.has_symbolic_inputs() || m.graph.node_count_deep() > POOL_MAX_NODES {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let opset = self.part(m.opset());
        let part = pool.entry(opset).or_default();
        part.push((test.id, std::sync::Arc::new(m), fired));
        // every test still to be made has an id above this one, so its view ends at or after the view of
        // `test.id + 1`: what is older than that view's cap is never drawn again
        let end = part.partition_point(|(pid, _, _)| pid + POOL_LAG * self.stride <= test.id + 1);
        part.drain(..end.saturating_sub(self.pool_cap(opset)));
    }

    /// How many patterns have copies at older opsets, and how many copies.
    pub fn lowered_counts(&self) -> (usize, usize) {
        (self.lowered.iter().filter(|l| !l.is_empty()).count(), self.lowered.iter().map(Vec::len).sum())
    }

    /// The part of the pool a test written at ai.onnx `opset` goes to: its own below the seeds' opset, else one.
    fn part(&self, opset: i64) -> i64 {
        opset.min(self.cfg.opset)
    }

    /// How many tests a part of the pool lends a test: POOL_CAP at the seeds' opset, OLDER_POOL_CAP below.
    fn pool_cap(&self, part: i64) -> usize {
        if part < self.cfg.opset {
            OLDER_POOL_CAP
        } else {
            POOL_CAP
        }
    }
}

/// Relax-level synthesis for TVM: each test is a recipe (a generated seed graph, a Relax pattern, a random
/// seed) that the TVM worker turns into a module with `python/oatest_tvm_synth.py`'s `synthesize`: the seed
/// imported with from_onnx, the pattern's functions merged in and called from the seed's dataflow block through
/// bridges. The recipe is what the test's `model` bytes hold (JSON); its inputs are the seed graph's. A test
/// draws a pass first, then one of its patterns (LegalizeOps-sized pattern sets would otherwise crowd out the
/// passes with a few patterns).
pub struct RelaxSynthSource {
    pub seed: u64,
    pub cfg: SeedConfig,
    /// The patterns grouped by pass (in pass-name order).
    by_pass: Vec<Vec<crate::pattern::relax::RelaxPattern>>,
    /// Modules with TVM's own structure (several functions, R.If, call_tir, ...) half of the tests splice their
    /// pattern into (see [`RelaxSynthSource::with_hosts`]).
    hosts: Vec<crate::pattern::relax::RelaxPattern>,
    /// `--vary extra-reader`: half of the tests not spliced into a host whose pattern has an inner value (the
    /// check's `exposable`) return it from the pattern's entry too (the runner's `expose_inner`); of the other
    /// kinds `dtype` and `attr` are built for Relax patterns.
    pub extra_reader: bool,
    /// `--vary dtype`: half of the tests not spliced into a host whose pattern may be retyped (the check's
    /// `dtypes`) write its float32 values in one of those dtypes (the runner's `retyped`).
    pub dtype: bool,
    /// `--vary attr`: half of the tests not spliced into a host whose pattern has attribute sites (the check's
    /// `attr_sites`) make one site's change (the runner's `varied_attr`: an axis written negative or moved, a
    /// reduction's `keepdims` flipped).
    pub attr: bool,
}

/// Whether `host` may take `p`: none of their function names clash (the pattern's entry is renamed, but which
/// one it is the runner decides, so every name but `main` counts), and `p`'s pass may be hosted at all
/// (`unhosted` in python/oatest_tvm_pipeline.json).
fn hostable(host: &crate::pattern::relax::RelaxPattern, p: &crate::pattern::relax::RelaxPattern) -> bool {
    crate::compiler::tvm::hostable_pass(&p.pass)
        && !std::ptr::eq(host, p)
        && host.script != p.script
        && !p.functions.iter().any(|f| f != "main" && host.functions.contains(f))
}

impl RelaxSynthSource {
    pub fn new(seed: u64, cfg: SeedConfig, patterns: Vec<crate::pattern::relax::RelaxPattern>) -> RelaxSynthSource {
        let mut groups: std::collections::BTreeMap<String, Vec<_>> = Default::default();
        for p in patterns {
            groups.entry(p.pass.clone()).or_default().push(p);
        }
        let by_pass = groups.into_values().collect();
        RelaxSynthSource { seed, cfg, by_pass, hosts: Vec::new(), extra_reader: false, dtype: false, attr: false }
    }

    /// Hosts for half of the tests: modules from TVM's tests that run cleanly at the reference as hosts.
    pub fn with_hosts(mut self, hosts: Vec<crate::pattern::relax::RelaxPattern>) -> RelaxSynthSource {
        self.hosts = hosts;
        self
    }
}

impl TestSource for RelaxSynthSource {
    fn make(&self, id: u64) -> anyhow::Result<Test> {
        use rand::Rng as _;
        anyhow::ensure!(!self.by_pass.is_empty(), "no Relax patterns to synthesize from");
        let mut rng = crate::seedgen::rng_for(self.seed ^ 0x7e1a_5eed, id);
        let m = generate(self.seed, id, &self.cfg);
        let inputs = inputs::generate(&m.graph, self.seed ^ id.rotate_left(17))?;
        let group = &self.by_pass[rng.random_range(0..self.by_pass.len())];
        let p = &group[rng.random_range(0..group.len())];
        let mut recipe = Recipe::new(&onnx::encode_model(&m), p, rng.random(), RecipeUse::Test);
        let mut origin = format!("synth:{}:{}", p.pass, p.provenance.test.as_deref().unwrap_or("?"));
        if !self.hosts.is_empty() && rng.random_bool(0.5) {
            let host = &self.hosts[rng.random_range(0..self.hosts.len())];
            if hostable(host, p) {
                recipe = recipe.hosted(&host.script);
                origin += &format!(" in host {}", host.provenance.test.as_deref().unwrap_or("?"));
            }
        }
        let mut variations = Vec::new();
        // (its own random stream: the test is the same with and without the variation but for it)
        if self.extra_reader
            && p.exposable
            && recipe.host.is_none()
            && crate::seedgen::rng_for(self.seed ^ 0xe8_7ead, id).random_bool(0.5)
        {
            recipe.vary.push(crate::synth::vary::Variation::ExtraReader.name().to_string());
            variations.push(crate::synth::vary::Variation::ExtraReader.name());
        }
        let mut pick = crate::seedgen::rng_for(self.seed ^ 0xd7_e5, id);
        if self.dtype && !p.dtypes.is_empty() && recipe.host.is_none() && pick.random_bool(0.5) {
            let dtype = &p.dtypes[pick.random_range(0..p.dtypes.len())];
            recipe.vary.push(format!("{}:{dtype}", crate::synth::vary::Variation::Dtype.name()));
            variations.push(crate::synth::vary::Variation::Dtype.name());
        }
        let mut pick = crate::seedgen::rng_for(self.seed ^ 0xa7_7e, id);
        if self.attr && !p.attr_sites.is_empty() && recipe.host.is_none() && pick.random_bool(0.5) {
            let site = p.attr_sites[pick.random_range(0..p.attr_sites.len())];
            recipe.vary.push(format!("{}:{site}", crate::synth::vary::Variation::Attr.name()));
            variations.push(crate::synth::vary::Variation::Attr.name());
        }
        let payload = Payload::Recipe(Box::new(recipe));
        let target_pass = Some(p.pass.clone());
        Ok(Test { id, payload, inputs, origin, target_pass, extra: None, asks: None, variations })
    }
}
