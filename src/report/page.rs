//! The campaign page `<run>/index.html`: one self-contained static file (opens from disk, no server; plots and
//! graphs embedded as data URIs) with the headline figures, the discovery curve, throughput and memory, the
//! passes fired, the table of entries by class (findings, versions, known issues), and each entry's report with
//! its minimized graph drawn. Re-written while the campaign runs (the page then reloads itself every 30 s).

use super::record::BugRecord;
use crate::triage::classify::Class;
use base64::Engine as _;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

/// How often a live page reloads itself, in seconds.
pub const RELOAD_SEC: u32 = 30;

/// One entry of the run: its class folder, directory name and record.
struct Entry {
    class: Class,
    name: String,
    rec: BugRecord,
}

impl Entry {
    fn dir(&self) -> String {
        format!("{}/{}", self.class.folder(), self.name)
    }

    fn anchor(&self) -> String {
        format!("entry-{}-{}", self.class.folder(), self.name)
    }

    fn faulty(&self) -> String {
        super::words::faulty_or(&self.rec.triage, "(none)")
    }
}

/// Writes `<run>/index.html` (atomically) from the run's files: stats.json, the plots, and every class folder's
/// entries. `live`: the campaign still runs (the page reloads itself).
pub fn write(run: &Path, live: bool) -> anyhow::Result<()> {
    let html = render(run, live)?;
    crate::util::write_atomic(&run.join("index.html"), html.as_bytes())
}

fn render(run: &Path, live: bool) -> anyhow::Result<String> {
    let stats: Value = match std::fs::read_to_string(run.join("stats.json")) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a campaign's statistics: {e}", run.join("stats.json").display()))?,
        Err(_) => Value::Null,
    };
    let entries = entries(run);
    let counted = super::index::counted_by_entry(run);
    let title = format!(
        "oatest: {} {} campaign, seed {}",
        stats["target"].as_str().unwrap_or("?"),
        stats["target_version"].as_str().unwrap_or(""),
        stats["seed"].as_u64().map_or("?".into(), |s| s.to_string())
    );
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    if live {
        let _ = writeln!(s, "<meta http-equiv=\"refresh\" content=\"{RELOAD_SEC}\">");
    }
    let _ = writeln!(s, "<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>", esc(&title));
    let _ = writeln!(s, "<h1>{}</h1>", esc(&title));
    let state = if live { format!("running: this page reloads every {RELOAD_SEC} s") } else { "finished".to_string() };
    let _ = writeln!(s, "<p class=\"state\" id=\"state\">{}, {}</p>", esc(&state), esc(&run.display().to_string()));
    figures(&mut s, &stats, &entries);
    plots(&mut s, run);
    table(&mut s, &entries, &counted);
    reports(&mut s, run, &entries);
    s.push_str("</body>\n</html>\n");
    Ok(s)
}

/// Every entry of the run's class folders (optimizer bugs first), by name.
fn entries(run: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    for class in Class::ALL {
        let mut here: Vec<Entry> = std::fs::read_dir(run.join(class.folder()))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let rec = super::record::read(&e.path()).ok()?;
                Some(Entry { class, name: e.file_name().to_string_lossy().into_owned(), rec })
            })
            .collect();
        here.sort_by(|a, b| a.faulty().cmp(&b.faulty()).then(a.name.cmp(&b.name)));
        out.extend(here);
    }
    out
}

