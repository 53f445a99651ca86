//! How synthesis chooses a pattern and a base graph. `uniform`: every pattern alike. `coverage` (the default):
//! AFL-style energy. A pass gets `((s+1)/(a+1)) / sqrt(1+h)`, `h` the tests of this campaign in which it
//! fired, `a` and `s` the tests built for it and those that fired it, shared by its patterns, each scaled by
//! `(ok+1)/(tried+1)`, how often splicing it worked; a base graph from the pool is drawn by the square of
//! `1 + sum 1/(1+pairs(P,q))` over the passes `q` it fired, so that rare pass pairs with the pattern's pass `P`
//! come first.
//!
//! The configuration of a test the campaign's rotation gives an extra one (which tests do is the campaign's,
//! by id) is chosen too: configuration `c` by `1/sqrt(1+r) + sum ((h+1)/(t+1)) / sqrt(1+fired(q))` over its own
//! passes `q` (those that fired only under it, never without an extra configuration), `r` the tests run under
//! it, `t` and `h` those built for the pattern's pass and those of them in which an own pass of `c` fired.
//!
//! Determinism: the counts come from [`Coverage::feed`] in test-id order and are frozen every [`EPOCH`] tests
//! (times the stride); test `i` uses the counts of the tests below the last epoch boundary `<= i + 1 -
//! POOL_LAG * stride`, which the campaign has processed before it makes `i`. So a test depends on (seed, id)
//! alone, however the generator threads run.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// Test `i` may use pool entries of tests `<= i - POOL_LAG * stride` only: the campaign makes `i` only after
/// those are processed, so a test depends on (seed, id) alone, however far ahead of the workers it is made.
pub const POOL_LAG: u64 = 256;

/// `--schedule`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// Every pattern alike, the base graph uniformly (what campaigns did before coverage).
    #[default]
    Uniform,
    /// By how rarely passes and pass pairs fired in this campaign.
    Coverage,
}

impl Schedule {
    pub fn parse(s: &str) -> anyhow::Result<Schedule> {
        match s {
            "uniform" => Ok(Schedule::Uniform),
            "coverage" => Ok(Schedule::Coverage),
            _ => anyhow::bail!("--schedule {s}: expected uniform or coverage"),
        }
    }
}

/// Tests between two frozen counts.
pub const EPOCH: u64 = 64;

