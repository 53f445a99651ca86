//! `oatest fuzz`: the campaign. Flags become a validated `Settings` once; SIGINT/SIGTERM stop it cleanly.

use crate::campaign::{self, Budget, Mode, Settings};
use crate::compiler::{Config, TargetKind, TargetSet};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct FuzzArgs {
    /// ort, tract, tvm or ort-transformers (fuzz also takes two, e.g. ort,tract).
    #[arg(long, default_value = "ort")]
    pub target: String,
    /// Stop making tests after this many hours (fractions too), then finish triage.
    #[arg(long, conflicts_with_all = ["minutes", "tests"])]
    pub hours: Option<f64>,
    /// Stop making tests after this many minutes (fractions too), then finish triage.
    #[arg(long, conflicts_with = "tests")]
    pub minutes: Option<f64>,
    /// Stop after this many tests.
    #[arg(long)]
    pub tests: Option<u64>,
    /// Campaign seed: with it and a test's id, the test is made again byte for byte.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Worker processes (default: number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// A directory of .onnx models to use as tests besides generated seeds (alternating).
    #[arg(long)]
    pub seeds: Option<PathBuf>,
    /// Pattern library for optimization-aware synthesis (default: the project's patterns/<target>).
    #[arg(long)]
    pub patterns: Option<PathBuf>,
    /// `synth`: splice patterns into seeds (default when a library exists for the target); `random`: seeds only.
    #[arg(long, value_parser = ["synth", "random"])]
    pub mode: Option<String>,
    /// How synthesis picks patterns: `coverage` (passes and pass pairs that fired rarely in this campaign
    /// first) or `uniform`.
    #[arg(long, value_parser = ["coverage", "uniform"], default_value = "coverage")]
    pub schedule: String,
    /// Run directory (default: results/<target>-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub tolerance: super::tolerance::ToleranceArgs,
    /// Continue the campaign in this run directory from its checkpoint.
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// A configuration `LEVEL[@THREADS][+NAME...][:-Pass;...;key=value]` (`oatest run --list-configs` lists the
    /// names); repeatable; the first is the reference.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// With ORT's default configurations, one test in this many (chosen by test id) also runs the next named
    /// configuration of the rotation (opt-in and kill switches, ORT_ENABLE_LAYOUT); 0: never.
    #[arg(long, default_value_t = campaign::ROTATE_EVERY)]
    pub rotate_every: u64,
    /// ORT synthesis: one test in this many (chosen by test id) saves its most optimized graph, which goes back
    /// into the seed pool when it passed and the catalog type-checks it (second-order seeds); 0: never.
    #[arg(long, default_value_t = campaign::FEEDBACK_EVERY)]
    pub feedback_every: u64,
    /// Per-test time limit of one configuration, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Worker address-space limit in MiB.
    #[arg(long, default_value_t = 8192)]
    pub mem_mb: u64,
    /// Largest seed graph, in nodes.
    #[arg(long, default_value_t = 10)]
    pub max_nodes: usize,
    #[command(flatten)]
    pub ort: super::OrtLib,
    /// Another ONNX Runtime library (repeatable): triage re-runs every minimized ORT bug with it and records per
    /// version whether it reproduces (bug.json `versions`, "fixed upstream in X").
    #[arg(long = "also-ort-lib", value_name = "PATH")]
    pub also_ort_libs: Vec<PathBuf>,
    /// A directory holding another apache-tvm (repeatable; scripts/setup.sh installs 0.26.0 into .venv-tvm-0.26.0):
    /// triage re-runs every minimized TVM bug with it and records per version whether it reproduces.
    #[arg(long = "also-tvm", value_name = "DIR")]
    pub also_tvm: Vec<PathBuf>,
    /// Known upstream bugs that triage labels entries with (default: the project's data/known-bugs.toml).
    #[arg(long, value_name = "FILE")]
    pub known: Option<PathBuf>,
    /// Do not triage findings while the campaign runs (`oatest triage RUN_DIR` does it afterwards).
    #[arg(long)]
    pub no_triage: bool,
    /// Findings written as directories per source key (the coarse signature refined by the deviating op); later
    /// ones are counted in stats.json and logged in findings/counted.tsv, unless they fired a pass the key's
    /// exemplars did not (up to 4K) or no culprit set triage found for the key ran in them (up to 8K).
    #[arg(long, value_name = "K", default_value_t = crate::finding::exemplars::DEFAULT_LIMIT)]
    pub exemplars: usize,
    /// Write every finding as a directory (no limit per source key).
    #[arg(long, conflicts_with = "exemplars")]
    pub keep_all: bool,
    /// Share of the lanes background triage takes while the campaign runs: as many campaign lanes pause while
    /// it works (0: idle CPU only; the default: one lane in eight; twice that while its backlog would take over
    /// 30 s to finish).
    #[arg(long, value_name = "F", default_value_t = campaign::TRIAGE_SHARE)]
    pub triage_share: f64,
    /// Vary spliced patterns (repeatable; off by default until measured), each kind in a quarter of the splices:
    /// `extra-reader` has one value inside the pattern read again, by a later node of the seed or as a graph
    /// output (a pass that removes its producer must keep it); `dtype` gives the pattern another element type its
    /// ops accept, throughout (float-only tests, int32 and int64 bugs); `attr` gives one attribute of one pattern
    /// node another legal value (an axis's other sign, a flag, a padding mode, pads, strides, a perm, an
    /// epsilon); `per-axis` makes a per-tensor quantization scale per-axis on one axis of the values it
    /// quantizes; `constant` makes one initializer an input the splice feeds (where any value is valid: a pass
    /// that needs a constant must leave it) or a Constant node, or writes constants counting positions or
    /// dimensions negative (Gather's indices or the Range computing them, axes inputs, Slice's starts and ends);
    /// `broadcast` writes one constant read only where ONNX broadcasts in another shape with the same values
    /// (leading ones added or dropped, equal values as a scalar, expanded to its reader's shape). stats.json `variations` counts tests, target-pass
    /// firings (the rest are near misses) and findings per kind, `variations_invalid` its invalid tests. TVM
    /// builds `extra-reader` (an inner value returned and output), `dtype` (float32 written as float16/64) and
    /// `attr` (one op call's axis written negative or moved, or a reduction's keepdims flipped).
    #[arg(long, value_name = "KIND", value_parser = ["extra-reader", "dtype", "attr", "per-axis", "constant", "broadcast"])]
    pub vary: Vec<String>,
    /// Run the K-th of N disjoint slices of the campaign (test ids = K mod N; `--tests` counts the whole
    /// campaign); `oatest merge` joins the shards' run directories.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Replace a worker process by a fresh one after this many tests (0: never).
    #[arg(long, default_value_t = campaign::RECYCLE_TESTS)]
    pub recycle_tests: u64,
    /// Replace a worker process by a fresh one once its resident memory exceeds this many MiB (0: never).
    #[arg(long, default_value_t = campaign::RECYCLE_MB)]
    pub recycle_mb: u64,
}

