//! The docs cannot drift from the command line: every flag of every subcommand (from clap's own `--help`) is named
//! in docs/guide.md, every `--flag` the guide names is a flag of some subcommand (or of a tool it quotes), and the
//! README stays short: at most 150 lines, none over 120 characters.

mod common;

use common::oatest;
use std::collections::BTreeSet;

/// `--flag` words in a text.
fn flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-' && b[i + 1] == b'-' && b[i + 2].is_ascii_lowercase();
        if starts && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-')) {
            let end = (i + 2..b.len()).find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'-')).unwrap_or(b.len());
            out.insert(text[i..end].trim_end_matches('-').to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The subcommands (and sub-subcommands) listed in a help text's `Commands:` section.
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

fn help(path: &[String]) -> String {
    let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
    args.push("--help");
    let o = oatest(&args);
    assert!(o.status.success(), "oatest {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every flag of every subcommand, with the subcommand's path.
fn cli_flags() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = commands(&help(&[])).into_iter().map(|c| vec![c]).collect();
    while let Some(path) = todo.pop() {
        let h = help(&path);
        for c in commands(&h) {
            todo.push([path.clone(), vec![c]].concat());
        }
        for f in flags(&h) {
            out.push((path.join(" "), f));
        }
    }
    out
}

/// Flags of other tools the guide quotes (pip, cargo, sbatch, kubectl).
const FOREIGN: &[&str] = &["--no-deps", "--path", "--dependency", "--for", "--timeout"];

#[test]
fn every_flag_is_in_the_guide_and_every_flag_of_the_guide_exists() {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide.md")).unwrap();
    let named = flags(&guide);
    let cli = cli_flags();
    assert!(cli.len() > 50, "the subcommands' flags were read: {cli:?}");
    let missing: Vec<String> = cli
        .iter()
        .filter(|(_, f)| f != "--help" && f != "--version" && !named.contains(f))
        .map(|(c, f)| format!("oatest {c} {f}"))
        .collect();
    assert!(missing.is_empty(), "flags docs/guide.md does not name: {missing:?}");
    let known: BTreeSet<&str> = cli.iter().map(|(_, f)| f.as_str()).chain(FOREIGN.iter().copied()).collect();
    let stale: Vec<&String> = named.iter().filter(|f| !known.contains(f.as_str())).collect();
    assert!(stale.is_empty(), "flags docs/guide.md names that no subcommand has: {stale:?}");
}

#[test]
fn the_readme_is_short() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(readme.lines().count() <= 150, "README.md has {} lines", readme.lines().count());
    let long: Vec<(usize, usize)> =
        readme.lines().enumerate().filter(|(_, l)| l.chars().count() > 120).map(|(i, l)| (i + 1, l.len())).collect();
    assert!(long.is_empty(), "README.md lines over 120 characters (line, length): {long:?}");
}

#[test]
fn flags_are_read_as_words() {
    let f = flags("use --keep-all, or `--exemplars K`; not a-b--c nor ---x");
    assert_eq!(f.into_iter().collect::<Vec<_>>(), ["--exemplars", "--keep-all"]);
}
