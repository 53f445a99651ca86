//! Which patterns a campaign can use: each library pattern is checked in workers the way synthesis will use it
//! (ONNX patterns: still fire their pass at the seeds' opset; Relax patterns: splice into a probe seed, run
//! cleanly and deterministically at the reference, fire their pass at `all`; verdicts cached on disk).

use super::recipe::{Recipe, RecipeUse};
use crate::oracle::same_outputs;
use crate::pattern::relax::RelaxPattern;
use serde::{Deserialize, Serialize};

/// Patterns larger than this are left out of synthesis: their sessions cost more than they add.
const MAX_PATTERN_NODES: usize = 32;
const MAX_PATTERN_CONST_BYTES: usize = 64 << 10;
const MAX_PORT_ELEMS: usize = 8192;

/// Symbolic and empty dims (a captured model's batch size, which extraction ran as 0) fixed to 1 in a pattern's
/// graph inputs and outputs and its ports, so that it can be fed and spliced; inner values declared with such
/// dims lose that declaration. Verification then tells whether the pattern still fires.
fn concretize(p: &mut crate::pattern::Pattern) {
    use crate::graph::{Dim, TensorType, ValueType};
    let free = |d: &Dim| matches!(d, Dim::Sym(_) | Dim::Fixed(0));
    let symbolic = |t: &TensorType| t.shape.as_ref().is_some_and(|s| s.iter().any(free));
    let fix = |t: &mut TensorType| {
        for d in t.shape.iter_mut().flatten().filter(|d| free(d)) {
            *d = Dim::Fixed(1);
        }
    };
    let g = &mut p.model.graph;
    let io: Vec<String> = g.inputs.iter().chain(&g.outputs).cloned().collect();
    g.types.retain(|n, vt| io.contains(n) || !matches!(vt, ValueType::Tensor(t) if symbolic(t)));
    for n in &io {
        if let Some(ValueType::Tensor(t)) = g.types.get_mut(n) {
            fix(t);
        }
    }
    for port in p.meta.inputs.iter_mut().chain(p.meta.outputs.iter_mut()) {
        fix(&mut port.ty);
    }
}

/// A pattern whose ports exceed [`MAX_PORT_ELEMS`] with its inputs' spatial dims (from the third on) cut to 8 and,
/// if still too large, the first dim to 1, its outputs re-inferred by the op catalog (every op must be known);
/// false, and the pattern unchanged, when that is not possible. Verification then tells whether it still fires.
fn shrink(p: &mut crate::pattern::Pattern) -> bool {
    use crate::graph::{Dim, ValueType};
    let too_big = |p: &crate::pattern::Pattern| {
        p.meta.inputs.iter().chain(&p.meta.outputs).any(|port| port.ty.numel().is_some_and(|n| n > MAX_PORT_ELEMS))
    };
    if !too_big(p) {
        return false;
    }
    let mut g = p.model.graph.clone();
    for round in 0..2 {
        for name in g.inputs.clone() {
            let Some(ValueType::Tensor(t)) = g.types.get_mut(&name) else { continue };
            for (k, d) in t.shape.iter_mut().flatten().enumerate() {
                match (round, k, &d) {
                    (0, 2.., Dim::Fixed(n)) if *n > 8 => *d = Dim::Fixed(8),
                    (1, 0, Dim::Fixed(n)) if *n > 1 => *d = Dim::Fixed(1),
                    _ => {}
                }
            }
        }
        let inputs = g.inputs.clone();
        g.types.retain(|n, _| inputs.contains(n));
        let Ok(types) = crate::ops::infer_types(&g, true) else { return false };
        for o in g.outputs.clone() {
            let Some(t) = types.get(&o) else { return false };
            g.types.insert(o, t.clone().into());
        }
        let mut q = p.clone();
        q.model.graph = g.clone();
        for port in q.meta.inputs.iter_mut().chain(q.meta.outputs.iter_mut()) {
            match q.model.graph.tensor_type(&port.name) {
                Some(t) => port.ty = t,
                None => return false,
            }
        }
        if !too_big(&q) {
            *p = q;
            return true;
        }
    }
    false
}

