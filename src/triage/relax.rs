//! Relax-level reduction (TVM): a Relax-level finding's recipe becomes a module test (the module the runner
//! compiles for it, as TVMScript), reduced by edits as values ([`RelaxEdit`]) that the worker's runner makes
//! (`python/oatest_tvm_reduce.py`: each result well formed and re-parsed), every candidate checked like a graph.

use super::reduce::{generated, Case, Limits};
use super::Reproducer;
use crate::compiler::{NamedTensor, Outcome, Status};
use crate::graph::{DType, TensorType};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::Instant;

/// The `kind` of a request to the runner's reduction tool.
pub const TOOL_KIND: &str = "oatest-relax-tool";

pub use super::load::ModuleTest;

/// A static tensor type as the runner writes it: (dtype, dims).
pub type StaticType = Option<(String, Vec<i64>)>;

/// A module's structure (`summary` of the runner's tool).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Summary {
    pub functions: Vec<Function>,
    /// Top-level bindings of every Relax function.
    pub bindings: usize,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Function {
    pub name: String,
    pub relax: bool,
    pub called: bool,
    #[serde(default)]
    pub params: Vec<Param>,
    #[serde(default)]
    pub bindings: Vec<Binding>,
    #[serde(default)]
    pub outputs: usize,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Param {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: StaticType,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Binding {
    pub var: String,
    #[serde(rename = "type")]
    pub ty: StaticType,
    pub value: String,
}

impl Summary {
    fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }
}

/// One Relax-level reduction step (bindings by their index among a function's top-level bindings).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RelaxEdit {
    /// Remove a function no other function calls (not main).
    DropFunction { func: String },
    /// main returns only this output.
    KeepOutput { index: usize },
    /// main no longer returns this output.
    DropOutput { index: usize },
    /// main returns this binding's value instead of its outputs (what came after it goes).
    ReturnValue { func: String, index: usize },
    /// Remove a binding; its readers read an operand of the same type.
    DropBinding { func: String, index: usize },
    /// A value of main becomes a fresh parameter of main (fed a generated tensor).
    Param { func: String, index: usize },
    /// A value becomes `R.zeros` of its type.
    Zeros { func: String, index: usize },
    /// Remove a parameter nothing reads from a function other than main, and its argument from its calls.
    DropParam { func: String, index: usize },
}

/// The edits worth trying on a module, most promising (largest) first.
pub fn candidates(s: &Summary) -> Vec<RelaxEdit> {
    let mut out = Vec::new();
    for f in s.functions.iter().filter(|f| f.name != "main" && !f.called) {
        out.push(RelaxEdit::DropFunction { func: f.name.clone() });
    }
    if let Some(main) = s.function("main").filter(|m| m.outputs > 1) {
        out.extend((0..main.outputs).map(|index| RelaxEdit::KeepOutput { index }));
        out.extend((0..main.outputs).map(|index| RelaxEdit::DropOutput { index }));
    }
    // the value a failure starts from may fail alone: main returning it cuts everything after it
    if let Some(main) = s.function("main") {
        let typed = main.bindings.iter().enumerate().filter(|(_, b)| b.ty.is_some());
        out.extend(typed.map(|(index, _)| RelaxEdit::ReturnValue { func: "main".into(), index }));
    }
    let relax = || s.functions.iter().filter(|f| f.relax);
    for f in relax() {
        out.extend((0..f.bindings.len()).rev().map(|index| RelaxEdit::DropBinding { func: f.name.clone(), index }));
    }
    if let Some(main) = s.function("main") {
        for (index, b) in main.bindings.iter().enumerate().filter(|(_, b)| b.ty.is_some()) {
            if b.value != "DataflowVar" && b.value != "Var" {
                out.push(RelaxEdit::Param { func: "main".into(), index });
            }
        }
    }
    for f in relax() {
        let zeroable = |b: &Binding| b.ty.is_some() && b.value != "relax.zeros";
        let at = f.bindings.iter().enumerate().filter(|(_, b)| zeroable(b));
        out.extend(at.map(|(index, _)| RelaxEdit::Zeros { func: f.name.clone(), index }));
    }
    for f in relax().filter(|f| f.name != "main") {
        out.extend((0..f.params.len()).map(|index| RelaxEdit::DropParam { func: f.name.clone(), index }));
    }
    out
}

