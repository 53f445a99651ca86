//! The rules of the house that can be checked by reading the sources (docs/ARCHITECTURE.md): modules import
//! only from lower layers, files do not import each other around a circle, files stay short, no `#[path]`
//! includes, nothing reads outside the repository.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers of docs/ARCHITECTURE.md, lowest first: a module may import only from a lower row.
const LAYERS: &[&[&str]] = &[
    &["util"],
    &["graph"],
    &["ops", "case"],
    &["compiler", "seedgen"],
    &["oracle", "pattern"],
    &["synth"],
    &["finding"],
    &["triage"],
    &["report"],
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

/// A file's code without its `#[cfg(test)]` items (a test module, or a single item, wherever it sits) and without
/// line comments.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let item = &rest[i + "#[cfg(test)]".len()..];
        // the item ends at its first `;` outside braces, or at the brace that closes its first `{`
        let (mut depth, mut end) = (0usize, item.len());
        for (k, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// `crate::x` names used outside `#[cfg(test)]` code.
fn imports(text: &str) -> Vec<String> {
    let code = without_tests(text);
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

/// The module path of a file of src/ (`campaign::execute`; `campaign` for campaign/mod.rs; empty for lib.rs).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root().join("src")).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

/// The files of src/ a file names through `crate::` and `super::` paths (groups `super::{a, b}` too), outside
/// its tests: each path resolved to the longest module prefix that is a file.
fn file_imports(file: &Path, modules: &BTreeMap<Vec<String>, PathBuf>) -> Vec<Vec<String>> {
    let me = module_path(file);
    let code = without_tests(&std::fs::read_to_string(file).unwrap());
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let mut out = Vec::new();
    for start in ["crate::", "super::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && code[..i].chars().last().is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            // `super` from `a::b` (file a/b.rs) and from `a::b` (a/b/mod.rs) both name `a`
            let mut base: Vec<String> =
                if start == "crate::" { Vec::new() } else { me[..me.len().saturating_sub(1)].to_vec() };
            let mut rest = &code[i + start.len()..];
            let mut path = Vec::new();
            loop {
                if let Some(r) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = r;
                } else if let Some(r) = rest.strip_prefix('{') {
                    let group = &r[..r.find('}').unwrap_or(r.len())];
                    for name in group.split(',').map(|n| ident(n.trim())).filter(|n| !n.is_empty()) {
                        out.push([base.clone(), path.clone(), vec![name]].concat());
                    }
                    break;
                } else {
                    let name = ident(rest);
                    if name.is_empty() {
                        break;
                    }
                    rest = &rest[name.len()..];
                    path.push(name);
                    match rest.strip_prefix("::") {
                        Some(r) => rest = r,
                        None => break,
                    }
                }
            }
            if !path.is_empty() {
                out.push([base, path].concat());
            }
        }
    }
    let mut files: Vec<Vec<String>> = out
        .into_iter()
        .filter_map(|p| (1..=p.len()).rev().map(|n| p[..n].to_vec()).find(|m| modules.contains_key(m)))
        .filter(|m| *m != me)
        .collect();
    files.sort();
    files.dedup();
    files
}

/// The import circles between files of src/: strongly connected components of more than one file.
fn circles() -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files.iter().map(|f| (module_path(f), f.clone())).collect();
    let graph: BTreeMap<Vec<String>, Vec<Vec<String>>> =
        modules.iter().map(|(m, f)| (m.clone(), file_imports(f, &modules))).collect();
    // Tarjan's algorithm
    struct T<'a> {
        graph: &'a BTreeMap<Vec<String>, Vec<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a Vec<String>) {
        t.index.insert(v, (t.next, t.next));
        t.next += 1;
        t.stack.push(v);
        for w in &t.graph[v] {
            match t.index.get(w).copied() {
                None => {
                    visit(t, w);
                    let low = t.index[w].1.min(t.index[v].1);
                    t.index.get_mut(v).unwrap().1 = low;
                }
                Some((wi, _)) if t.stack.contains(&w) => {
                    let low = wi.min(t.index[v].1);
                    t.index.get_mut(v).unwrap().1 = low;
                }
                _ => {}
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                comp.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T { graph: &graph, index: BTreeMap::new(), stack: Vec::new(), next: 0, out: Vec::new() };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_import_circles_between_files() {
    let found = circles();
    assert!(found.is_empty(), "files that import each other, directly or around a circle: {found:?}");
}

#[test]
fn imports_are_read_past_test_modules_and_resolved_to_files() {
    let text = "use crate::graph::Graph;\n#[cfg(test)]\nmod tests {\n use crate::campaign::x;\n}\nfn f() { crate::ops::g(); }\n";
    assert_eq!(imports(text), ["graph", "ops"], "code after a test module is read; the test module is not");
    let campaign = root().join("src/campaign/execute.rs");
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files.iter().map(|f| (module_path(f), f.clone())).collect();
    let got = file_imports(&campaign, &modules);
    assert!(got.contains(&vec!["campaign".to_string()]), "super:: from campaign/execute.rs names campaign: {got:?}");
    assert!(got.iter().any(|m| m.first().is_some_and(|f| f == "oracle")), "{got:?}");
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

/// Functions longer than `max` lines in rustfmt'd `text`: from a line starting `fn` (after visibility) to the
/// closing brace at its indentation.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let body = l.trim_start();
        let indent = &l[..l.len() - body.len()];
        let rest = body.strip_prefix("pub(crate) ").or_else(|| body.strip_prefix("pub(super) "));
        let rest = rest.or_else(|| body.strip_prefix("pub ")).unwrap_or(body);
        let Some(name) = rest.strip_prefix("fn ").map(|r| r.split(['(', '<']).next().unwrap_or("").to_string()) else {
            continue;
        };
        if l.trim_end().ends_with(';') {
            continue; // a declaration without a body
        }
        let close = format!("{indent}}}");
        if let Some(j) = lines[i + 1..].iter().position(|x| *x == close) {
            if j + 2 > max {
                out.push((name, j + 2));
            }
        }
    }
    out
}

#[test]
fn functions_stay_under_150_lines() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let long: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            long_functions(&text, 150).into_iter().map(move |(n, k)| format!("{}: {n} ({k} lines)", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "functions over 150 lines: {long:#?}");
    // the check itself sees a long function
    let long_one = format!("fn f() {{\n{}}}\n", "    x();\n".repeat(150));
    assert_eq!(long_functions(&long_one, 150), [("f".to_string(), 152)]);
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