/// Whether a pattern's results are random by the ONNX spec (a Dropout in training mode, the Random* ops): its
/// unoptimized run is no reference, and an optimizer that removes the randomness (ORT's inference build drops
/// every Dropout) would be reported as computing wrong results.
fn random(p: &crate::pattern::Pattern) -> bool {
    let g = &p.model.graph;
    g.node_ids().map(|id| g.node(id)).any(|n| match n.op.name.as_str() {
        "RandomNormal" | "RandomNormalLike" | "RandomUniform" | "RandomUniformLike" | "Bernoulli" | "Multinomial" => {
            true
        }
        "Dropout" => n.inputs.get(2).is_some_and(|t| {
            !t.is_empty()
                && g.initializers.get(t).and_then(|v| v.raw().map(|r| r.iter().all(|b| *b == 0))) != Some(true)
        }),
        _ => false,
    })
}

fn constant_bytes(p: &crate::pattern::Pattern) -> usize {
    p.model.graph.initializers.values().map(|t| t.raw().map_or(0, |r| r.len())).sum()
}

/// The patterns of a library that still fire their pass when placed in a model of ai.onnx opset `opset`
/// (seeds are written at that opset): each is bumped to max(its opset, `opset`), its symbolic port dims fixed to
/// 1, shrunk when its ports are too large, and verified in a worker (patterns whose results are random by the
/// spec, [`random`], are left out). Also returns the passes none of whose
/// patterns is usable, each with why (`too large`, `does not fire at opset N`).
pub fn usable_ort_patterns(
    spec: &crate::compiler::worker::WorkerSpec,
    jobs: usize,
    patterns: Vec<crate::pattern::Pattern>,
    opset: i64,
) -> anyhow::Result<(Vec<crate::pattern::Pattern>, Vec<(String, String)>)> {
    let pool = crate::compiler::worker::Pool::start(spec, jobs.clamp(1, patterns.len().max(1)))?;
    let mut why: std::collections::BTreeMap<String, [usize; 3]> = Default::default();
    let small = |p: &crate::pattern::Pattern| {
        p.model.graph.node_count() <= MAX_PATTERN_NODES
            && constant_bytes(p) <= MAX_PATTERN_CONST_BYTES
            && p.meta
                .inputs
                .iter()
                .chain(&p.meta.outputs)
                .all(|port| port.ty.numel().is_some_and(|n| n > 0 && n <= MAX_PORT_ELEMS))
    };
    let mut bumped = Vec::new();
    for mut p in patterns {
        concretize(&mut p);
        shrink(&mut p);
        let e = why.entry(p.meta.pass.clone()).or_default();
        e[0] += 1;
        if !small(&p) || random(&p) {
            e[1] += 1;
            continue;
        }
        let old = p.model.opsets.remove("ai.onnx");
        let v = p.model.opsets.entry(String::new()).or_insert(old.unwrap_or(opset));
        *v = (*v).max(opset);
        bumped.push(p);
    }
    let ok: Vec<crate::pattern::Pattern> =
        pool.map(bumped, |w, p| crate::pattern::extract::verify(w, &p).then_some(p)).into_iter().flatten().collect();
    for p in &ok {
        why.entry(p.meta.pass.clone()).or_default()[2] += 1;
    }
    let lost = why
        .into_iter()
        .filter(|(_, [_, _, usable])| *usable == 0)
        .map(|(pass, [total, big, _])| {
            let reason = match big {
                0 => format!("{total} do not fire at opset {opset}"),
                b if b == total => format!("{total} too large, without static ports or random"),
                b => format!("{b} too large or random, {} do not fire at opset {opset}", total - b),
            };
            (pass, reason)
        })
        .collect();
    Ok((ok, lost))
}

/// Why a pattern is not used for synthesis (see [`check_library`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Usability {
    Usable,
    /// It does not parse, its entry does not take static tensors, or it does not splice into a well-formed
    /// module.
    NoSplice(String),
    /// Spliced into the probe seed, the reference configuration fails (it would make invalid tests).
    ReferenceFails(String),
    /// Spliced into the probe seed and compiled at `all`, its pass does not fire.
    DoesNotFire,
    /// Two reference runs of the probe disagree (e.g. it returns memory it never wrote): its tests could
    /// never be judged.
    Nondeterministic,
    /// Spliced into the probe seed, it builds at the reference but fails at `all` on its own: its pass's
    /// precondition, an argument recorded for its test's module (a parameter name, a function that must return a
    /// scalar), or a compiler bug. Every test built on it would fail the same way, so it is not synthesized from;
    /// the campaign reports the failures once, by message, for a look by hand.
    FailsAtAll(String),
}