/// A module test with its inputs (one per parameter of main, by name) and its structure.
#[derive(Clone, Debug)]
pub struct RelaxCase {
    pub test: ModuleTest,
    pub feeds: Vec<NamedTensor>,
    pub summary: Summary,
}

/// What Relax-level reduction ended with.
#[derive(Clone, Debug)]
pub struct RelaxReduced {
    pub case: RelaxCase,
    /// Top-level Relax bindings of the module before reduction.
    pub original_bindings: usize,
    pub checks: usize,
    pub accepted: usize,
    pub fixpoint: bool,
}

/// main's inputs after an edit: the feeds of parameters that stay, generated tensors for new ones.
fn feeds_for(summary: &Summary, old: &[NamedTensor]) -> Option<Vec<NamedTensor>> {
    let main = summary.function("main")?;
    let mut out = Vec::new();
    for p in &main.params {
        match old.iter().find(|f| f.name == p.name) {
            Some(f) => out.push(f.clone()),
            None => {
                let (dtype, dims) = p.ty.as_ref()?;
                let dtype = (1..=16).map(DType::from_onnx).find(|d| d.name() == *dtype)?;
                let dims: Vec<usize> = dims.iter().map(|&d| usize::try_from(d).ok()).collect::<Option<_>>()?;
                let tensor = generated(&TensorType::new(dtype, &dims))?;
                out.push(NamedTensor { name: p.name.clone(), tensor });
            }
        }
    }
    Some(out)
}

/// Reduces `case` while `check` holds; `edit` makes one edit (the runner's tool: the new script and its
/// structure, `None` when the edit does not apply or leaves an ill-formed module).
pub fn reduce(
    case: RelaxCase,
    edit: &mut dyn FnMut(&str, &RelaxEdit) -> Option<(String, Summary)>,
    check: &mut dyn FnMut(&RelaxCase) -> bool,
    limits: Limits,
) -> RelaxReduced {
    let start = Instant::now();
    let original_bindings = case.summary.bindings;
    let mut current = case;
    let mut seen: HashSet<String> = HashSet::new();
    let (mut checks, mut accepted) = (0usize, 0usize);
    // after an accepted edit the scan goes on at the same place of the new module's edits (most earlier ones
    // failed and still would); a scan that accepted anything is followed by one from the start, so the result
    // is a fixpoint all the same
    let mut from = 0;
    'rounds: loop {
        for (i, e) in candidates(&current.summary).into_iter().enumerate().skip(from) {
            if checks >= limits.max_checks || start.elapsed() >= limits.time {
                return RelaxReduced { case: current, original_bindings, checks, accepted, fixpoint: false };
            }
            let Some((script, summary)) = edit(&current.test.script, &e) else { continue };
            // progress: fewer bindings, or as many in a shorter script
            if (summary.bindings, script.len()) >= (current.summary.bindings, current.test.script.len())
                || !seen.insert(crate::util::stable_hash(&script))
            {
                continue;
            }
            let Some(feeds) = feeds_for(&summary, &current.feeds) else { continue };
            let next = RelaxCase { test: ModuleTest { script, ..current.test.clone() }, feeds, summary };
            checks += 1;
            if check(&next) {
                (current, from) = (next, i);
                accepted += 1;
                continue 'rounds;
            }
        }
        if from == 0 {
            return RelaxReduced { case: current, original_bindings, checks, accepted, fixpoint: true };
        }
        from = 0;
    }
}

/// One request to the runner's reduction tool; its JSON answer.
fn tool(r: &mut Reproducer, request: serde_json::Value) -> Option<serde_json::Value> {
    let reference = r.finding.reference.clone();
    let o = r.run(&serde_json::to_vec(&request).ok()?, &[], &reference);
    if o.status != Status::Ok {
        return None;
    }
    let out = o.outputs.into_iter().find(|t| t.name == "json")?;
    match out.tensor.data {
        crate::graph::TensorData::Raw(bytes) => serde_json::from_slice(&bytes).ok(),
        _ => None,
    }
}

