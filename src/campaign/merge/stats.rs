//! The merged stats.json: the shards' counts summed (rates recomputed, the shards taken as running side by side)
//! beside each shard's own statistics.

use crate::campaign::stats::{Stats, INVALID_EXAMPLES};
use crate::finding::exemplars::KeyCount;
use serde::{Deserialize, Serialize};

/// stats.json of a merged run: the campaign's totals (the fields of any stats.json) and one entry per shard.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MergedStats {
    #[serde(flatten)]
    pub total: Stats,
    pub shards: Vec<ShardStats>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ShardStats {
    /// The shard's run directory.
    pub dir: String,
    /// `K/N`.
    pub shard: String,
    /// Every test of the shard below this id has been processed.
    pub next_id: u64,
    pub stats: Stats,
}

fn add<K: Ord + Clone>(to: &mut std::collections::BTreeMap<K, u64>, from: &std::collections::BTreeMap<K, u64>) {
    for (k, v) in from {
        *to.entry(k.clone()).or_default() += v;
    }
}

/// The test id of an `invalid_examples` line (`test <id>: ...`).
fn example_id(line: &str) -> u64 {
    line.strip_prefix("test ").and_then(|r| r.split(':').next()).and_then(|n| n.parse().ok()).unwrap_or(u64::MAX)
}

/// Tests executed at each sample time, summed over the parts (each counts as its last sample so far).
fn timeline(parts: &[&Stats]) -> Vec<(f64, u64)> {
    let mut times: Vec<f64> = parts.iter().flat_map(|p| p.timeline.iter().map(|s| s.0)).collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let at = |p: &Stats, t: f64| p.timeline.iter().take_while(|s| s.0 <= t).last().map(|s| s.1).unwrap_or(0);
    let mut out: Vec<(f64, u64)> = times.iter().map(|&t| (t, parts.iter().map(|p| at(p, t)).sum())).collect();
    while out.len() > 2000 {
        out = out.iter().step_by(2).copied().collect();
    }
    out
}

