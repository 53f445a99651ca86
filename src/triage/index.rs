//! The run-level index `bugs/README.md`: every entry of the run by class (optimizer bugs first), then by
//! culprit, with its symptom, size, how many findings it stands for, whether it is a known upstream issue and
//! the ORT version that fixed it (when other builds were checked), linked to its directory.

use super::classify::Class;
use super::report::BugRecord;
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
    let mut total = 0;
    for class in Class::ALL {
        let folder = run.join(class.folder());
        let mut rows: Vec<(String, String, BugRecord)> = Vec::new();
        for e in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(text) = std::fs::read_to_string(e.path().join("bug.json")) else { continue };
            let Ok(rec) = serde_json::from_str::<BugRecord>(&text) else { continue };
            let faulty: Vec<&str> =
                rec.triage.culprits.iter().filter(|p| !rec.triage.enablers.contains(p)).map(|p| p.as_str()).collect();
            let mut culprit = if faulty.is_empty() { "(none)".to_string() } else { faulty.join(" + ") };
            // one bug seen with several culprit sets (super::related)
            if rec.culprit_sets.len() > 1 {
                let others = rec.culprit_sets.len() - 1;
                culprit.push_str(&format!(" (and {others} other culprit set{})", if others == 1 { "" } else { "s" }));
            }
            rows.push((culprit, e.file_name().to_string_lossy().into_owned(), rec));
        }
        if rows.is_empty() {
            continue;
        }
        rows.sort_by(|a, b| {
            (&a.0, std::cmp::Reverse(a.2.findings.len())).cmp(&(&b.0, std::cmp::Reverse(b.2.findings.len())))
        });
        let _ = writeln!(s, "## {} ({} entries): {}\n", class, rows.len(), class.meaning());
        let _ = writeln!(s, "| culprit | enabled by | symptom | nodes | findings | known | upstream | entry |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        let link = if class == Class::Optimizer { String::new() } else { format!("../{}/", class.folder()) };
        for (culprit, name, rec) in &rows {
            let _ = writeln!(
                s,
                "| {culprit} | {} | {} | {} | {} | {} | {} | [{name}]({link}{name}/report.md) |",
                if rec.triage.enablers.is_empty() { "-".to_string() } else { rec.triage.enablers.join(" + ") },
                rec.symptom,
                rec.triage.nodes,
                rec.findings.len(),
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

/// `microsoft/onnxruntime#23116` for a GitHub issue or pull request link, else the link.
fn short(link: &str) -> String {
    let path = link.trim_start_matches("https://github.com/");
    match path.split('/').collect::<Vec<_>>()[..] {
        [owner, repo, "issues" | "pull", n] => format!("{owner}/{repo}#{n}"),
        _ => link.to_string(),
    }
}