/// The module test of a recipe finding's minimized case (`case.model` its seed graph), with main's inputs
/// (the seed graph's inputs, in order).
pub fn module_case(r: &mut Reproducer, case: &Case) -> Option<RelaxCase> {
    let recipe: serde_json::Value = serde_json::from_slice(&r.finding.bytes(case)).ok()?;
    let answer = tool(r, serde_json::json!({"kind": TOOL_KIND, "op": "module", "recipe": recipe}))?;
    let summary: Summary = serde_json::from_value(answer.get("summary")?.clone()).ok()?;
    let test: ModuleTest = serde_json::from_value(answer).ok()?;
    let g = &case.model.graph;
    let inputs: Vec<&String> = g.inputs.iter().filter(|i| !g.initializers.contains_key(*i)).collect();
    let main = summary.function("main")?;
    let mut feeds = Vec::new();
    for (p, name) in main.params.iter().zip(&inputs) {
        let f = case.feeds.iter().find(|f| f.name == **name)?;
        feeds.push(NamedTensor { name: p.name.clone(), tensor: f.tensor.clone() });
    }
    (feeds.len() == main.params.len()).then_some(RelaxCase { test, feeds, summary })
}

/// Whether the finding's culprits still show its symptom on a module test ([`Reproducer::check`]).
pub fn check(r: &mut Reproducer, c: &RelaxCase, culprits: &[String]) -> Option<(Outcome, Outcome)> {
    let raw = r.finding.relax.replace(super::load::RelaxTest::Module(c.test.clone()));
    let case = Case { model: r.finding.case.model.clone(), feeds: c.feeds.clone() };
    let out = r.check(&case, culprits);
    r.finding.relax = raw;
    out
}

/// Relax-level reduction of a recipe finding whose minimized seed graph still needs its pattern: `None` when
/// the module test does not show the symptom itself (the recipe then stays the minimized test).
pub fn minimize(r: &mut Reproducer, case: &Case, culprits: &[String], limits: Limits) -> Option<RelaxReduced> {
    let start = module_case(r, case)?;
    check(r, &start, culprits)?;
    let cell = std::cell::RefCell::new(&mut *r);
    let mut edit = |script: &str, e: &RelaxEdit| {
        let answer = tool(
            &mut cell.borrow_mut(),
            serde_json::json!({"kind": TOOL_KIND, "op": "apply", "script": script, "edit": e}),
        )?;
        let summary: Summary = serde_json::from_value(answer.get("summary")?.clone()).ok()?;
        Some((answer.get("script")?.as_str()?.to_string(), summary))
    };
    // an edit's runs use the module the tool made, not its script parsed again (parsing is most of an edit's
    // cost): an accepted edit's script must re-parse to that very module
    let mut accept = |c: &RelaxCase| {
        let r = &mut *cell.borrow_mut();
        check(r, c, culprits).is_some() && verified(r, &c.test.script)
    };
    Some(reduce(start, &mut edit, &mut accept, limits))
}

/// Whether an edit's `script` re-parses, well formed, to the module the tool made for it (the tool's `verify`).
fn verified(r: &mut Reproducer, script: &str) -> bool {
    let answer = tool(r, serde_json::json!({"kind": TOOL_KIND, "op": "verify", "script": script}));
    answer.and_then(|a| a.get("same")?.as_bool()).unwrap_or(false)
}

/// The class note's addition for a finding [`seed_error`] made the seed's.
pub const SEED_ERROR: &str = "; the seed graph fails there on its own, so it is filed as the seed's error";