impl FuzzArgs {
    fn budget(&self) -> Option<Budget> {
        match (self.hours, self.minutes, self.tests) {
            (Some(h), _, _) => Some(Budget::Seconds(h * 3600.0)),
            (_, Some(m), _) => Some(Budget::Seconds(m * 60.0)),
            (_, _, Some(n)) => Some(Budget::Tests(n)),
            _ => None,
        }
    }

    fn settings(&self) -> anyhow::Result<Settings> {
        let tolerance = self.tolerance.tolerance()?;
        for lib in &self.also_ort_libs {
            anyhow::ensure!(lib.exists(), "--also-ort-lib {} does not exist", lib.display());
        }
        super::triage::check_also_tvm(&self.also_tvm)?;
        anyhow::ensure!(self.max_nodes >= 1, "--max-nodes must be at least 1");
        anyhow::ensure!(self.exemplars >= 1, "--exemplars must be at least 1 (--keep-all writes every finding)");
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.triage_share),
            "--triage-share must be between 0 and 1 (got {})",
            self.triage_share
        );
        let budget = self.budget().unwrap_or(Budget::Seconds(3600.0));
        if let Budget::Seconds(s) = budget {
            anyhow::ensure!(s > 0.0, "the time budget must be positive");
        }
        let target = TargetSet::parse(&self.target)?;
        let default_lib = crate::util::project_file(&format!("patterns/{}", target.first().name()));
        let patterns = self.patterns.clone().or(default_lib);
        let mode = match (self.mode.as_deref(), &patterns) {
            (Some("random"), _) => Mode::Random,
            (Some(_), None) => {
                anyhow::bail!("--mode synth needs a pattern library (--patterns DIR); none found for {}", self.target)
            }
            (_, Some(dir)) => {
                anyhow::ensure!(dir.is_dir(), "--patterns {} is not a directory", dir.display());
                Mode::Synth
            }
            // a target whose campaigns synthesize from a library never falls back to random tests silently
            (None, None)
                if matches!(target.first(), TargetKind::Ort | TargetKind::Tvm | TargetKind::OrtTransformers) =>
            {
                anyhow::bail!(
                    "no pattern library for {} found (patterns/{} under ${}, the current directory, the \
                 executable's or the checkout it was built from): set {} to the oatest checkout, pass --patterns \
                 DIR, or choose --mode random",
                    self.target,
                    target.first().name(),
                    crate::util::HOME_VAR,
                    crate::util::HOME_VAR
                )
            }
            (None, None) => Mode::Random,
        };
        let jobs = self.jobs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
        anyhow::ensure!(jobs >= 1, "--jobs must be at least 1");
        let out = self.out.clone().unwrap_or_else(|| {
            let ts =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
            PathBuf::from("results").join(format!("{}-{}", self.target, timestamp(ts)))
        });
        Ok(Settings {
            target,
            seed: self.seed,
            budget,
            jobs,
            tolerance,
            seeds_dir: self.seeds.clone(),
            out,
            timeout_ms: self.timeout_ms,
            mem_mb: self.mem_mb,
            max_nodes: self.max_nodes,
            ort_lib: self.ort.ort_lib.clone(),
            configs: self.configs.iter().map(|c| Config::parse(c)).collect::<anyhow::Result<_>>()?,
            mode,
            patterns,
            triage: !self.no_triage,
            shard: self.shard.as_deref().map(campaign::Shard::parse).transpose()?.unwrap_or_default(),
            recycle_tests: self.recycle_tests,
            recycle_mb: self.recycle_mb,
            also_ort_libs: self.also_ort_libs.clone(),
            also_tvm: self.also_tvm.clone(),
            known: self.known.clone(),
            rotate_every: self.rotate_every,
            schedule: crate::synth::schedule::Schedule::parse(&self.schedule)?,
            feedback_every: self.feedback_every,
            exemplars: (!self.keep_all).then_some(self.exemplars),
            triage_share: self.triage_share,
            vary: self.vary.iter().map(|v| crate::synth::vary::Variation::parse(v)).collect::<anyhow::Result<_>>()?,
        })
    }
}

