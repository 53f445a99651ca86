//! Delta debugging of a pass set: which of the passes that fired are needed to reproduce a symptom.
//! Bisection first (FLiT's BisectAll: O(k log n) runs when culprits are found one by one), ddmin when the
//! passes interact so that bisection's assumptions fail, and a final check of the answer.

/// Why the search gave up: the symptom shows with every fired pass disabled (a pass that never reported firing
/// causes it).
pub const SHOWN_WITH_NONE: &str = "the symptom appears with no fired pass enabled: not caused by these passes";
/// Why the search gave up: with every fired pass disabled the model fails another way (a pass that never fired
/// before, shadowed by a culprit, takes its place and breaks it).
pub const NONE_CANNOT_RUN: &str = "the configuration with every fired pass disabled cannot be run";

/// What one probe run showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The same symptom.
    Symptom,
    /// No symptom.
    Clean,
    /// The configuration could not be built or run: never counted as the symptom.
    Unresolved,
}

/// The answer: a 1-minimal set of passes (every one needed), or why there is none.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Culprits {
    pub passes: Vec<String>,
    /// `bisect`, `ddmin`, or `unresolved`.
    pub method: &'static str,
    /// Probe runs spent.
    pub runs: usize,
    /// Why the search gave up, when it did.
    pub note: Option<String>,
}

struct Counter<'a> {
    test: &'a mut dyn FnMut(&[String]) -> Probe,
    runs: usize,
}

impl Counter<'_> {
    fn probe(&mut self, enabled: &[String]) -> Probe {
        self.runs += 1;
        (self.test)(enabled)
    }

    fn symptom(&mut self, enabled: &[String]) -> bool {
        self.probe(enabled) == Probe::Symptom
    }
}

/// Finds the culprit passes among `fired`. `test(enabled)` runs the model with only `enabled` of the fired
/// passes on (the others disabled) and says what happened.
pub fn culprits(fired: &[String], test: &mut dyn FnMut(&[String]) -> Probe) -> Culprits {
    let mut c = Counter { test, runs: 0 };
    let unresolved = |c: &Counter, why: &str| Culprits {
        passes: vec![],
        method: "unresolved",
        runs: c.runs,
        note: Some(why.into()),
    };
    if !c.symptom(fired) {
        return unresolved(&c, "the symptom does not reproduce with every fired pass enabled");
    }
    match c.probe(&[]) {
        Probe::Symptom => return unresolved(&c, SHOWN_WITH_NONE),
        Probe::Unresolved => return unresolved(&c, NONE_CANNOT_RUN),
        Probe::Clean => {}
    }
    if let Some(found) = bisect_all(fired, &mut c) {
        if minimal(&found, &mut c) {
            return Culprits { passes: found, method: "bisect", runs: c.runs, note: None };
        }
    }
    let found = ddmin(fired.to_vec(), &mut c);
    if c.symptom(&found) && minimal(&found, &mut c) {
        Culprits { passes: found, method: "ddmin", runs: c.runs, note: None }
    } else {
        unresolved(&c, "neither bisection nor ddmin found a set that reproduces the symptom reliably")
    }
}

/// Culprits one at a time: with `found` on, the shortest prefix of the remaining passes that brings the
/// symptom back ends with the next culprit. `None` when the search's assumptions break.
fn bisect_all(fired: &[String], c: &mut Counter) -> Option<Vec<String>> {
    let mut found: Vec<String> = Vec::new();
    let mut rest: Vec<String> = fired.to_vec();
    loop {
        // invariant: found + rest reproduces, found alone does not (checked before each round)
        let (mut lo, mut hi) = (0usize, rest.len()); // prefix of length hi reproduces; of length lo does not
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let on: Vec<String> = found.iter().chain(&rest[..mid]).cloned().collect();
            if c.symptom(&on) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        if hi == 0 {
            return None;
        }
        found.push(rest[hi - 1].clone());
        rest.truncate(hi - 1);
        if c.symptom(&found) {
            found.sort();
            return Some(found);
        }
        if rest.is_empty() {
            return None;
        }
    }
}