/// A Relax-level finding whose (reduced) seed graph already fails on its own in the pass the error was raised in,
/// with another message (the pattern only changed how that failure shows, e.g. what reads ConvertLayout's broken
/// layout): the finding becomes the seed's bug, its message the seed's error, and the reference and shown runs of the
/// plain seed are returned. None (the finding untouched) otherwise.
pub fn seed_error(r: &mut Reproducer, case: &Case, culprits: &[String]) -> Option<(Outcome, Outcome)> {
    if r.finding.target != "tvm" || r.finding.relax.is_none() {
        return None;
    }
    let pass = r.raised_in()?;
    let (relax, message) = (r.finding.relax.take(), r.finding.message.clone());
    let config = if culprits.is_empty() { r.finding.config.clone() } else { r.config_enabling(culprits) };
    let seed = crate::graph::onnx::encode_model(&case.model);
    let o = r.run(&seed, &case.feeds, &config);
    if let Status::Error { message: m } = &o.status {
        if crate::compiler::tvm::raised_in(m) == Some(pass.as_str()) {
            r.finding.message = m.clone();
            if let Some(runs) = r.check(case, culprits) {
                return Some(runs);
            }
        }
    }
    (r.finding.relax, r.finding.message) = (relax, message);
    None
}

/// A bug directory's files of a module test besides `module.json`: `module.py` (its TVMScript) and its inputs as
/// `input_K.npy` (numpy's format, so that repro.py needs no onnx).
pub fn write_files(dir: &std::path::Path, red: &RelaxReduced) -> anyhow::Result<()> {
    crate::util::write_atomic(&dir.join("module.py"), red.case.test.script.as_bytes())?;
    for (k, f) in red.case.feeds.iter().enumerate() {
        let bytes = npy(&f.tensor).ok_or_else(|| anyhow::anyhow!("input {}: no numpy encoding", f.name))?;
        crate::util::write_atomic(&dir.join(format!("input_{k}.npy")), &bytes)?;
    }
    Ok(())
}

/// A tensor in numpy's `.npy` format (version 1.0), for fixed-size dtypes.
pub fn npy(t: &crate::graph::Tensor) -> Option<Vec<u8>> {
    let crate::graph::TensorData::Raw(raw) = &t.data else { return None };
    let descr = match t.dtype {
        DType::Bool => "|b1".to_string(),
        DType::U8 => "|u1".to_string(),
        DType::I8 => "|i1".to_string(),
        DType::F16 | DType::F32 | DType::F64 => format!("<f{}", t.dtype.size()?),
        DType::C64 | DType::C128 => format!("<c{}", t.dtype.size()?),
        d if d.is_int() && d.is_signed() => format!("<i{}", d.size()?),
        d if d.is_int() => format!("<u{}", d.size()?),
        _ => return None,
    };
    let dims: Vec<String> = t.dims.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // magic (6) + version (2) + length (2) + header + newline, a multiple of 64
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(raw);
    Some(out)
}

