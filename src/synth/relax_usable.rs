//! Which Relax patterns a TVM campaign can use: each is checked in TVM workers the way synthesis will use it,
//! spliced into a probe seed (it must splice, run cleanly and deterministically at the reference, fire its pass
//! at `all` and build there); hosts likewise; verdicts cached on disk as they come, with progress on stderr.

use super::recipe::{Recipe, RecipeUse};
use crate::oracle::same_outputs;
use crate::pattern::relax::RelaxPattern;
use serde::{Deserialize, Serialize};

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
const CHECK_VERSION: u32 = 7;

/// What [`check_library`] keeps per pattern (keyed by the script's hash) in its cache file.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Checked {
    verdict: Usability,
    ir_json: Option<String>,
    /// The script synthesis uses, when the check shrank the pattern.
    shrunk: Option<String>,
    /// How the probe failed at `all`, if it did (a bug the pattern leads to, or a seed TVM cannot take).
    all_failed: Option<String>,
    /// Its entry has an inner value `--vary extra-reader` can expose.
    #[serde(default)]
    exposable: bool,
    /// The dtypes `--vary dtype` may retype its float32 values to.
    #[serde(default)]
    dtypes: Vec<String>,
    /// The attribute sites `--vary attr` may change.
    #[serde(default)]
    attr_sites: Vec<u32>,
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

/// Checks each pattern in TVM workers the way synthesis will use it, spliced into `probe` (a generated seed
/// with its inputs): it must splice (parse, static tensor parameters, a well-formed result), the spliced
/// module must run cleanly at the reference configuration with TIR's argument assertions on and give the
/// same outputs twice more without them (deterministic), and compiled at `all` its pass
/// must fire, and it must build there (a pattern that fails at `all` on its own is [`Usability::FailsAtAll`]: every
/// test of it would be the same failure, which the campaign lists once instead).
/// Returns every pattern with its verdict (usable ones carry their module JSON) and how many verdicts came
/// from the cache (see [`cache_file`]); reports progress while it checks. Once `stop` is set, no further pattern
/// is checked: the verdicts so far are cached and the call fails.
pub fn check_library(
    pool: &crate::compiler::worker::Pool,
    patterns: Vec<RelaxPattern>,
    probe: &crate::graph::Model,
    stop: &std::sync::atomic::AtomicBool,
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
    // (the progress, and how many patterns are usable so far)
    let progress = std::sync::Mutex::new((crate::util::Steps::new("Relax patterns checked", todo.len() as u64), 0));
    let (reference, all) = (Config::level(Level::Disable), Config::level(Level::All));
    let fresh = pool.map(todo, |w, mut p| {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let key = crate::util::stable_hash(&p.script);
        let c = check_one(w, &mut p, &probe_bytes, &inputs, &reference, &all);
        let (steps, usable) = &mut *progress.lock().unwrap();
        *usable += (c.verdict == Usability::Usable) as usize;
        steps.inc(&format!("({usable} usable; verdicts are cached)"));
        cache.lock().unwrap().insert(key, c.clone());
        Some((p, c.verdict))
    });
    progress.into_inner().unwrap().0.finish();
    let mut cache = cache.into_inner().unwrap();
    cache.save();
    let left = fresh.iter().filter(|r| r.is_none()).count();
    anyhow::ensure!(
        left == 0,
        "stopped during the pattern check ({} verdicts kept for the next run, {left} patterns not checked)",
        fresh.len() - left
    );
    let mut out: Vec<_> = fresh.into_iter().flatten().collect();
    for mut p in known {
        let c = &cache.map[&crate::util::stable_hash(&p.script)];
        p.ir_json = c.ir_json.clone();
        p.exposable = c.exposable;
        p.dtypes = c.dtypes.clone();
        p.attr_sites = c.attr_sites.clone();
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
        let (exposable, dtypes, attr_sites) = (false, vec![], vec![]);
        return Checked { verdict, ir_json: None, shrunk: None, all_failed: None, exposable, dtypes, attr_sites };
    }
    let text = |name: &str| {
        o.outputs.iter().find(|t| t.name == name).and_then(|t| match &t.tensor.data {
            crate::graph::TensorData::Raw(b) => String::from_utf8(b.clone()).ok(),
            _ => None,
        })
    };
    p.ir_json = text("pattern_ir");
    p.exposable = text("pattern_exposable").as_deref() == Some("1");
    let listed = text("pattern_dtypes").unwrap_or_default();
    p.dtypes = listed.split(',').filter(|d| !d.is_empty()).map(String::from).collect();
    let sites = text("pattern_attrs").unwrap_or_default();
    p.attr_sites = sites.split(',').filter_map(|k| k.parse().ok()).collect();
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
    let (exposable, dtypes, attr_sites) = (p.exposable, p.dtypes.clone(), p.attr_sites.clone());
    Checked { verdict, ir_json: p.ir_json.clone(), shrunk, all_failed, exposable, dtypes, attr_sites }
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
            let c = Checked {
                verdict: v.clone(),
                ir_json: None,
                shrunk: None,
                all_failed: None,
                exposable: false,
                dtypes: vec![],
                attr_sites: vec![],
            };
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
}