/// Every pass of `set` is needed: removing any one gives a clean run (an unresolved run proves nothing).
fn minimal(set: &[String], c: &mut Counter) -> bool {
    if set.len() == 1 {
        return true; // the empty set was checked to be clean
    }
    (0..set.len()).all(|i| {
        let without: Vec<String> = set.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, p)| p.clone()).collect();
        c.probe(&without) == Probe::Clean
    })
}

/// Zeller's ddmin over the enabled set.
fn ddmin(mut set: Vec<String>, c: &mut Counter) -> Vec<String> {
    let mut n = 2usize;
    while set.len() >= 2 {
        let chunk = set.len().div_ceil(n);
        let parts: Vec<Vec<String>> = set.chunks(chunk).map(|p| p.to_vec()).collect();
        let mut reduced = false;
        for p in &parts {
            if c.symptom(p) {
                set = p.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced {
            for i in 0..parts.len() {
                let complement: Vec<String> =
                    parts.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, p)| p.clone()).collect();
                if c.symptom(&complement) {
                    set = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= set.len() {
                break;
            }
            n = (2 * n).min(set.len());
        }
    }
    set.sort();
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("P{i:02}")).collect()
    }

    fn bound(k: usize, n: usize) -> usize {
        2 * k * (n as f64).log2().ceil() as usize + 2
    }

    #[test]
    fn one_culprit_is_found_within_the_bound() {
        for n in [2, 5, 16, 40] {
            for c in [0, n / 2, n - 1] {
                let culprit = format!("P{c:02}");
                let mut test = |on: &[String]| if on.contains(&culprit) { Probe::Symptom } else { Probe::Clean };
                let r = culprits(&passes(n), &mut test);
                assert_eq!(r.passes, [culprit.clone()], "n={n}");
                assert_eq!(r.method, "bisect");
                assert!(r.runs <= bound(1, n), "n={n}: {} runs > {}", r.runs, bound(1, n));
            }
        }
    }

    #[test]
    fn culprits_needed_together_are_all_found() {
        let all = passes(32);
        for want in [vec!["P03", "P17"], vec!["P00", "P10", "P31"], vec!["P05", "P06"]] {
            let mut test = |on: &[String]| {
                if want.iter().all(|w| on.iter().any(|p| p == w)) {
                    Probe::Symptom
                } else {
                    Probe::Clean
                }
            };
            let r = culprits(&all, &mut test);
            assert_eq!(r.passes, want, "{want:?}");
            assert!(r.runs <= bound(want.len(), all.len()), "{} runs > {}", r.runs, bound(want.len(), all.len()));
        }
    }

    #[test]
    fn any_one_of_several_culprits_is_a_minimal_answer() {
        let all = passes(20);
        let mut test =
            |on: &[String]| if on.iter().any(|p| p == "P04" || p == "P12") { Probe::Symptom } else { Probe::Clean };
        let r = culprits(&all, &mut test);
        assert_eq!(r.passes.len(), 1);
        assert!(r.passes[0] == "P04" || r.passes[0] == "P12");
    }

    #[test]
    fn interacting_passes_fall_back_to_ddmin() {
        // the symptom needs P01 and P02 but disappears when P03 is also on (a pass that masks it)
        let all = passes(8);
        let mut test = |on: &[String]| {
            let has = |p: &str| on.iter().any(|x| x == p);
            if has("P01") && has("P02") && (!has("P03") || has("P07")) {
                Probe::Symptom
            } else {
                Probe::Clean
            }
        };
        let r = culprits(&all, &mut test);
        assert_eq!(r.passes, ["P01", "P02"]);
    }

    #[test]
    fn unbuildable_configurations_never_count_as_the_symptom() {
        let all = passes(6);
        let mut test = |on: &[String]| if on.len() < 6 { Probe::Unresolved } else { Probe::Symptom };
        let r = culprits(&all, &mut test);
        assert_eq!(r.method, "unresolved");
        let mut always = |_: &[String]| Probe::Symptom;
        assert_eq!(culprits(&all, &mut always).method, "unresolved", "a symptom without passes has no culprit");
        let mut never = |_: &[String]| Probe::Clean;
        assert_eq!(culprits(&all, &mut never).method, "unresolved");
    }
}