/// A module's script as a report shows it: its metadata section (the JSON of its tensor constants) elided.
pub fn shown(script: &str) -> String {
    const START: &str = "metadata = tvm.ir.load_json(\"\"\"";
    let Some(at) = script.find(START) else { return script.to_string() };
    let Some(len) = script[at + START.len()..].find("\"\"\")") else { return script.to_string() };
    let end = at + START.len() + len + 4;
    format!("{}metadata = ...  # the constants' JSON: see module.py{}", &script[..at], &script[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> Summary {
        serde_json::from_value(serde_json::json!({"bindings": 3, "functions": [
            {"name": "main", "relax": true, "called": false, "outputs": 2,
             "params": [{"name": "x", "type": ["float32", [2, 3]]}],
             "bindings": [{"var": "a", "type": ["float32", [2, 3]], "block": 0, "value": "Call"},
                          {"var": "b", "type": ["float32", [2, 3]], "block": 0, "value": "DataflowVar"}]},
            {"name": "p", "relax": true, "called": true, "outputs": 1,
             "params": [{"name": "y", "type": ["float32", [2, 3]]}],
             "bindings": [{"var": "c", "type": ["float32", [2, 3]], "block": 0, "value": "relax.zeros"}]},
            {"name": "spare", "relax": false, "called": false}
        ]}))
        .unwrap()
    }

    #[test]
    fn candidates_go_from_whole_functions_to_single_values() {
        let c = candidates(&summary());
        assert_eq!(c[0], RelaxEdit::DropFunction { func: "spare".into() }, "only what nothing calls, never main");
        assert!(!c.contains(&RelaxEdit::DropFunction { func: "p".into() }));
        assert_eq!(c[1..5].len(), 4, "keep or drop each of main's two outputs");
        assert!(c.contains(&RelaxEdit::Param { func: "main".into(), index: 0 }));
        assert!(!c.contains(&RelaxEdit::Param { func: "main".into(), index: 1 }), "an alias is no new input");
        assert!(!c.contains(&RelaxEdit::Zeros { func: "p".into(), index: 0 }), "zeros already");
        assert_eq!(c.last(), Some(&RelaxEdit::DropParam { func: "p".into(), index: 0 }));
        assert_eq!(c[5], RelaxEdit::ReturnValue { func: "main".into(), index: 0 }, "then main's values, first first");
        let json = serde_json::to_value(&c[7]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"op": "drop_binding", "func": "main", "index": 1}),
            "what the runner reads"
        );
    }

    /// A main of top-level bindings `names` (untyped: dropping one is its only edit) as a script and summary.
    fn module(names: &[String]) -> (String, Summary) {
        let bindings: Vec<_> =
            names.iter().map(|n| serde_json::json!({"var": n, "type": null, "value": "Call"})).collect();
        let s = serde_json::json!({"bindings": names.len(), "functions": [
            {"name": "main", "relax": true, "called": false, "outputs": 1, "bindings": bindings}]});
        (names.join(","), serde_json::from_value(s).unwrap())
    }

    #[test]
    fn reduction_goes_on_where_its_last_edit_was_accepted_and_ends_at_a_fixpoint() {
        // twelve bindings of which the symptom needs two near the end, the first ones the scan tries
        let names: Vec<String> = (0..12).map(|k| format!("v{k}")).collect();
        let (script, summary) = module(&names);
        let test = ModuleTest {
            kind: "m".into(),
            script,
            pass: None,
            pass_args: None,
            fault: Default::default(),
            provenance: None,
        };
        let mut edit = |script: &str, e: &RelaxEdit| {
            let RelaxEdit::DropBinding { index, .. } = e else { return None };
            let mut left: Vec<String> = script.split(',').map(String::from).collect();
            left.remove(*index);
            Some(module(&left))
        };
        let mut checks = 0;
        let mut check = |c: &RelaxCase| {
            checks += 1;
            let left: Vec<&str> = c.test.script.split(',').collect();
            left.contains(&"v9") && left.contains(&"v10")
        };
        let out = reduce(RelaxCase { test, feeds: vec![], summary }, &mut edit, &mut check, Limits::default());
        assert_eq!((out.case.test.script.as_str(), out.fixpoint, out.accepted), ("v9,v10", true, 10));
        // restarting the scan after each accepted edit tried the two kept bindings again each time (31 checks)
        assert!(checks <= 16, "{checks} checks");
    }

    #[test]
    fn feeds_follow_mains_parameters() {
        let s = summary();
        let old = vec![NamedTensor { name: "gone".into(), tensor: crate::graph::Tensor::from_f32(&[1], &[1.0]) }];
        let feeds = feeds_for(&s, &old).unwrap();
        assert_eq!(feeds.len(), 1);
        assert_eq!((feeds[0].name.as_str(), feeds[0].tensor.dims.clone()), ("x", vec![2, 3]), "a new one generated");
    }

    #[test]
    fn npy_files_have_numpys_header() {
        let t = crate::graph::Tensor::from_f32(&[2, 3], &[0.5; 6]);
        let b = npy(&t).unwrap();
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let len = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + len]).unwrap();
        assert!(
            header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") && header.ends_with('\n')
        );
        assert_eq!(b.len(), 10 + len + 24);
    }

    #[test]
    fn the_report_elides_the_constants_json() {
        let s = "class M:\n    pass\n\nmetadata = tvm.ir.load_json(\"\"\"{\n  \"nodes\": []\n}\"\"\")\n";
        let shown = shown(s);
        assert!(shown.starts_with("class M:") && !shown.contains("nodes") && shown.contains("module.py"), "{shown}");
    }
}