/// Part of the cache key: bump when what [`check_library`] checks changes.
const CHECK_VERSION: u32 = 5;

/// What [`check_library`] keeps per pattern (keyed by the script's hash) in its cache file.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Checked {
    verdict: Usability,
    ir_json: Option<String>,
    /// The script synthesis uses, when the check shrank the pattern.
    shrunk: Option<String>,
    /// How the probe failed at `all`, if it did (a bug the pattern leads to, or a seed TVM cannot take).
    all_failed: Option<String>,
}

/// The file where checks are kept between campaigns: `$OATEST_CACHE_DIR`, else `$XDG_CACHE_HOME/oatest`, else
/// `~/.cache/oatest`; one file per (runner source, TVM version, probe seed), so any change re-checks.
fn cache_file(key: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("OATEST_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| std::path::PathBuf::from(d).join("oatest")))
        .or_else(|| std::env::var_os("HOME").map(|d| std::path::PathBuf::from(d).join(".cache").join("oatest")))?;
    Some(dir.join(format!("tvm-pattern-checks-{key}.json")))
}

/// How many check files the cache keeps (each runner, TVM version or probe change starts a new one).
const CACHE_FILES_KEPT: usize = 4;

/// Removes all but the [`CACHE_FILES_KEPT`] most recently written check files beside `kept`.
fn prune_cache(kept: &std::path::Path) {
    let Some(dir) = kept.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("tvm-pattern-checks-")))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, p) in files.into_iter().skip(CACHE_FILES_KEPT).filter(|(_, p)| p != kept) {
        let _ = std::fs::remove_file(p);
    }
}

/// The check cache of one (runner, TVM version, probe): verdicts by script hash, host checks by
/// `host:<host hash>:<guest hash>`, written to its file as checks finish (every [`SAVE_EVERY`]) and at the end, so
/// an interrupted first run keeps what it checked.
struct Cache {
    file: Option<std::path::PathBuf>,
    map: std::collections::BTreeMap<String, Checked>,
    dirty: bool,
    saved: std::time::Instant,
}

/// How often a running check writes its cache file.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);
/// How often a running check reports its progress.
const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

impl Cache {
    fn open(pool: &crate::compiler::worker::Pool, probe_bytes: &[u8]) -> Cache {
        let runner = crate::compiler::tvm::runner_fingerprint();
        let key = crate::util::stable_hash(&format!(
            "{CHECK_VERSION}\n{runner}\n{}\n{}",
            pool.info().version,
            crate::util::to_hex(probe_bytes)
        ));
        let file = cache_file(&key);
        let map = file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        Cache { file, map, dirty: false, saved: std::time::Instant::now() }
    }

    fn insert(&mut self, key: String, c: Checked) {
        self.map.insert(key, c);
        self.dirty = true;
        if self.saved.elapsed() >= SAVE_EVERY {
            self.save();
        }
    }

    fn save(&mut self) {
        self.saved = std::time::Instant::now();
        let Some(f) = self.file.as_ref().filter(|_| self.dirty) else { return };
        let write = f
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(anyhow::Error::from)
            .and_then(|_| crate::util::write_atomic(f, &serde_json::to_vec(&self.map)?));
        match write {
            Ok(()) => self.dirty = false,
            Err(e) => eprintln!("warning: cannot keep the pattern checks in {}: {e:#}", f.display()),
        }
        prune_cache(f);
    }
}

/// Progress of a running check, on stderr every [`REPORT_EVERY`]: done of total, the rate and what is left.
struct Progress {
    what: &'static str,
    total: usize,
    done: usize,
    kept: usize,
    t0: std::time::Instant,
    said: std::time::Instant,
}

impl Progress {
    fn new(what: &'static str, total: usize) -> Progress {
        let now = std::time::Instant::now();
        Progress { what, total, done: 0, kept: 0, t0: now, said: now }
    }

    fn step(&mut self, kept: bool) {
        self.done += 1;
        self.kept += kept as usize;
        if self.said.elapsed() >= REPORT_EVERY && self.done < self.total {
            self.said = std::time::Instant::now();
            let t = self.t0.elapsed().as_secs_f64();
            let left = t / self.done as f64 * (self.total - self.done) as f64;
            eprintln!(
                "  checked {}/{} {} ({} usable) in {t:.0} s, about {left:.0} s left (verdicts are cached for later \
                 runs)",
                self.done, self.total, self.what, self.kept
            );
        }
    }
}

