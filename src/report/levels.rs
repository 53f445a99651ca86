//! What a report shows besides triage's own runs, measured when the report is written: the minimized test run at
//! every optimization level of its target (each compared with the unoptimized run), and ONNX's semantic
//! reference (onnx.reference) on it; rendered as the report's table of results per level.

use crate::compiler::{Config, Level, Outcome, Status};
use crate::oracle::{Hints, Tolerance};
use crate::triage::{Minimized, Reproducer};
use std::fmt::Write as _;

/// The minimized test's runs at every level (the first is the unoptimized one), and the semantic reference's.
#[derive(Clone, Debug, Default)]
pub struct Levels {
    pub runs: Vec<Outcome>,
    /// onnx.reference on the minimized model (None: not asked, e.g. a Relax recipe or no reference at hand).
    pub semantic: Option<Result<Outcome, crate::triage::classify::NoReference>>,
}

/// The levels a target's reports show: ORT's four (and TVM's pipeline levels), else the target's defaults.
fn levels_of(target: &str, defaults: &[Config]) -> Vec<Config> {
    match target {
        "ort" | "tvm" | "ort-transformers" => {
            [Level::Disable, Level::Basic, Level::Extended, Level::All].map(Config::level).to_vec()
        }
        _ => defaults.to_vec(),
    }
}

/// Runs the minimized test of `m` at every level (with the thread count of `config`) and, for an ONNX model,
/// under the semantic reference.
pub fn measure(r: &mut Reproducer, m: &Minimized, config: &Config) -> Levels {
    let mut configs = levels_of(&r.finding.target, &r.worker.info.default_configs);
    // a finding under a named configuration (session entries, `compiler::named`) also shows that configuration
    if !config.options.is_empty() || !configs.iter().any(|c| c.level == config.level) {
        let mut own = config.clone();
        own.disabled.clear();
        configs.push(own);
    }
    let runs = configs
        .into_iter()
        .map(|mut c| {
            c.threads = config.threads;
            r.run(&m.model_bytes, &m.case.feeds, &c)
        })
        .collect();
    let semantic = match (&mut r.semantic, m.pattern_needed) {
        (Some(s), false) => Some(s.run(&crate::graph::onnx::encode_model(&m.case.model), &m.case.feeds)),
        _ => None,
    };
    Levels { runs, semantic }
}

/// ORT's name of a level (`graph_optimization_level`).
pub fn ort_level(level: Level) -> &'static str {
    match level {
        Level::Disable => "ORT_DISABLE_ALL",
        Level::Basic => "ORT_ENABLE_BASIC",
        Level::Extended => "ORT_ENABLE_EXTENDED",
        Level::Layout => "ORT_ENABLE_LAYOUT",
        Level::All => "ORT_ENABLE_ALL",
    }
}

/// What a level of the ort-transformers target runs.
fn ortx_level(level: Level) -> &'static str {
    match level {
        Level::Disable => "the original model, ORT_DISABLE_ALL",
        Level::Basic => "optimize_model, then ORT_DISABLE_ALL",
        Level::Extended => "optimize_model, then ORT_ENABLE_EXTENDED",
        Level::Layout => "optimize_model, then ORT_ENABLE_LAYOUT",
        Level::All => "optimize_model, then ORT_ENABLE_ALL",
    }
}

/// A run's result for a table cell: `ok`, or its failure (first line, shortened, `|` escaped).
fn status_cell(o: &Outcome) -> String {
    let first = o.status.message().lines().next().unwrap_or_default().to_string();
    let short: String = first.chars().take(140).collect();
    let more = if short.len() < first.len() { "..." } else { "" };
    match &o.status {
        Status::Ok => "ok".into(),
        st => format!("{}: {short}{more}", st.kind()).replace('|', "\\|"),
    }
}

/// How `o`'s outputs compare with the unoptimized run's: the max absolute difference, and whether some element
/// is beyond the tolerance.
fn diff_cell(base: Option<&Outcome>, o: &Outcome, tolerance: Tolerance, hints: &Hints) -> String {
    let Some(base) = base.filter(|b| b.status == Status::Ok) else { return "-".into() };
    if o.status != Status::Ok {
        return "-".into();
    }
    match crate::oracle::distance_with(&base.outputs, &o.outputs, tolerance.for_config(&o.config), hints) {
        Ok(d) if d.exceeds => format!("**{:e}** ({} of {} elements beyond tolerance)", d.max, d.exceeding, d.elements),
        Ok(d) => format!("{:e} (within tolerance)", d.max),
        Err(e) => format!("not comparable: {}", e.0).replace('|', "\\|"),
    }
}

/// The table of results per level, the run with the culprits disabled, and onnx.reference, in markdown.
pub fn table(target: &str, levels: &Levels, without: Option<&Outcome>, m: &Minimized, tolerance: Tolerance) -> String {
    let hints = Hints::of(&m.case.model.graph);
    let base = levels.runs.first();
    let mut s = String::from("| configuration | result | max abs. difference vs. `disable` |\n|---|---|---|\n");
    let name = |c: &Config| match target {
        "ort" => {
            // the level and its session entries (a named configuration's, `compiler::named`), as ORT spells them
            let mut plain = c.clone();
            plain.disabled.clear();
            let mut how: Vec<String> = vec![ort_level(c.level).to_string()];
            how.extend(c.options.iter().map(|(k, v)| format!("{k}={v}")));
            match c.disabled.is_empty() {
                true => format!("`{plain}` ({})", how.join(", ")),
                false => format!("`{plain}` ({}) with `{}` disabled", how.join(", "), c.disabled.join(";")),
            }
        }
        "ort-transformers" => format!("`{c}` ({})", ortx_level(c.level)),
        _ if c.disabled.is_empty() => format!("`{}`", c.level.name()),
        _ => format!("`{}` with `{}` disabled", c.level.name(), c.disabled.join(";")),
    };
    for (i, o) in levels.runs.iter().chain(without).enumerate() {
        let diff = if i == 0 { "(the reference)".to_string() } else { diff_cell(base, o, tolerance, &hints) };
        let _ = writeln!(s, "| {} | {} | {diff} |", name(&o.config), status_cell(o));
    }
    match &levels.semantic {
        Some(Ok(o)) => {
            let _ = writeln!(
                s,
                "| onnx.reference (ONNX semantics) | {} | {} |",
                status_cell(o),
                diff_cell(base, o, tolerance, &hints)
            );
        }
        Some(Err(e)) => {
            let why: String = e.to_string().chars().take(140).collect();
            let _ = writeln!(s, "| onnx.reference (ONNX semantics) | not run: {} | - |", why.replace('|', "\\|"));
        }
        None => {}
    }
    s
}
