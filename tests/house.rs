//! The rules of the house that can be checked by reading the sources (docs/ARCHITECTURE.md): modules import
//! only from lower layers, files stay short, no `#[path]` includes, nothing reads outside the repository.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers of docs/ARCHITECTURE.md, lowest first: a module may import only from a lower row.
const LAYERS: &[&[&str]] = &[
    &["util"],
    &["graph"],
    &["ops"],
    &["compiler", "seedgen"],
    &["oracle", "pattern"],
    &["synth"],
    &["finding"],
    &["triage"],
    &["campaign"],
    &["cli"],
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn layer(module: &str) -> usize {
    LAYERS.iter().position(|row| row.contains(&module)).unwrap_or_else(|| panic!("{module} is in no layer"))
}

/// The top-level module a file of src/ belongs to (`None` for lib.rs and main.rs).
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root().join("src")).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy().to_string();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// `crate::x` names used outside `#[cfg(test)]` code (test modules sit at the end of a file here).
fn imports(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && name.chars().next().unwrap().is_ascii_lowercase() {
            out.push(name);
        }
    }
    out
}

#[test]
fn modules_import_only_from_lower_layers() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in &files {
        let Some(m) = module_of(f) else { continue };
        if f.file_name().is_some_and(|n| n == "tests.rs" || n == "testutil.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for used in imports(&text) {
            if used != m && layer(&used) >= layer(&m) {
                wrong.entry(f.display().to_string()).or_default().push(used);
            }
        }
    }
    assert!(wrong.is_empty(), "imports from the same or a higher layer: {wrong:#?}");
}

#[test]
fn source_files_stay_short_and_include_nothing_by_path() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > 520).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over ~500 lines: {long:?}");
    let with_path: Vec<String> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).unwrap().contains("#[path"))
        .map(|f| f.display().to_string())
        .collect();
    assert!(with_path.is_empty(), "#[path] includes: {with_path:?}");
}

#[test]
fn nothing_reads_outside_the_repository() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "scripts", "python", "benches"] {
        let mut stack = vec![root().join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    if !p.ends_with("data") && !p.ends_with("__pycache__") {
                        stack.push(p);
                    }
                } else if p.extension().is_some_and(|x| x == "rs" || x == "py" || x == "sh") {
                    files.push(p);
                }
            }
        }
    }
    let needle = ["..", "shared"].join("/");
    let outside: Vec<String> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(&needle)))
        .map(|f| f.display().to_string())
        .collect();
    assert!(outside.is_empty(), "files that refer to a folder beside the repository: {outside:?}");
}