/// Checks each pattern in TVM workers the way synthesis will use it, spliced into `probe` (a generated seed
/// with its inputs): it must splice (parse, static tensor parameters, a well-formed result), the spliced
/// module must run cleanly at the reference configuration with TIR's argument assertions on and give the
/// same outputs twice more without them (deterministic), and compiled at `all` its pass
/// must fire, and it must build there (a pattern that fails at `all` on its own is [`Usability::FailsAtAll`]: every
/// test of it would be the same failure, which the campaign lists once instead).
/// Returns every pattern with its verdict (usable ones carry their module JSON) and how many verdicts came
/// from the cache (see [`cache_file`]); reports progress while it checks.
pub fn check_library(
    pool: &crate::compiler::worker::Pool,
    patterns: Vec<RelaxPattern>,
    probe: &crate::graph::Model,
) -> anyhow::Result<(Vec<(RelaxPattern, Usability)>, usize)> {
    use crate::compiler::{Config, Level};
    let probe_bytes = crate::graph::onnx::encode_model(probe);
    let inputs = crate::compiler::inputs::generate(&probe.graph, 0)?;
    let cache = std::sync::Mutex::new(Cache::open(pool, &probe_bytes));
    let (known, todo): (Vec<_>, Vec<_>) = {
        let c = cache.lock().unwrap();
        patterns.into_iter().partition(|p| c.map.contains_key(&crate::util::stable_hash(&p.script)))
    };
    let from_cache = known.len();
    if !todo.is_empty() {
        eprintln!(
            "checking {} Relax patterns not checked before with this TVM and runner ({from_cache} cached): about \
             1 s of CPU each",
            todo.len()
        );
    }
    let progress = std::sync::Mutex::new(Progress::new("patterns", todo.len()));
    let (reference, all) = (Config::level(Level::Disable), Config::level(Level::All));
    let fresh = pool.map(todo, |w, mut p| {
        let key = crate::util::stable_hash(&p.script);
        let c = check_one(w, &mut p, &probe_bytes, &inputs, &reference, &all);
        progress.lock().unwrap().step(c.verdict == Usability::Usable);
        cache.lock().unwrap().insert(key, c.clone());
        (p, c.verdict)
    });
    let mut cache = cache.into_inner().unwrap();
    cache.save();
    let mut out = fresh;
    for mut p in known {
        let c = &cache.map[&crate::util::stable_hash(&p.script)];
        p.ir_json = c.ir_json.clone();
        if let Some(s) = &c.shrunk {
            p.script = s.clone();
            p.shrunk = true;
        }
        // verdicts cached before FailsAtAll existed said Usable with the failure beside them
        let verdict = match (&c.verdict, &c.all_failed) {
            (Usability::Usable, Some(why)) => Usability::FailsAtAll(why.clone()),
            (v, _) => v.clone(),
        };
        out.push((p, verdict));
    }
    Ok((out, from_cache))
}