/// Pass names as small numbers, in the order they were first seen (patterns first, then feedback order).
#[derive(Clone, Default)]
struct Names {
    list: Vec<String>,
    index: HashMap<String, u32>,
}

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        self.list.push(name.to_string());
        self.index.insert(name.to_string(), self.list.len() as u32 - 1);
        self.list.len() as u32 - 1
    }

    /// The ids of these names, sorted, each once.
    fn ids(&mut self, names: &[String]) -> Vec<u32> {
        let mut ids: Vec<u32> = names.iter().map(|p| self.id(p)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// What the campaign's tests fired, up to some test.
#[derive(Clone, Default)]
struct Counts {
    /// By pass: tests in which it fired.
    fired: Vec<u64>,
    /// By pass: [tests built for it, of those in which it fired].
    built: Vec<[u64; 2]>,
    /// (lower, higher pass id): tests in which both fired.
    pairs: HashMap<(u32, u32), u64>,
    /// By pattern: [splices tried, splices that worked].
    spliced: Vec<[u64; 2]>,
    /// By pass: tests without an extra configuration in which it fired.
    plain: Vec<u64>,
    /// By configuration of the rotation: tests run under it.
    config_ran: Vec<u64>,
    /// (configuration, pass): tests run under the configuration in which the pass fired.
    under: BTreeMap<(usize, u32), u64>,
    /// (configuration, pass built for): [tests, those in which an own pass of the configuration fired].
    config_built: HashMap<(usize, u32), [u64; 2]>,
}

impl Counts {
    fn pair(&self, a: u32, b: u32) -> u64 {
        self.pairs.get(&(a.min(b), a.max(b))).copied().unwrap_or(0)
    }
}

/// Frozen counts and the pattern weights they give.
pub struct Frozen {
    counts: Counts,
    /// Cumulative pattern weights (empty: uniform).
    cumulative: Vec<f64>,
    /// By configuration of the rotation: its own passes (fired only under it).
    own: Vec<Vec<u32>>,
}

struct Live {
    names: Names,
    counts: Counts,
    last_fed: Option<u64>,
    /// Epoch boundary -> the counts of every test below it.
    frozen: BTreeMap<u64, Arc<Frozen>>,
}

/// The campaign's pass coverage as synthesis sees it.
pub struct Coverage {
    schedule: Schedule,
    /// The pass of each pattern, as a name id.
    pattern_pass: Vec<u32>,
    /// Patterns per pass id.
    per_pass: Vec<u64>,
    stride: u64,
    live: Mutex<Live>,
    /// Test id -> its splice attempts (pattern, worked), noted when the test is made, counted at its feedback.
    attempts: Mutex<HashMap<u64, Vec<(usize, bool)>>>,
    /// What the tests before the first boundary see: no counts yet (and all that `uniform` ever sees).
    empty: Arc<Frozen>,
    /// How many configurations the campaign's rotation has (0: none, or not told).
    configs: std::sync::atomic::AtomicUsize,
}

impl Coverage {
    /// Coverage for patterns of the given passes (in the source's pattern order).
    pub fn new(schedule: Schedule, passes: &[&str], stride: u64) -> Coverage {
        let mut names = Names::default();
        let pattern_pass: Vec<u32> = passes.iter().map(|p| names.id(p)).collect();
        let mut per_pass = vec![0u64; names.list.len()];
        for &p in &pattern_pass {
            per_pass[p as usize] += 1;
        }
        let live = Live { names, counts: Counts::default(), last_fed: None, frozen: BTreeMap::new() };
        let (live, attempts) = (Mutex::new(live), Mutex::default());
        let empty = Arc::new(Frozen { counts: Counts::default(), cumulative: Vec::new(), own: Vec::new() });
        let configs = Default::default();
        let mut c =
            Coverage { schedule, pattern_pass, per_pass, stride: stride.max(1), live, attempts, empty, configs };
        c.empty = Arc::new(c.freeze(&Counts::default()));
        c
    }

    /// The epoch boundary whose counts test `id` uses.
    fn boundary(&self, id: u64) -> u64 {
        let (lag, epoch) = (POOL_LAG * self.stride, EPOCH * self.stride);
        (id + 1).saturating_sub(lag) / epoch * epoch
    }

    /// Notes that making test `id` tried to splice pattern `k` (`worked`: into a valid graph).
    pub fn attempted(&self, id: u64, k: usize, worked: bool) {
        if self.schedule == Schedule::Uniform {
            return; // nothing draws on the counts
        }
        self.attempts.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_default().push((k, worked));
    }

    /// Told, before the first test, how many configurations the campaign's rotation has.
    pub fn set_configs(&self, n: usize) {
        self.configs.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// The ids of these passes (for the seed pool), counting nothing.
    pub fn ids(&self, fired: &[String]) -> Arc<[u32]> {
        self.live.lock().unwrap_or_else(|e| e.into_inner()).names.ids(fired).into()
    }

    /// Told, in test-id order, the passes test `id` fired (`built_for`: the pass it was made to fire; `extra`:
    /// the configuration of the rotation it also ran). Returns the fired passes as ids, for the seed pool.
    pub fn feed(&self, id: u64, built_for: Option<&str>, fired: &[String], extra: Option<usize>) -> Arc<[u32]> {
        let mut guard = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let live = &mut *guard;
        let ids = live.names.ids(fired);
        if self.schedule == Schedule::Uniform {
            return ids.into(); // nothing draws on the counts
        }
        // freeze the counts of every boundary this id crosses: they hold exactly the tests below it
        let epoch = EPOCH * self.stride;
        let first = live.last_fed.map_or(epoch, |l| (l / epoch + 1) * epoch);
        if first <= id {
            let f = Arc::new(self.freeze(&live.counts));
            for b in (first..=id).step_by(epoch as usize) {
                live.frozen.entry(b).or_insert_with(|| f.clone());
            }
        }
        live.last_fed = Some(id);
        // every test still to be made has a higher id: older boundaries are never asked for again
        let keep = self.boundary(id + 1);
        live.frozen.retain(|&b, _| b >= keep);
        let tried = self.attempts.lock().unwrap_or_else(|e| e.into_inner()).remove(&id).unwrap_or_default();
        let built_for = built_for.map(|p| live.names.id(p));
        let (c, n) = (&mut live.counts, live.names.list.len());
        c.fired.resize(n, 0);
        c.built.resize(n, [0, 0]);
        c.spliced.resize(self.pattern_pass.len(), [0, 0]);
        for (k, worked) in tried {
            c.spliced[k][0] += 1;
            c.spliced[k][1] += worked as u64;
        }
        for (k, &a) in ids.iter().enumerate() {
            c.fired[a as usize] += 1;
            for &b in &ids[k + 1..] {
                *c.pairs.entry((a, b)).or_default() += 1;
            }
        }
        if let Some(p) = built_for {
            c.built[p as usize][0] += 1;
            c.built[p as usize][1] += ids.contains(&p) as u64;
        }
        c.plain.resize(n, 0);
        match extra {
            None => ids.iter().for_each(|&q| c.plain[q as usize] += 1),
            Some(e) => {
                if c.config_ran.len() <= e {
                    c.config_ran.resize(e + 1, 0);
                }
                c.config_ran[e] += 1;
                for &q in ids.iter() {
                    *c.under.entry((e, q)).or_default() += 1;
                }
                if let Some(p) = built_for {
                    let own = ids.iter().any(|&q| c.plain[q as usize] == 0);
                    let t = c.config_built.entry((e, p)).or_default();
                    t[0] += 1;
                    t[1] += own as u64;
                }
            }
        }
        ids.into()
    }

    /// The counts test `id` may use.
    pub fn view(&self, id: u64) -> Arc<Frozen> {
        let b = self.boundary(id);
        if b == 0 || self.schedule == Schedule::Uniform {
            return self.empty.clone();
        }
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = live.frozen.get(&b) {
            return f.clone();
        }
        // no test at or above the boundary fed yet: the live counts are exactly those below it
        let f = Arc::new(self.freeze(&live.counts));
        if live.last_fed.is_none_or(|l| l < b) {
            live.frozen.insert(b, f.clone());
        }
        // (a boundary fed past and dropped cannot be asked for: tests are made before their feedback)
        f
    }

    fn freeze(&self, c: &Counts) -> Frozen {
        if self.schedule == Schedule::Uniform {
            return Frozen { counts: Counts::default(), cumulative: Vec::new(), own: Vec::new() };
        }
        let mut own = vec![Vec::new(); c.config_ran.len()];
        for (&(e, q), _) in c.under.iter().filter(|(&(_, q), _)| c.plain.get(q as usize).is_none_or(|&n| n == 0)) {
            own[e].push(q);
        }
        let get = |v: &Vec<u64>, p: u32| v.get(p as usize).copied().unwrap_or(0) as f64;
        let mut total = 0.0;
        let cumulative = self
            .pattern_pass
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                let [a, s] = c.built.get(p as usize).copied().unwrap_or([0, 0]);
                let [tried, ok] = c.spliced.get(k).copied().unwrap_or([0, 0]);
                let energy = (s as f64 + 1.0) / (a as f64 + 1.0) / (1.0 + get(&c.fired, p)).sqrt();
                let splices = (ok as f64 + 1.0) / (tried as f64 + 1.0);
                total += energy * splices / self.per_pass[p as usize] as f64;
                total
            })
            .collect();
        Frozen { counts: c.clone(), cumulative, own }
    }

    /// Which configuration of the rotation a test of pattern `k` runs if it gets an extra one (None: uniform,
    /// no rotation, or no counts yet: the rotation's turn).
    pub fn pick_config(&self, f: &Frozen, k: usize, rng: &mut impl rand::Rng) -> Option<usize> {
        let n = self.configs.load(std::sync::atomic::Ordering::Relaxed);
        if self.schedule == Schedule::Uniform || n == 0 || f.counts.config_ran.is_empty() {
            return None;
        }
        let (c, p) = (&f.counts, self.pattern_pass[k]);
        let mut total = 0.0;
        let cumulative: Vec<f64> = (0..n)
            .map(|e| {
                let ran = c.config_ran.get(e).copied().unwrap_or(0) as f64;
                let [t, h] = c.config_built.get(&(e, p)).copied().unwrap_or([0, 0]);
                let rate = (h as f64 + 1.0) / (t as f64 + 1.0);
                let own = f.own.get(e).map_or(&[][..], |o| &o[..]);
                let fired = |q: u32| c.fired.get(q as usize).copied().unwrap_or(0) as f64;
                total += 1.0 / (1.0 + ran).sqrt() + own.iter().map(|&q| rate / (1.0 + fired(q)).sqrt()).sum::<f64>();
                total
            })
            .collect();
        let x = rng.random::<f64>() * total;
        Some(cumulative.partition_point(|&c| c <= x).min(n - 1))
    }

    /// Index of the pattern to use.
    pub fn pick_pattern(&self, f: &Frozen, rng: &mut impl rand::Rng) -> usize {
        let n = self.pattern_pass.len();
        match f.cumulative.last() {
            Some(&total) if total > 0.0 => {
                let x = rng.random::<f64>() * total;
                f.cumulative.partition_point(|&c| c <= x).min(n - 1)
            }
            _ => rng.random_range(0..n),
        }
    }

    /// Index of the base graph (among bases that fired the given passes) for a pattern of pattern `k`'s pass.
    pub fn pick_base(&self, f: &Frozen, k: usize, bases: &[&[u32]], rng: &mut impl rand::Rng) -> usize {
        if self.schedule == Schedule::Uniform || f.cumulative.is_empty() {
            return rng.random_range(0..bases.len());
        }
        let p = self.pattern_pass[k];
        let mut total = 0.0;
        let cumulative: Vec<f64> = bases
            .iter()
            .map(|fired| {
                let w = 1.0
                    + fired.iter().filter(|&&q| q != p).map(|&q| 1.0 / (1.0 + f.counts.pair(p, q) as f64)).sum::<f64>();
                total += w * w;
                total
            })
            .collect();
        let x = rng.random::<f64>() * total;
        cumulative.partition_point(|&c| c <= x).min(bases.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn fired(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn rare_passes_get_the_energy_once_counts_are_frozen() {
        let cov = Coverage::new(Schedule::Coverage, &["A", "A", "A", "B"], 1);
        let lag = POOL_LAG;
        for id in 0..lag + 2 * EPOCH {
            cov.feed(id, Some("A"), &fired(&["A", "C"]), None);
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        // before any boundary: passes alike (B's one pattern as likely as A's three together)
        let early = cov.view(lag - 1);
        let b_early = (0..4000).filter(|_| cov.pick_pattern(&early, &mut rng) == 3).count();
        assert!((1600..2400).contains(&b_early), "{b_early}");
        // A fired in every test, B never: B's pattern is drawn almost always
        let late = cov.view(lag + 2 * EPOCH - 1);
        let b_late = (0..4000).filter(|_| cov.pick_pattern(&late, &mut rng) == 3).count();
        assert!(b_late > 3500, "{b_late}");
        // bases: one whose passes never met B comes before one that met it often
        for id in lag + 2 * EPOCH..lag + 4 * EPOCH {
            cov.feed(id, Some("B"), &fired(&["B", "C"]), None);
        }
        // the view of a test that may use every test fed so far: B met C in 128 tests, A never
        let f = cov.view(2 * lag + 4 * EPOCH - 1);
        let (c, a) = {
            let live = cov.live.lock().unwrap();
            (live.names.index["C"], live.names.index["A"])
        };
        let (with_c, with_a) = ([c], [a]);
        let bases: Vec<&[u32]> = vec![&with_c[..], &with_a[..]];
        let new_pair = (0..4000).filter(|_| cov.pick_base(&f, 3, &bases, &mut rng) == 1).count();
        assert!(new_pair > 2800, "{new_pair}");
    }

    #[test]
    fn an_extra_configuration_goes_where_its_own_passes_fire() {
        let cov = Coverage::new(Schedule::Coverage, &["A", "B"], 1);
        cov.set_configs(3);
        for id in 0..POOL_LAG + 2 * EPOCH {
            // tests built for A fire X under configuration 1 only; configurations 0 and 2 add nothing of their own
            let built = ["A", "B"][(id % 2) as usize];
            let extra = [None, Some(0), Some(1), Some(2)][(id / 2 % 4) as usize];
            let mut f = vec![built];
            if built == "A" && extra == Some(1) {
                f.push("X");
            }
            cov.feed(id, Some(built), &fired(&f), extra);
        }
        let view = cov.view(POOL_LAG + 2 * EPOCH - 1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut n = [0; 3];
        for _ in 0..3000 {
            n[cov.pick_config(&view, 0, &mut rng).unwrap()] += 1;
        }
        // in the 128 tests the view holds, each configuration ran 32 times (weight 1/sqrt(33)) and X fired 16
        // times, in every test of A under configuration 1 (1/sqrt(17) more): about 55% for configuration 1
        assert!(n[1] > 1400 && n[0] > 300 && n[2] > 300, "{n:?}");
        // a test of B never fired X under configuration 1: less of its share goes there
        let mut b = [0; 3];
        for _ in 0..3000 {
            b[cov.pick_config(&view, 1, &mut rng).unwrap()] += 1;
        }
        assert!(b[1] < n[1], "{b:?} vs {n:?}");
        // uniform, or before the first boundary: the rotation's turn
        assert_eq!(cov.pick_config(&cov.view(0), 0, &mut rng), None);
        let uni = Coverage::new(Schedule::Uniform, &["A", "B"], 1);
        uni.set_configs(3);
        assert_eq!(uni.pick_config(&uni.view(POOL_LAG + 2 * EPOCH - 1), 0, &mut rng), None);
    }

    #[test]
    fn a_pattern_that_does_not_splice_loses_its_energy() {
        let cov = Coverage::new(Schedule::Coverage, &["A", "B", "B"], 1);
        for id in 0..POOL_LAG + EPOCH {
            // pattern 1 never splices (its test falls back to pattern 2, which fires B)
            cov.attempted(id, 1, false);
            cov.attempted(id, 2, true);
            cov.feed(id, Some("B"), &fired(&["B"]), None);
        }
        let f = cov.view(POOL_LAG + EPOCH - 1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let mut n = [0; 3];
        for _ in 0..4000 {
            n[cov.pick_pattern(&f, &mut rng)] += 1;
        }
        // B fired in 64 tests: its energy is 1/sqrt(65) of A's, and pattern 1 keeps 1/65 of its share
        assert!(n[1] < 30 && n[2] > 100, "{n:?}");
    }

    #[test]
    fn a_test_sees_the_same_counts_whenever_the_feedback_came() {
        let passes = ["A", "B", "C"];
        let eager = Coverage::new(Schedule::Coverage, &passes, 1);
        let lazy = Coverage::new(Schedule::Coverage, &passes, 1);
        let fire = |id: u64| fired(&[passes[(id % 3) as usize], passes[(id * 7 % 3) as usize]]);
        let n = POOL_LAG + 5 * EPOCH + 17;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for id in 0..n {
            a.push(eager.view(id).cumulative.clone());
            eager.feed(id, Some(passes[(id % 2) as usize]), &fire(id), None);
        }
        let mut fed = 0;
        for id in 0..n {
            // only what the campaign guarantees: every test <= id - POOL_LAG fed
            while fed + POOL_LAG <= id {
                lazy.feed(fed, Some(passes[(fed % 2) as usize]), &fire(fed), None);
                fed += 1;
            }
            b.push(lazy.view(id).cumulative.clone());
        }
        assert_eq!(a, b);
        assert_ne!(a[0], a[(n - 1) as usize], "the counts moved");
    }
}