fn figures(s: &mut String, st: &Value, entries: &[Entry]) {
    let num = |k: &str| st[k].as_f64();
    let int = |k: &str| num(k).map_or("-".to_string(), |v| format!("{}", v as u64));
    let bugs = entries.iter().filter(|e| e.class == Class::Optimizer).count();
    let mut rows: Vec<(String, String)> = vec![
        ("tests", int("tests_executed")),
        ("tests per second", num("tests_per_sec").map_or("-".into(), |v| format!("{v:.1}"))),
        ("elapsed", num("elapsed_sec").map_or("-".into(), duration)),
        ("validity", num("validity_rate").map_or("-".into(), |v| format!("{:.2}%", v * 100.0))),
        ("passes fired", st["passes_fired"].as_object().map_or("-".into(), |m| m.len().to_string())),
        ("raw findings", int("findings_raw")),
        ("kept as directories", int("findings_written")),
        ("counted at the source", int("findings_counted")),
        ("source keys", st["keys"].as_object().map_or("-".into(), |m| m.len().to_string())),
        ("optimizer bugs (bugs/)", bugs.to_string()),
        ("entries of other classes", (entries.len() - bugs).to_string()),
        ("fuzzer memory, peak", num("fuzzer_rss_max_mb").map_or("-".into(), |v| format!("{v:.0} MB"))),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    // each variation kind (`--vary`): its tests, how many still fired their pattern's pass, and findings
    for (kind, v) in st["variations"].as_object().into_iter().flatten() {
        let n = |i: usize| v[i].as_u64().unwrap_or(0);
        let (tests, fired, found) = (n(0), n(1), n(2));
        let invalid = st["variations_invalid"][kind].as_u64().unwrap_or(0);
        let fired = format!(
            "{tests} tests, validity {:.4}, target pass fired in {fired} ({} near misses), {found} with findings",
            1.0 - invalid as f64 / tests.max(1) as f64,
            tests - fired
        );
        rows.push((format!("variation {kind}"), fired));
    }
    s.push_str("<h2 id=\"figures\">Figures</h2>\n<table class=\"figures\">\n");
    for (k, v) in rows {
        let _ = writeln!(s, "<tr><th>{}</th><td>{}</td></tr>", esc(&k), esc(&v));
    }
    s.push_str("</table>\n");
}

fn plots(s: &mut String, run: &Path) {
    let plots = [
        ("discovery.svg", "Discovery: distinct signatures, source keys and entries over time, beside raw findings"),
        ("throughput.svg", "Throughput"),
        ("memory.svg", "Resident memory"),
        ("passes.svg", "Passes fired"),
    ];
    s.push_str("<h2 id=\"plots\">Plots</h2>\n");
    for (file, caption) in plots {
        let Ok(bytes) = std::fs::read(run.join(file)) else { continue };
        let _ = writeln!(
            s,
            "<figure><img alt=\"{}\" src=\"data:image/svg+xml;base64,{}\"><figcaption>{}</figcaption></figure>",
            esc(caption),
            base64::engine::general_purpose::STANDARD.encode(&bytes),
            esc(caption)
        );
    }
}

fn table(s: &mut String, entries: &[Entry], counted: &std::collections::HashMap<(String, String), u64>) {
    s.push_str("<h2 id=\"entries\">Entries</h2>\n");
    if entries.is_empty() {
        s.push_str("<p>No entries yet.</p>\n");
        return;
    }
    s.push_str(
        "<table id=\"entries-table\">\n<thead><tr><th>class</th><th>entry</th><th>symptom</th><th>faulty pass</th>\
         <th>enablers</th><th>nodes</th><th>findings</th><th>known</th><th>versions</th></tr></thead>\n<tbody>\n",
    );
    for e in entries {
        let t = &e.rec.triage;
        let n = e.rec.findings.len() as u64
            + counted.get(&(e.class.folder().to_string(), e.name.clone())).copied().unwrap_or(0);
        let known = match &e.rec.upstream.known {
            Some(k) => format!("<a href=\"{}\">{}</a> ({})", esc(&k.link), esc(&short_link(&k.link)), esc(&k.status)),
            None => "new".into(),
        };
        let versions: Vec<String> = e.rec.upstream.versions.iter().map(|(v, r)| format!("{v}: {r}")).collect();
        let _ = writeln!(
            s,
            "<tr class=\"entry\"><td>{}</td><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{} of {}</td><td>{n}</td><td>{known}</td><td>{}</td></tr>",
            esc(e.class.name()),
            esc(&e.anchor()),
            esc(&e.name),
            esc(e.rec.symptom.name()),
            esc(&e.faulty()),
            esc(&t.enablers.join(" + ")),
            t.nodes,
            t.original_nodes,
            esc(&if versions.is_empty() { "-".to_string() } else { versions.join(", ") })
        );
    }
    s.push_str("</tbody>\n</table>\n");
}

fn reports(s: &mut String, run: &Path, entries: &[Entry]) {
    if entries.is_empty() {
        return;
    }
    s.push_str("<h2 id=\"reports\">Reports</h2>\n");
    for e in entries {
        let dir = run.join(e.dir());
        let _ = writeln!(s, "<article id=\"{}\">", esc(&e.anchor()));
        let _ = writeln!(s, "<h3>{} <code>{}</code>: {}</h3>", esc(e.class.name()), esc(&e.name), esc(&e.faulty()));
        // the entry's files, linked relative to the page
        let files: Vec<String> = ["report.md", "repro.py", "model.onnx", "recipe.json", "module.py", "original.onnx"]
            .iter()
            .filter(|f| dir.join(f).exists())
            .map(|f| format!("<a href=\"{}/{f}\">{f}</a>", esc(&e.dir())))
            .collect();
        let _ = writeln!(s, "<p class=\"files\">{}</p>", files.join(" · "));
        if let Some(svg) = crate::graph::onnx::load(&dir.join("model.onnx")).ok().and_then(|m| super::graph::svg(&m)) {
            let _ = writeln!(
                s,
                "<figure class=\"graph\"><img alt=\"the minimized graph of {}\" src=\"data:image/svg+xml;base64,{}\">\
                 <figcaption>the minimized graph</figcaption></figure>",
                esc(&e.name),
                base64::engine::general_purpose::STANDARD.encode(svg.as_bytes())
            );
        }
        if let Ok(md) = std::fs::read_to_string(dir.join("report.md")) {
            s.push_str("<div class=\"report\">\n");
            s.push_str(&markdown(&md));
            s.push_str("</div>\n");
        }
        s.push_str("</article>\n");
    }
}

/// A report's Markdown as HTML: tables and strikethrough on; raw HTML kept only for `<details>` and
/// `<summary>` (what the tracker's template folds), any other escaped (compiler messages may hold `<`).
fn markdown(md: &str) -> String {
    use pulldown_cmark::{Event, Options, Parser};
    let allowed = |h: &str| {
        let t = h.trim().to_ascii_lowercase();
        ["<details", "</details", "<summary", "</summary", "<br"].iter().any(|p| t.starts_with(p))
    };
    let events = Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(|ev| match ev {
        Event::Html(h) | Event::InlineHtml(h) if !allowed(&h) => Event::Text(h),
        other => other,
    });
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    // a relative link of a report points into its own directory, which the page is not in: left as text
    out
}

/// `42 s`, `17 min`, `12.0 h`.
fn duration(sec: f64) -> String {
    match sec {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// `microsoft/onnxruntime#23116` for a GitHub issue link, else the link.
fn short_link(link: &str) -> String {
    let rest = link.trim_start_matches("https://github.com/");
    match rest.split('/').collect::<Vec<_>>().as_slice() {
        [owner, repo, "issues" | "pull", n] => format!("{owner}/{repo}#{n}"),
        _ => link.to_string(),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;\
vertical-align:top}table.figures th{background:#f4f4f4}figure{margin:1em 0}figure img{max-width:100%}\
figcaption{color:#555;font-size:.9em}article{border-top:2px solid #ddd;margin-top:2em}.state{color:#555}\
pre{background:#f6f6f6;padding:.6em;overflow-x:auto}code{font-size:.92em}.graph img{max-height:700px}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_keeps_folds_and_tables_and_escapes_other_html() {
        let html = markdown(
            "a <script>x</script>\n\n<details><summary>s</summary>\n\nbody\n\n</details>\n\n| a |\n|---|\n| 1 |\n",
        );
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("<details>") && html.contains("<table>"), "{html}");
        assert_eq!(short_link("https://github.com/microsoft/onnxruntime/issues/23116"), "microsoft/onnxruntime#23116");
    }

    #[test]
    fn a_run_without_entries_gets_a_page_with_its_figures() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stats.json"), r#"{"target": "ort", "seed": 3, "tests_executed": 12}"#).unwrap();
        write(dir.path(), true).unwrap();
        let page = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(page.contains("http-equiv=\"refresh\"") && page.contains("<td>12</td>") && page.contains("No entries"));
        write(dir.path(), false).unwrap();
        assert!(!std::fs::read_to_string(dir.path().join("index.html")).unwrap().contains("refresh"));
    }
}