/// `YYYYmmdd-HHMMSS` (UTC) without a date crate.
fn timestamp(secs: u64) -> String {
    let (days, rem) = (secs / 86400, secs % 86400);
    // civil-from-days (Howard Hinnant)
    let z = days as i64 + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}{m:02}{d:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

pub fn run(a: FuzzArgs) -> anyhow::Result<()> {
    let (settings, resume) = match &a.resume {
        Some(dir) => {
            let (mut s, next_id, stats) = campaign::load_checkpoint(dir)?;
            if let Some(b) = a.budget() {
                s.budget = b;
            }
            if let Some(k) = a.shard.as_deref().map(campaign::Shard::parse).transpose()? {
                anyhow::ensure!(
                    k == s.shard,
                    "--shard {k}: {} is shard {} of its campaign (a resumed run keeps its shard)",
                    dir.display(),
                    s.shard
                );
            }
            s.out = dir.clone();
            (s, Some((next_id, stats)))
        }
        None => (a.settings()?, None),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    eprintln!(
        "oatest fuzz: target {}, mode {:?}, seed {}{}, {} jobs, budget {:?}, writing to {}",
        settings.target,
        settings.mode,
        settings.seed,
        if settings.shard.is_whole() { String::new() } else { format!(", shard {}", settings.shard) },
        settings.jobs,
        settings.budget,
        settings.out.display()
    );
    let src = match campaign::sources(&settings, &stop) {
        // stopped before the campaign began (during TVM's pattern check): nothing to resume, checks kept
        Err(e) if stop.load(std::sync::atomic::Ordering::Relaxed) => {
            eprintln!("oatest fuzz: {e:#}; no campaign was started");
            return Ok(());
        }
        r => r?,
    };
    let summary = campaign::run(settings, resume, src, stop)?;
    print_summary(&summary);
    Ok(())
}

fn print_summary(s: &campaign::Summary) {
    let st = &s.stats;
    println!("{}", if s.interrupted { "campaign interrupted (resume with --resume)" } else { "campaign finished" });
    println!("  target            {} {}", st.target, st.target_version);
    println!(
        "  tests executed    {} ({:.1} tests/s, {:.0} s{})",
        st.tests_executed,
        st.tests_per_sec,
        st.elapsed_sec - st.triage_finish_sec,
        if st.triage_finish_sec > 0.5 {
            format!(", then {:.0} s finishing triage", st.triage_finish_sec)
        } else {
            String::new()
        }
    );
    println!("  validity          {:.2}% ({} valid)", st.validity_rate * 100.0, st.tests_valid);
    println!(
        "  waiting for tests {:.2}% of the workers' time (tests made by generator threads in {:.0} s)",
        st.gen_time_share * 100.0,
        st.gen_time_sec
    );
    let rest = st.worker_cpu_sec - st.worker_target_cpu_sec;
    println!(
        "  CPU               fuzzer {:.0} s; workers {:.0} s ({:.0} s inside the target, {:.0} s else)",
        st.fuzzer_cpu_sec, st.worker_cpu_sec, st.worker_target_cpu_sec, rest
    );
    let recycled: u64 = st.workers_recycled.values().sum();
    println!(
        "  memory (RSS max)  fuzzer {:.0} MiB, a worker {:.0} MiB; {recycled} worker processes recycled",
        st.fuzzer_rss_max_mb, st.worker_rss_max_mb
    );
    println!(
        "  passes fired      {} distinct, {} distinct pairs in one test",
        st.passes_fired.len(),
        st.pass_pairs_distinct
    );
    for (kind, [tests, fired, found]) in &st.variations {
        let near = tests - fired;
        let invalid = st.variations_invalid.get(kind).copied().unwrap_or(0);
        let validity = 1.0 - invalid as f64 / (*tests).max(1) as f64;
        println!(
            "  variation {kind:<7} {tests} tests (validity {validity:.4}), target pass fired in {fired} ({near} near \
             misses), {found} with findings"
        );
    }
    println!(
        "  findings          {} raw, {} coarse signatures, {} source keys: {} kept as directories, {} counted",
        st.findings_raw,
        st.findings_unique,
        st.keys.len(),
        st.findings_written,
        st.findings_counted
    );
    for (k, v) in &st.by_symptom {
        println!("    {k:<15} {v}");
    }
    println!(
        "  triaged           {} findings ({} attached to an entry by a cheap check, {} left untriaged): {} distinct optimizer bugs",
        st.findings_triaged, st.findings_attached, st.findings_untriaged, st.bugs
    );
    for (class, n) in &st.entries_by_class {
        let findings = st.triaged_by_class.get(class).copied().unwrap_or(0);
        let folder = crate::triage::classify::Class::ALL
            .iter()
            .find(|c| c.name() == class)
            .map_or(class.as_str(), |c| c.folder());
        println!("    {class:<15} {n} entries in {folder}/ ({findings} findings)");
    }
    println!("  results           {}", s.out.display());
    println!("    index.html: the campaign page (figures, plots, entries and their reports); open it in a browser");
    println!("    stats.json, discovery.svg, throughput.svg, memory.svg, passes.svg");
    println!("    findings/<test>-<symptom>/ (model.onnx or recipe.json, input_*.pb, outcome.json, meta.json): a few per source key");
    println!(
        "    findings/counted.tsv: the others (test id, key, symptom), each made again from the seed and its test id"
    );
    println!("    bugs/<signature>/ (report.md, repro.py, model.onnx minimized, original.onnx), examples/<pass>/");
    println!("    reference/, precision/, widened/, platform/, nonfinite/, undecided/, unattributed/, contract/: findings that are not optimizer bugs");
    println!("    regression suite: oatest export {} --out DIR", s.out.display());
}

#[cfg(test)]
mod tests {
    use super::timestamp;

    #[test]
    fn timestamps_are_civil_utc() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(1_795_000_000), "20261118-110640");
    }
}
