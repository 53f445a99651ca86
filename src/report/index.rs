//! The run-level index `bugs/README.md`: every entry of the run by class (optimizer bugs first), then by
//! culprit, with its symptom, size, how many findings it stands for, whether it is a known upstream issue and
//! the ORT version that fixed it (when other builds were checked), linked to its directory.

use super::record::BugRecord;
use crate::triage::classify::Class;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// Writes `<run>/bugs/README.md` from the bug.json files of `bugs/` and the class folders. Returns how many
/// entries it lists.
pub fn write(run: &Path) -> anyhow::Result<usize> {
    let mut s = String::from("# Findings of this run, by class\n\n");
    let _ = writeln!(
        s,
        "Only `optimizer` entries are optimizer bugs to report; the other classes are kept for reference. \
         Each entry links to its directory (report.md, repro.py, the minimized model).\n"
    );
    let counted = counted_by_entry(run);
    let logged: usize = crate::finding::exemplars::counted(run).unwrap_or_default().values().map(|v| v.len()).sum();
    if logged > 0 {
        let written = crate::finding::finding_dirs(run, false).map(|d| d.len()).unwrap_or(0);
        let _ = writeln!(
            s,
            "{} findings: {written} kept as directories under `findings/`, {logged} more of the same source keys \
             counted in `findings/counted.tsv` (each is made again from the campaign seed and its test id). An \
             entry's `findings` counts both.\n",
            written + logged
        );
    }
    let mut total = 0;
    for class in Class::ALL {
        let folder = run.join(class.folder());
        // (culprit, entry name, findings it stands for: its own and those counted at the source, the record)
        let mut rows: Vec<(String, String, u64, BugRecord)> = Vec::new();
        for e in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(rec) = super::record::read(&e.path()) else { continue };
            let mut culprit = super::words::faulty_or(&rec.triage, "(none)");
            // one bug seen with several culprit sets (super::related)
            if rec.culprit_sets.len() > 1 {
                let others = rec.culprit_sets.len() - 1;
                culprit.push_str(&format!(" (and {others} other culprit set{})", if others == 1 { "" } else { "s" }));
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let n = rec.findings.len() as u64 + counted.get(&(class.folder().to_string(), name.clone())).unwrap_or(&0);
            rows.push((culprit, name, n, rec));
        }
        if rows.is_empty() {
            continue;
        }
        rows.sort_by(|a, b| (&a.0, std::cmp::Reverse(a.2)).cmp(&(&b.0, std::cmp::Reverse(b.2))));
        let _ = writeln!(s, "## {} ({} entries): {}\n", class, rows.len(), class.meaning());
        let _ = writeln!(s, "| culprit | enabled by | symptom | nodes | findings | known | upstream | entry |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        let link = if class == Class::Optimizer { String::new() } else { format!("../{}/", class.folder()) };
        for (culprit, name, n, rec) in &rows {
            let _ = writeln!(
                s,
                "| {culprit} | {} | {} | {} | {} | {} | {} | [{name}]({link}{name}/report.md) |",
                if rec.triage.enablers.is_empty() { "-".to_string() } else { rec.triage.enablers.join(" + ") },
                rec.symptom,
                rec.triage.nodes,
                n,
                rec.upstream
                    .known
                    .as_ref()
                    .map(|k| format!("[{}]({}) {}", short(&k.link), k.link, k.status))
                    .unwrap_or("new".into()),
                rec.upstream.upstream_cell()
            );
        }
        s.push('\n');
        total += rows.len();
    }
    std::fs::create_dir_all(run.join("bugs"))?;
    crate::util::write_atomic(&run.join("bugs").join("README.md"), s.as_bytes())?;
    Ok(total)
}

/// Findings counted at the source (`finding::exemplars`), by the entry they count towards: (class folder, entry
/// name) -> count. A counted finding counts towards the entry of its key's first triaged exemplar.
pub fn counted_by_entry(run: &Path) -> HashMap<(String, String), u64> {
    let counted = crate::finding::exemplars::counted(run).unwrap_or_default();
    let mut entry_of: HashMap<String, (String, String)> = HashMap::new();
    if !counted.is_empty() {
        for dir in crate::finding::finding_dirs(run, false).unwrap_or_default() {
            let (Ok(meta), Some(filed)) = (crate::finding::load_meta(&dir), crate::triage::session::load_filed(&dir))
            else {
                continue;
            };
            // finding directories come in test-id order: the first triaged exemplar of a key wins
            if meta.key.is_empty() || entry_of.contains_key(&meta.key) {
                continue;
            }
            let bug = Path::new(&filed.bug_dir);
            let part = |p: Option<&Path>| p.and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned());
            if let (Some(folder), Some(name)) = (part(bug.parent()), part(Some(bug))) {
                entry_of.insert(meta.key, (folder, name));
            }
        }
    }
    let mut out: HashMap<(String, String), u64> = HashMap::new();
    for (key, ids) in counted {
        if let Some(e) = entry_of.get(&key) {
            *out.entry(e.clone()).or_default() += ids.len() as u64;
        }
    }
    out
}

/// `microsoft/onnxruntime#23116` for a GitHub issue or pull request link, else the link.
fn short(link: &str) -> String {
    let path = link.trim_start_matches("https://github.com/");
    match path.split('/').collect::<Vec<_>>()[..] {
        [owner, repo, "issues" | "pull", n] => format!("{owner}/{repo}#{n}"),
        _ => link.to_string(),
    }
}
