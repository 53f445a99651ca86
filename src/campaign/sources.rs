//! The campaign's test sources, built from its settings: Relax recipes from checked TVM patterns, ONNX
//! synthesis from the patterns that still fire, or generated seeds; mixed with `--seeds DIR` models.

use super::settings::{Mode, Settings};
use crate::compiler::worker::WorkerSpec;
use crate::compiler::TargetKind;
use crate::seedgen::SeedConfig;
use crate::synth::source::{DirSource, Mix, RelaxSynthSource, SeedgenSource, SynthSource, TestSource};

/// Relax synthesis: the library's patterns a campaign can target (`RelaxPattern::target`: an optional pass of
/// the TVM pipeline firing with its default arguments, or a pass the runner inserts, with the test's recorded
/// arguments), checked in TVM workers spliced into a probe seed (`synth::relax_usable::check_library`).
fn relax_source(
    s: &Settings,
    dir: &std::path::Path,
    cfg: SeedConfig,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<RelaxSynthSource> {
    use crate::pattern::relax::load_relax_library;
    use crate::synth::relax_usable::{check_library, Usability as Verdict};
    let t0 = std::time::Instant::now();
    let (patterns, bad) = load_relax_library(dir)?;
    for b in bad.iter().take(5) {
        eprintln!("warning: skipped {b}");
    }
    let mut spec = WorkerSpec::new(TargetKind::Tvm)?;
    spec.timeout = std::time::Duration::from_millis(s.timeout_ms);
    let pool = crate::compiler::worker::Pool::start(&spec, s.jobs.clamp(1, patterns.len().max(1)))?;
    // the passes a test can target: the optional and insertable passes of the runner, as the worker reports them
    let optional = pool.info().optional_passes;
    let pipeline = crate::compiler::tvm::Pipeline::embedded();
    let n = patterns.len();
    let (candidates, _): (Vec<_>, Vec<_>) =
        patterns.into_iter().partition(|p| optional.contains(&p.pass) && p.target(&pipeline).is_ok());
    let n_candidates = candidates.len();
    let passes: std::collections::BTreeSet<String> = candidates.iter().map(|p| p.pass.clone()).collect();
    let probe = crate::seedgen::generate(0, 0, &cfg);
    let (checked, from_cache) = check_library(&pool, candidates, &probe, stop)?;
    let mut rejected: std::collections::BTreeMap<&str, usize> = Default::default();
    let (mut usable, mut shrunk) = (Vec::new(), 0);
    let mut fails_at_all: std::collections::BTreeMap<String, usize> = Default::default();
    for (p, v) in checked {
        shrunk += (v == Verdict::Usable && p.shrunk) as usize;
        match v {
            Verdict::Usable => usable.push(p),
            Verdict::NoSplice(_) => *rejected.entry("do not splice").or_default() += 1,
            Verdict::ReferenceFails(_) => *rejected.entry("fail at the reference").or_default() += 1,
            Verdict::DoesNotFire => *rejected.entry("do not fire once spliced").or_default() += 1,
            Verdict::Nondeterministic => *rejected.entry("are nondeterministic").or_default() += 1,
            Verdict::FailsAtAll(why) => {
                *rejected.entry("fail at `all` on their own").or_default() += 1;
                *fails_at_all
                    .entry(format!("{} ({})", why.chars().take(160).collect::<String>(), p.pass))
                    .or_default() += 1;
            }
        }
    }
    usable.sort_by(|a, b| (&a.pass, &a.script).cmp(&(&b.pass, &b.script)));
    let lost: Vec<&String> = passes.iter().filter(|p| !usable.iter().any(|u| &u.pass == *p)).collect();
    if !lost.is_empty() {
        eprintln!("passes whose every pattern the check rejected: {lost:?}");
    }
    let mut why: Vec<String> = rejected.iter().map(|(k, v)| format!("{v} {k}")).collect();
    if shrunk > 0 {
        why.push(format!("{shrunk} usable once shrunk"));
    }
    eprintln!(
        "{} of {n} Relax patterns in {} are usable, over {} passes ({n_candidates} over {} passes can be targeted, \
         see `oatest patterns stats`; of those {}), checked in {:.1} s ({from_cache} verdicts cached)",
        usable.len(),
        dir.display(),
        passes.len() - lost.len(),
        passes.len(),
        if why.is_empty() { "none rejected".to_string() } else { why.join(", ") },
        t0.elapsed().as_secs_f64()
    );
    if !fails_at_all.is_empty() {
        // not findings of synthesized tests: each pattern fails alone; listed once, for a look by hand
        let mut by_count: Vec<(&String, &usize)> = fails_at_all.iter().collect();
        by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        eprintln!("patterns whose probe fails at `all` on its own (not synthesized from), by message and pass:");
        for (why, n) in by_count {
            eprintln!("  {n:>3} {why}");
        }
    }
    anyhow::ensure!(!usable.is_empty(), "no usable Relax patterns in {}", dir.display());
    // hosts: a sample of the usable patterns with TVM's own structure, each checked with a plain guest
    let t1 = std::time::Instant::now();
    let mut structured: Vec<_> = usable.iter().filter(|p| crate::synth::relax_usable::structured(p)).cloned().collect();
    let n_structured = structured.len();
    {
        use rand::seq::SliceRandom as _;
        structured.shuffle(&mut crate::seedgen::rng_for(s.seed ^ 0x4057, 0));
    }
    structured.truncate(MAX_HOSTS);
    let guest = usable.iter().find(|p| p.functions.len() == 1 && !structured.iter().any(|h| h.script == p.script));
    let hosts = match guest {
        Some(g) => crate::synth::relax_usable::check_hosts(&pool, structured, g, &probe)?,
        None => Vec::new(),
    };
    eprintln!(
        "{} hosts with TVM's structure (of {n_structured} structured patterns, {MAX_HOSTS} sampled) run cleanly \
         with a pattern spliced in, checked in {:.1} s",
        hosts.len(),
        t1.elapsed().as_secs_f64()
    );
    let mut source = RelaxSynthSource::new(s.seed, cfg, usable).with_hosts(hosts);
    use crate::synth::vary::Variation;
    source.extra_reader = s.vary.contains(&Variation::ExtraReader);
    source.dtype = s.vary.contains(&Variation::Dtype);
    source.attr = s.vary.contains(&Variation::Attr);
    let built = [Variation::ExtraReader, Variation::Dtype, Variation::Attr];
    let other: Vec<&str> = s.vary.iter().filter(|v| !built.contains(v)).map(|v| v.name()).collect();
    if !other.is_empty() {
        eprintln!(
            "note: --vary {} is not built for TVM's Relax patterns (extra-reader, dtype and attr are)",
            other.join(", ")
        );
    }
    Ok(source)
}

/// ONNX synthesis from a library's `patterns`: those that still fire at the seeds' opset (checked in workers),
/// with the `--seeds` models that type-check as further bases.
fn onnx_synth(
    s: &Settings,
    dir: &std::path::Path,
    cfg: SeedConfig,
    patterns: Vec<crate::pattern::Pattern>,
) -> anyhow::Result<SynthSource> {
    let n = patterns.len();
    let mut spec = WorkerSpec::new(s.target.first().clone())?;
    spec.ort_lib = s.ort_lib.clone();
    let (usable, lost) = crate::synth::usable::usable_ort_patterns(&spec, s.jobs, patterns, cfg.opset)?;
    let own = usable.iter().filter(|p| p.model.opset() < cfg.opset).count();
    let newer = usable.iter().filter(|p| p.model.opset() > cfg.opset).count();
    eprintln!(
        "{} of {n} patterns in {} still fire at opset {} ({own} of them only at their own older opset, \
         {newer} at their own newer one, where their tests are written): synthesizing from them",
        usable.len(),
        dir.display(),
        cfg.opset
    );
    if !lost.is_empty() {
        let list: Vec<String> = lost.iter().map(|(pass, why)| format!("{pass} ({why})")).collect();
        eprintln!("passes of the library no test targets: {}", list.join(", "));
    }
    anyhow::ensure!(!usable.is_empty(), "no usable patterns");
    let mut synth = SynthSource::new(s.seed, cfg, usable, s.schedule, s.shard.count);
    synth.vary = s.vary.clone();
    let (lowered, copies) = synth.lowered_counts();
    if copies > 0 {
        eprintln!(
            "{lowered} of them are also patterns of older opsets ({copies} copies): they also go into the tests \
             written at those opsets"
        );
    }
    if let Some(dir) = &s.seeds_dir {
        // seed graphs from --seeds serve as synthesis bases too (those the op catalog can type-check)
        for f in crate::util::onnx_files(dir)? {
            match crate::graph::onnx::load(&f) {
                Ok(m) if crate::ops::check_graph(&m.graph, false).is_ok() => synth.extra_seeds.push(m),
                Ok(_) => eprintln!("note: {} is not used as a synthesis base (it does not type-check)", f.display()),
                Err(e) => eprintln!("warning: {e:#}"),
            }
        }
    }
    Ok(synth)
}

/// ort-transformers: its library's whole models (granularity `model`) run as they are, and the block and
/// subgraph patterns `oatest extract ort-transformers` cut from them, with the whole models whose ports are typed,
/// spliced into seeds (when there are any), alternating with generated seeds.
fn ortx_source(s: &Settings, dir: &std::path::Path, cfg: SeedConfig) -> anyhow::Result<Box<dyn TestSource>> {
    use crate::pattern::{Granularity, Pattern};
    let (mut models, mut cut, mut whole) = (Vec::new(), Vec::new(), 0);
    for f in crate::util::onnx_files(dir)? {
        match Pattern::load(&f) {
            Ok(p) if p.meta.granularity != Granularity::Model => cut.push(p),
            // a whole model whose ports are typed is also spliced (those small enough: `usable_ort_patterns`)
            Ok(p) => {
                if !p.meta.inputs.is_empty() {
                    whole += 1;
                    cut.push(p);
                }
                models.push(f)
            }
            Err(_) => models.push(f),
        }
    }
    anyhow::ensure!(!models.is_empty() || !cut.is_empty(), "{}: no ort-transformers models or patterns", dir.display());
    eprintln!(
        "{} whole models ({whole} with typed ports: spliced too) and {} cut patterns in {}",
        models.len(),
        cut.len() - whole,
        dir.display()
    );
    let mut parts: Vec<Box<dyn TestSource>> = vec![Box::new(SeedgenSource { seed: s.seed, cfg: cfg.clone() })];
    if !models.is_empty() {
        parts.push(Box::new(DirSource::from_files(models, s.seed)));
    }
    if !cut.is_empty() {
        parts.push(Box::new(onnx_synth(s, dir, cfg, cut)?));
    }
    Ok(Box::new(Mix(parts)))
}

/// How many structured patterns a campaign checks as hosts.
const MAX_HOSTS: usize = 32;

/// (op, dtype) pairs TVM refuses, measured into docs/tvm-unsupported.tsv (`*`: the whole op).
fn tvm_avoid() -> Vec<(String, Option<crate::graph::DType>)> {
    include_str!("../../docs/tvm-unsupported.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let mut cols = l.split('\t');
            let (op, dt) = (cols.next()?.to_string(), cols.next()?);
            if dt == "*" {
                return Some((op, None));
            }
            crate::graph::DType::ALL.iter().find(|d| d.name() == dt).map(|d| (op, Some(*d)))
        })
        .collect()
}