/// One pattern's check (see [`check_library`]); fills its module JSON and, when shrunk, its script.
fn check_one(
    w: &mut crate::compiler::worker::Worker,
    p: &mut RelaxPattern,
    probe_bytes: &[u8],
    inputs: &[crate::compiler::NamedTensor],
    reference: &crate::compiler::Config,
    all: &crate::compiler::Config,
) -> Checked {
    use crate::compiler::Status;
    let check = Recipe::new(probe_bytes, p, 0, RecipeUse::Check).to_bytes();
    let o = w.run(&check, &[], reference);
    if o.status != Status::Ok {
        let verdict = Usability::NoSplice(format!("{}: {}", o.status.kind(), o.status.message()));
        return Checked { verdict, ir_json: None, shrunk: None, all_failed: None };
    }
    let text = |name: &str| {
        o.outputs.iter().find(|t| t.name == name).and_then(|t| match &t.tensor.data {
            crate::graph::TensorData::Raw(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        })
    };
    p.ir_json = text("pattern_ir");
    let original = std::mem::take(&mut p.script);
    let shrunk = text("pattern_script").filter(|s| *s != original);
    p.script = shrunk.clone().unwrap_or(original);
    p.shrunk = shrunk.is_some();
    let (verdict, all_failed) = match reference_verdict(w, p, probe_bytes, None, inputs, reference) {
        Some(v) => (v, None),
        None => {
            let a = w.run(&Recipe::new(probe_bytes, p, 0, RecipeUse::Test).to_bytes(), inputs, all);
            let note = (a.status != Status::Ok).then(|| format!("{}: {}", a.status.kind(), a.status.message()));
            let verdict = match &note {
                Some(why) => Usability::FailsAtAll(why.clone()),
                None if !a.passes_fired.contains(&p.pass) => Usability::DoesNotFire,
                None => Usability::Usable,
            };
            (verdict, note)
        }
    };
    Checked { verdict, ir_json: p.ir_json.clone(), shrunk, all_failed }
}

/// The reference half of a check, `None` when it passes: the recipe (hosted in `host`, if any) runs cleanly
/// with TIR's argument assertions on, and its assertion-free build gives the same outputs on two runs.
fn reference_verdict(
    w: &mut crate::compiler::worker::Worker,
    p: &RelaxPattern,
    probe_bytes: &[u8],
    host: Option<&str>,
    inputs: &[crate::compiler::NamedTensor],
    reference: &crate::compiler::Config,
) -> Option<Usability> {
    use crate::compiler::Status;
    let recipe = |u| {
        let r = Recipe::new(probe_bytes, p, 0, u);
        match host {
            Some(h) => r.hosted(h),
            None => r,
        }
    };
    let r = w.run(&recipe(RecipeUse::Strict).to_bytes(), inputs, reference);
    if r.status != Status::Ok {
        return Some(Usability::ReferenceFails(format!("{}: {}", r.status.kind(), r.status.message())));
    }
    let test = recipe(RecipeUse::Test).to_bytes();
    let same = (0..2).all(|_| same_outputs(&r, &w.run(&test, inputs, reference)));
    (!same).then_some(Usability::Nondeterministic)
}

/// Whether a pattern's module has structure a generated seed's import lacks: several functions, R.If, call_tir.
pub fn structured(p: &RelaxPattern) -> bool {
    p.functions.len() >= 2 || p.script.contains("\n        if ") || p.script.contains("R.call_tir(")
}

/// The hosts among `candidates` (modules a pattern is spliced into, see `Recipe::hosted`): with `guest` spliced
/// into one of their functions, the probe runs cleanly at the reference with TIR's argument assertions on, twice
/// the same without them, and builds at `all` (a host failing there on its own would fail every test of it);
/// verdicts cached beside the patterns' checks.
pub fn check_hosts(
    pool: &crate::compiler::worker::Pool,
    candidates: Vec<RelaxPattern>,
    guest: &RelaxPattern,
    probe: &crate::graph::Model,
) -> anyhow::Result<Vec<RelaxPattern>> {
    use crate::compiler::{Config, Level};
    let probe_bytes = crate::graph::onnx::encode_model(probe);
    let inputs = crate::compiler::inputs::generate(&probe.graph, 0)?;
    let reference = Config::level(Level::Disable);
    let cache = std::sync::Mutex::new(Cache::open(pool, &probe_bytes));
    let guest_key = crate::util::stable_hash(&guest.script);
    let key = |host: &RelaxPattern| format!("host:{}:{guest_key}", crate::util::stable_hash(&host.script));
    let ok = pool.map(candidates, |w, host| {
        let k = key(&host);
        let cached = cache.lock().unwrap().map.get(&k).map(|c| c.verdict.clone());
        let verdict = cached.unwrap_or_else(|| {
            let v = reference_verdict(w, guest, &probe_bytes, Some(&host.script), &inputs, &reference).unwrap_or_else(
                || {
                    let test = Recipe::new(&probe_bytes, guest, 0, RecipeUse::Test).hosted(&host.script);
                    let a = w.run(&test.to_bytes(), &inputs, &Config::level(Level::All));
                    match a.status {
                        crate::compiler::Status::Ok => Usability::Usable,
                        st => Usability::FailsAtAll(format!("{}: {}", st.kind(), st.message())),
                    }
                },
            );
            let c = Checked { verdict: v.clone(), ir_json: None, shrunk: None, all_failed: None };
            cache.lock().unwrap().insert(k, c);
            v
        });
        (verdict == Usability::Usable).then_some(host)
    });
    cache.into_inner().unwrap().save();
    Ok(ok.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_check_cache_keeps_its_newest_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let mut paths = Vec::new();
        for i in 0..6u64 {
            let p = dir.path().join(format!("tvm-pattern-checks-{i}.json"));
            let f = std::fs::File::create(&p).unwrap();
            f.set_modified(t0 + std::time::Duration::from_secs(60 * i)).unwrap();
            paths.push(p);
        }
        let other = dir.path().join("unrelated.json");
        std::fs::write(&other, "{}").unwrap();
        super::prune_cache(&paths[5]);
        let left: Vec<bool> = paths.iter().map(|p| p.exists()).collect();
        assert_eq!(left, [false, false, true, true, true, true]);
        assert!(other.exists(), "only check files are pruned");
    }

    #[test]
    fn symbolic_and_empty_port_dims_become_one_and_inner_declarations_using_them_go() {
        use crate::graph::{DType, Dim, Graph, Model, Node, OpId, TensorType};
        use crate::pattern::{abstract_type, Granularity, Pattern, PatternMeta, Port};
        let ty =
            TensorType { dtype: DType::F32, shape: Some(vec![Dim::Sym("N".into()), Dim::Fixed(0), Dim::Fixed(4)]) };
        let mut g = Graph::new("p");
        g.add_input("x", ty.clone());
        g.add_node(Node::new("a", OpId::onnx("Abs"), vec!["x".into()], vec!["a".into()])).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["a".into()], vec!["y".into()])).unwrap();
        g.types.insert("a".into(), ty.clone().into());
        g.types.insert("kept".into(), TensorType::new(DType::F32, &[2]).into());
        g.add_output("y", ty.clone());
        let port = |n: &str| Port { name: n.into(), ty: ty.clone(), abstract_ty: abstract_type(&ty, &[]) };
        let meta = PatternMeta {
            format: 1,
            compiler: "ort".into(),
            compiler_version: "x".into(),
            pass: "P".into(),
            granularity: Granularity::Block,
            inputs: vec![port("x")],
            outputs: vec![port("y")],
            provenance: vec![],
            key: String::new(),
        };
        let mut p = Pattern { model: Model::new(g), meta };
        super::concretize(&mut p);
        let fixed = TensorType::new(DType::F32, &[1, 1, 4]);
        let g = &p.model.graph;
        assert_eq!((g.tensor_type("x"), g.tensor_type("y")), (Some(fixed.clone()), Some(fixed.clone())));
        assert_eq!(p.meta.inputs[0].ty.numel(), Some(4));
        assert!(!g.types.contains_key("a") && g.types.contains_key("kept"));
    }

    #[test]
    fn a_dropout_in_training_mode_makes_a_pattern_random() {
        use crate::graph::{DType, Graph, Model, Node, OpId, Tensor, TensorType};
        use crate::pattern::{Granularity, Pattern, PatternMeta};
        let with_mode = |mode: Option<bool>| {
            let mut g = Graph::new("p");
            g.add_input("x", TensorType::new(DType::F32, &[2]));
            let mut ins = vec!["x".to_string()];
            if let Some(m) = mode {
                g.add_initializer("ratio", Tensor::from_f32(&[], &[0.5]));
                g.add_initializer(
                    "mode",
                    Tensor { dtype: DType::Bool, dims: vec![], data: crate::graph::TensorData::Raw(vec![m as u8]) },
                );
                ins.extend(["ratio".to_string(), "mode".to_string()]);
            }
            g.add_node(Node::new("d", OpId::onnx("Dropout"), ins, vec!["y".into()])).unwrap();
            g.add_output("y", TensorType::new(DType::F32, &[2]));
            let meta = PatternMeta {
                format: 1,
                compiler: "ort".into(),
                compiler_version: "x".into(),
                pass: "EliminateDropout".into(),
                granularity: Granularity::Block,
                inputs: vec![],
                outputs: vec![],
                provenance: vec![],
                key: String::new(),
            };
            Pattern { model: Model::new(g), meta }
        };
        assert!(super::random(&with_mode(Some(true))), "training mode: random by the spec");
        assert!(!super::random(&with_mode(Some(false))));
        assert!(!super::random(&with_mode(None)), "no training_mode input: inference");
    }
}