/// The campaign's statistics from its shards'. `bugs` and `entries_by_class` are left for the caller (distinct
/// bugs are counted in the merged bug folders, not summed).
pub fn sum(parts: &[&Stats]) -> Stats {
    let first = parts.first().copied().cloned().unwrap_or_default();
    let mut t = Stats::new(&first.target, &first.target_version, first.seed);
    let mut rate = 0.0;
    for p in parts {
        // every field named: a field added to Stats must be given its merge rule here
        let Stats {
            target: _,
            target_version: _,
            seed: _,
            tests_generated,
            tests_valid,
            tests_executed,
            validity_rate: _,
            tests_per_sec,
            gen_time_share: _,
            passes_fired,
            pass_pairs,
            pass_pairs_distinct: _,
            first_fired_sec,
            trigger_rate: _,
            findings_raw,
            findings_unique: _,
            by_symptom,
            elapsed_sec,
            triage_finish_sec,
            gen_time_sec,
            gen_failures,
            optimized_fed,
            invalid_reasons,
            invalid_examples,
            nondeterministic,
            flaky,
            tests_with_target_pass,
            target_pass_fired,
            near_misses,
            trigger_by_pass,
            synth_passes_fired,
            variations,
            variations_invalid,
            signatures,
            keys,
            findings_written: _, // derived from keys
            findings_counted: _,
            discovery: _, // each shard's own curve stays in its entry
            findings_triaged,
            bugs: _,
            findings_attached,
            findings_untriaged,
            triaged_by_class,
            entries_by_class: _,
            timeline: _,
            coverage_timeline: _,
            worker_wait_sec,
            worker_lane_sec,
            fuzzer_cpu_sec,
            worker_cpu_sec,
            worker_target_cpu_sec,
            workers_recycled,
            fuzzer_rss_max_mb,
            worker_rss_max_mb,
            memory: _, // each shard's own series stays in its entry
        } = p;
        t.worker_wait_sec += worker_wait_sec;
        t.worker_lane_sec += worker_lane_sec;
        t.fuzzer_cpu_sec += fuzzer_cpu_sec;
        t.worker_cpu_sec += worker_cpu_sec;
        t.worker_target_cpu_sec += worker_target_cpu_sec;
        add(&mut t.workers_recycled, workers_recycled);
        t.fuzzer_rss_max_mb = t.fuzzer_rss_max_mb.max(*fuzzer_rss_max_mb);
        t.worker_rss_max_mb = t.worker_rss_max_mb.max(*worker_rss_max_mb);
        t.tests_generated += tests_generated;
        t.tests_valid += tests_valid;
        t.tests_executed += tests_executed;
        rate += tests_per_sec;
        add(&mut t.passes_fired, passes_fired);
        add(&mut t.pass_pairs, pass_pairs);
        for (k, &v) in first_fired_sec {
            let e = t.first_fired_sec.entry(k.clone()).or_insert(v);
            *e = e.min(v);
        }
        t.findings_raw += findings_raw;
        add(&mut t.by_symptom, by_symptom);
        // wall time: the longest shard's
        if *elapsed_sec > t.elapsed_sec {
            t.elapsed_sec = *elapsed_sec;
            t.triage_finish_sec = *triage_finish_sec;
        }
        t.gen_time_sec += gen_time_sec;
        t.gen_failures += gen_failures;
        t.optimized_fed += optimized_fed;
        add(&mut t.invalid_reasons, invalid_reasons);
        t.invalid_examples.extend(invalid_examples.iter().cloned());
        t.nondeterministic += nondeterministic;
        t.flaky += flaky;
        t.tests_with_target_pass += tests_with_target_pass;
        t.target_pass_fired += target_pass_fired;
        t.near_misses += near_misses;
        for (k, v) in trigger_by_pass {
            let e = t.trigger_by_pass.entry(k.clone()).or_default();
            e[0] += v[0];
            e[1] += v[1];
        }
        for (k, v) in synth_passes_fired {
            *t.synth_passes_fired.entry(k.clone()).or_default() += v;
        }
        for (k, v) in variations {
            let e = t.variations.entry(k.clone()).or_default();
            (0..3).for_each(|i| e[i] += v[i]);
        }
        for (k, v) in variations_invalid {
            *t.variations_invalid.entry(k.clone()).or_default() += v;
        }
        add(&mut t.signatures, signatures);
        for (k, v) in keys {
            let empty =
                KeyCount { count: 0, written: 0, first: u64::MAX, last: 0, first_sec: f64::INFINITY, ..v.clone() };
            let e = t.keys.entry(k.clone()).or_insert(empty);
            (e.count, e.written) = (e.count + v.count, e.written + v.written);
            (e.first, e.last, e.first_sec) = (e.first.min(v.first), e.last.max(v.last), e.first_sec.min(v.first_sec));
            e.passes.extend(v.passes.iter().cloned());
            e.culprits.extend(v.culprits.iter().cloned());
        }
        t.findings_triaged += findings_triaged;
        t.findings_attached += findings_attached;
        t.findings_untriaged += findings_untriaged;
        add(&mut t.triaged_by_class, triaged_by_class);
    }
    // the first invalid tests of the campaign, as the unsharded run keeps them
    t.invalid_examples.sort_by_key(|l| example_id(l));
    t.invalid_examples.truncate(INVALID_EXAMPLES);
    t.findings_unique = t.signatures.len() as u64;
    t.count_written();
    t.pass_pairs_distinct = t.pass_pairs.len() as u64;
    t.validity_rate = if t.tests_executed > 0 { t.tests_valid as f64 / t.tests_executed as f64 } else { 0.0 };
    t.tests_per_sec = rate;
    t.gen_time_share = crate::campaign::stats::wait_share(t.worker_wait_sec, t.worker_lane_sec);
    t.trigger_rate =
        (t.tests_with_target_pass > 0).then(|| t.target_pass_fired as f64 / t.tests_with_target_pass as f64);
    t.timeline = timeline(parts);
    t
}