/// Share of an ORT campaign's generated seeds that hold a control-flow node.
pub const CONTROL_FLOW_SHARE: f64 = 0.125;

/// The campaign's test source; `stop` (SIGINT/SIGTERM) ends a TVM pattern check early, with an error.
pub fn sources(s: &Settings, stop: &std::sync::atomic::AtomicBool) -> anyhow::Result<Box<dyn TestSource>> {
    // ORT campaigns also draw ONNX Runtime's contrib ops (other targets cannot run them) and put an If, Loop or
    // Scan with generated bodies into one seed in eight (ORT's transformers recurse into subgraphs)
    let contrib = s.target.is(TargetKind::Ort);
    let control_flow = if contrib { CONTROL_FLOW_SHARE } else { 0.0 };
    let mut cfg = SeedConfig { max_nodes: s.max_nodes, contrib, control_flow, ..Default::default() };
    if *s.target.first() == TargetKind::Tvm {
        cfg.avoid = tvm_avoid();
    }
    let gen: Box<dyn TestSource> = match (s.mode, &s.patterns) {
        (Mode::Synth, Some(dir)) if s.target.is(TargetKind::Tvm) => Box::new(relax_source(s, dir, cfg.clone(), stop)?),
        // ort-transformers: the whole models ORT's optimizer tests optimize, with fresh inputs per test, and the
        // patterns cut from them spliced into seeds, alternating with generated seeds
        (Mode::Synth, Some(dir)) if s.target.is(TargetKind::OrtTransformers) => ortx_source(s, dir, cfg.clone())?,
        (Mode::Synth, Some(dir)) => {
            let first = s.target.first().name();
            let (patterns, bad) = crate::pattern::load_library(dir, first)?;
            for b in bad.iter().take(5) {
                eprintln!("warning: skipped {b}");
            }
            anyhow::ensure!(!patterns.is_empty(), "{}: no {first} patterns", dir.display());
            Box::new(onnx_synth(s, dir, cfg.clone(), patterns)?)
        }
        _ => Box::new(SeedgenSource { seed: s.seed, cfg }),
    };
    let all: Box<dyn TestSource> = match &s.seeds_dir {
        Some(dir) => Box::new(Mix(vec![gen, Box::new(DirSource::new(dir, s.seed)?)])),
        None => gen,
    };
    Ok(if s.target.is(TargetKind::OrtTransformers) {
        Box::new(ModelTypes { inner: all, types: crate::compiler::ortx::model_types() })
    } else {
        all
    })
}

/// The ort-transformers target's tests: each model says which model type the optimizer treats it as
/// (metadata `oatest.model_type`): a generated one rotates through the pass table's types by test id, a
/// pattern model keeps its own; a finding and its minimized model keep the type they were found with.
struct ModelTypes {
    inner: Box<dyn TestSource>,
    types: Vec<String>,
}

impl TestSource for ModelTypes {
    fn make(&self, id: u64) -> anyhow::Result<crate::case::Test> {
        let mut t = self.inner.make(id)?;
        if let (crate::case::Payload::Onnx(model), false) = (&mut t.payload, self.types.is_empty()) {
            *model =
                crate::compiler::ortx::stamp_model_type(model, &self.types[(id % self.types.len() as u64) as usize])
                    .map_err(|e| anyhow::anyhow!("test {id} ({}): {e}", t.origin))?;
        }
        Ok(t)
    }
    fn feedback(&self, test: &crate::case::Test, clean: bool, fired: &[String]) {
        self.inner.feedback(test, clean, fired)
    }
    fn rotation(&self, configs: usize) {
        self.inner.rotation(configs)
    }
    fn feed_seed(&self, test: &crate::case::Test, fired: &[String]) {
        self.inner.feed_seed(test, fired)
    }
}
