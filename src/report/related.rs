//! One bug, several culprit sets. The 1-minimal culprit set of one optimizer bug depends on the graph: a
//! fusion that leaves stale graph edges behind (ORT's GemmTransposeFusion rebuilds a Gemm with only the first
//! removed node's input edges) fails with EliminateIdentity in one test and with MatMulAddFusion and
//! CastElimination in another, each time with "Node input ... is not a graph input". A new optimizer entry is
//! *related* to an existing one when both fail the same way (same target; errors of the same error kind, or
//! crashes of the same signal) and their key passes meet; wrong results and hangs carry no second key, so they
//! are never merged across culprit sets. Key passes are the faulty passes without the rewiring ones ([`REWIRING`]:
//! passes that only change which value a consumer reads or share equal values; they expose another pass's
//! broken graph rather than break it), or every faulty pass when only rewiring ones are left; one pass's levels
//! are one pass (LayerNormFusionL1 and L2 are one class of ORT registered twice). A related finding is filed into
//! the existing entry, whose bug.json lists every culprit set seen (`culprit_sets`).
//!
//! Across symptoms and failure kinds (a review found MatMul_BatchNormalization_Fusion's error and wrong result, or the
//! int32 QuantizeLinear of #25001 with and without a zero point, filed twice), two entries whose key passes meet are
//! one bug when both match one upstream report, or when their minimized models hold the same ops ([`Evidence`]) and not
//! both compute wrong values (two causes of one fusion's wrong result minimize alike; an error and a crash are one kind
//! here), an error beside a wrong value only when the error lost a value (a kernel refusing the fused node is another
//! cause). A node reading a removed value and an output nobody produces any more are one failure when the value's
//! producer in the minimized models is of one op type (EmbedLayerNormFusion removing the embedding-sum Add that a node,
//! or the graph, still reads), else two kinds: as one, GemmTransposeFusion's lost input edge (an Identity's output)
//! joined its skipped graph-output check (the Gemm's own output), two bugs.
//!
//! A wrong shape is one failure whether it comes out as a result or as a control-flow body's output refusing the
//! shape its kernel computed (Scan allocates its body's outputs): GatherToSliceFusion's empty Slice of a negative
//! Range, filed twice.
//!
//! A minimized Relax module's evidence is the ops its bindings call (module.py): TVM's errors carry only the
//! innermost C++ frame, so one broken value fails with another message in every op that reads it (ConvertLayout's
//! layout of `R.stack` in a sum, a reshape, a relu). Two errors of one pass whose modules differ only in main's
//! last binding (the reader) and share at least one other op are one bug. So are two failures of one pass on values
//! the minimized models both return and read (an intermediate the pass consumed, lost or wrong: the graph-output
//! check it skips is one). So are two failures each shown only with an enabler beside one pass that leaves a stale
//! edge (`STALE_EDGES`): the edge it did not move is one bug, whatever the pass following it breaks.

pub use super::evidence::Evidence;
use super::record::BugRecord;
use crate::finding::signature::{error_kind, pass_class};
use crate::oracle::Symptom;
use crate::triage::classify::Class;
use crate::triage::Triaged;
use std::path::Path;

pub use crate::triage::enablers::REWIRING;

/// The passes that identify `t`'s bug: its faulty passes without the rewiring ones, or all of them when only
/// rewiring ones are left.
pub fn key_passes(t: &Triaged) -> Vec<String> {
    let all = t.faulty();
    let key: Vec<String> = all.iter().filter(|p| !REWIRING.contains(&p.as_str())).cloned().collect();
    if key.is_empty() {
        all
    } else {
        key
    }
}

/// Whether the entry `rec` and the new triage `t` (of `target`) are optimizer bugs whose key passes meet: the
/// first key of [`related`], cheap (no file read).
fn passes_meet(rec: &BugRecord, target: &str, t: &Triaged) -> bool {
    let e = &rec.triage;
    if t.class != Class::Optimizer || e.class != Class::Optimizer || rec.target != target {
        return false;
    }
    if e.culprits.is_empty() || t.culprits.is_empty() {
        return false;
    }
    let theirs = key_passes(e);
    let key: Vec<&str> = theirs.iter().map(|p| pass_class(p)).collect();
    key_passes(t).iter().any(|p| key.contains(&pass_class(p)))
}

/// Whether the entry `rec` and the new triage `t` (of `target`, `symptom`) are one optimizer bug; `theirs` and
/// `ours` are the entries' [`Evidence`].
pub fn related(
    rec: &BugRecord,
    target: &str,
    symptom: Symptom,
    t: &Triaged,
    theirs: &Evidence,
    ours: &Evidence,
) -> bool {
    let e = &rec.triage;
    if !passes_meet(rec, target, t) {
        return false;
    }
    // the second key: how it fails. Wrong values carry none (two wrong-result bugs sharing a pass are not
    // known to be one), hangs only their culprits
    let same_failure = rec.symptom == symptom
        && match symptom {
            Symptom::Error => error_kind(&e.detail) == error_kind(&t.detail),
            Symptom::Crash => crate::triage::crash_kind(&e.detail) == crate::triage::crash_kind(&t.detail),
            Symptom::Inconsistency | Symptom::Hang => false,
        };
    // across symptoms: one upstream report, or the same minimized ops; across the two ways of losing a value
    // (a node still reads it, an output still names it): the same removed producer
    let one_report = ours.known.is_some() && ours.known == theirs.known;
    // equal ops tie failures of one kind, but never two wrong values (any cause of a fusion's wrong result minimizes
    // to the fused pattern: LayerNormFusion's unchecked Pow exponent and its broadcast scale), and an error to a
    // wrong value only when it lost a value (a returned intermediate the fusion consumed, missing or garbage; a
    // kernel refusing the fused node is another cause)
    let failure = |s: Symptom| matches!(s, Symptom::Error | Symptom::Crash);
    let ops_tie = match (rec.symptom, symptom) {
        (Symptom::Inconsistency, Symptom::Inconsistency) => false,
        // ORT's messages name the check that failed: two kinds of error on the same ops are two bugs
        // (QDQS8ToU8Transformer's initializer-name clash and its kept output_dtype, #25526); TVM's carry only the
        // innermost frame, which changes with the reader
        (Symptom::Error, Symptom::Error) => target == "tvm",
        (a, b) if a == b => true,
        // an error and a crash on the same ops: one memory fault (ConvertLayout's negative squeeze axes, bad_alloc
        // or SIGSEGV)
        (a, b) if failure(a) && failure(b) => true,
        _ => ours.lost.is_some() || theirs.lost.is_some(),
    };
    let same_ops = ops_tie && ours.ops.is_some() && ours.ops == theirs.ops;
    let same_lost = ours.lost.is_some() && ours.lost == theirs.lost;
    // two errors of one Relax pass whose minimized modules differ only in the reader where the error surfaced:
    // one broken value read by different ops (ConvertLayout's layout of R.stack fails as "can't find S" in a
    // sum, "Index -1 out of bounds" in a reshape or relu); at least one op besides the reader; or one module is the
    // other's without its reader (the stack failing alone, or crashing alone on scalars, and read by a sum)
    let before = |e: &Evidence| e.before_reader().filter(|o| !o.is_empty());
    let alone = |a: &Evidence, b: &Evidence| before(b).is_some_and(|o| a.ops.as_ref() == Some(&o));
    let errors = rec.symptom == Symptom::Error && symptom == Symptom::Error;
    let one_value = (errors && before(ours).is_some_and(|o| Some(&o) == theirs.before_reader().as_ref()))
        || (failure(rec.symptom) && failure(symptom) && (alone(ours, theirs) || alone(theirs, ours)));
    // one pass failing on returned intermediates, lost or wrong (MatMul_BatchNormalization_Fusion folding a
    // returned Transpose away, and batch-normalizing a returned Reshape): the check it skips is one
    let both_returned = ours.returned && theirs.returned;
    // one pass leaving a stale edge that another pass then follows, whatever that other pass breaks (DivMulFusion's
    // unmoved edge: CastElimination deleting a Cast the Div still reads, an error; MatMul_BatchNormalization_Fusion
    // folding into a value the Div still reads, a wrong result): the missing edge is one bug
    let stale = |t: &Triaged| -> Vec<String> {
        let on_stale_edge = |p: &String| crate::triage::enablers::STALE_EDGES.contains(&p.as_str());
        if t.enablers.is_empty() {
            Vec::new()
        } else {
            t.faulty().into_iter().filter(on_stale_edge).collect()
        }
    };
    let (theirs_stale, ours_stale) = (stale(e), stale(t));
    let one_stale_edge = theirs_stale.iter().any(|p| ours_stale.contains(p));
    // a wrong shape, once as a result and once as a control-flow body's output refusing the shape its kernel
    // computed (Scan allocates its body's outputs; GatherToSliceFusion's empty Slice of a negative Range, both ways)
    let one_shape = |a: (Symptom, &str), b: (Symptom, &str)| {
        a.0 == Symptom::Error && a.1.contains(SHAPE_REFUSED) && b.0 == Symptom::Inconsistency && wrong_shape(b.1)
    };
    let one_wrong_shape = one_shape((rec.symptom, &e.detail), (symptom, &t.detail))
        || one_shape((symptom, &t.detail), (rec.symptom, &e.detail));
    same_failure
        || one_report
        || same_ops
        || same_lost
        || one_value
        || both_returned
        || one_stale_edge
        || one_wrong_shape
}

/// ONNX Runtime's error when a kernel computes another shape than the output allocated for it holds.
const SHAPE_REFUSED: &str = "but the computed output shape for this run is";

/// Whether an inconsistency's detail is an output of the reference's dtype and another shape (the oracle's
/// "output 'y' is float32[0, 8], reference has float32[8, 8]").
fn wrong_shape(detail: &str) -> bool {
    let Some((ours, theirs)) = detail.split_once(", reference has ") else { return false };
    let Some((_, ours)) = ours.rsplit_once(" is ") else { return false };
    let dtype = |s: &str| s.split('[').next().map(str::to_string);
    dtype(ours).is_some() && dtype(ours) == dtype(theirs) && ours.contains('[')
}

/// The signature of an entry in `folder` related to `t`, when there is one (the one with the most findings).
pub fn find(folder: &Path, target: &str, symptom: Symptom, t: &Triaged, ours: &Evidence) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for entry in std::fs::read_dir(folder).ok()?.filter_map(|e| e.ok()) {
        let Some(rec) = read(&entry.path()) else { continue };
        let sig = entry.file_name().to_string_lossy().to_string();
        // an entry's model is read only when the passes meet
        if sig != t.signature
            && passes_meet(&rec, target, t)
            && related(&rec, target, symptom, t, &Evidence::of_entry(&entry.path(), &rec), ours)
            && best.as_ref().is_none_or(|(n, _)| rec.findings.len() > *n)
        {
            best = Some((rec.findings.len(), sig));
        }
    }
    best.map(|(_, sig)| sig)
}

/// Records `t`'s faulty passes in the culprit sets of the entry in `dir` (written only when new).
pub fn note_culprits(dir: &Path, t: &Triaged) -> anyhow::Result<()> {
    let mut rec = super::record::read(dir)?;
    let mut set = t.faulty();
    set.sort();
    let mut representative = rec.triage.faulty();
    representative.sort();
    let mut changed = false;
    for s in [representative, set] {
        if !s.is_empty() && !rec.culprit_sets.contains(&s) {
            rec.culprit_sets.push(s);
            changed = true;
        }
    }
    if changed {
        crate::finding::record::write(dir, &rec)?;
    }
    Ok(())
}

fn read(dir: &Path) -> Option<BugRecord> {
    super::record::read(dir).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triaged(culprits: &[&str], enablers: &[&str], detail: &str) -> Triaged {
        Triaged {
            culprits: culprits.iter().map(|s| s.to_string()).collect(),
            enablers: enablers.iter().map(|s| s.to_string()).collect(),
            detail: detail.into(),
            ..Triaged::default()
        }
    }

    fn record(t: Triaged) -> BugRecord {
        BugRecord {
            target: "ort".into(),
            target_version: "1".into(),
            symptom: Symptom::Error,
            triage: t,
            representative: String::new(),
            findings: vec![],
            culprit_sets: vec![],
            upstream: Default::default(),
        }
    }

    const NONE: Evidence = Evidence { known: None, ops: None, lost: None, reader: None, returned: false };

    const MISSING: &str =
        "Invalid model. Node input 'a_1' is not a graph input, initializer, or output of a previous node.";

    #[test]
    fn entries_meet_on_a_pass_that_is_not_only_rewiring() {
        let gemm = record(triaged(&["GemmTransposeFusion", "EliminateIdentity"], &[], MISSING));
        let with_matmul = triaged(&["MatMulAddFusion", "CastElimination", "GemmTransposeFusion"], &[], MISSING);
        assert!(related(&gemm, "ort", Symptom::Error, &with_matmul, &NONE, &NONE));
        // sharing only a rewiring pass is no evidence of one bug
        let other = triaged(&["MatMul_BatchNormalization_Fusion", "EliminateIdentity"], &[], MISSING);
        assert!(!related(&gemm, "ort", Symptom::Error, &other, &NONE, &NONE));
        // another kind of error, another symptom or target: another bug
        let typed = triaged(&["GemmTransposeFusion"], &[], "Type Error: Type (tensor(float16)) of input");
        assert!(!related(&gemm, "ort", Symptom::Error, &typed, &NONE, &NONE));
        assert!(!related(&gemm, "ort", Symptom::Crash, &with_matmul, &NONE, &NONE));
        let mut wrong = record(triaged(&["GemmTransposeFusion", "EliminateIdentity"], &[], "output 'y'[0]"));
        wrong.symptom = Symptom::Inconsistency;
        assert!(!related(
            &wrong,
            "ort",
            Symptom::Inconsistency,
            &triaged(&["GemmTransposeFusion"], &[], "output"),
            &NONE,
            &NONE
        ));
        assert!(!related(&gemm, "tvm", Symptom::Error, &with_matmul, &NONE, &NONE));
        // an enabler is not part of the key
        let enabled =
            triaged(&["QDQSelectorActionTransformer", "GemmTransposeFusion"], &["GemmTransposeFusion"], MISSING);
        assert!(!related(&gemm, "ort", Symptom::Error, &enabled, &NONE, &NONE));
        // only rewiring passes: they are the key
        let only = record(triaged(&["ConstantSharing", "CommonSubexpressionElimination"], &[], MISSING));
        assert!(related(&only, "ort", Symptom::Error, &triaged(&["ConstantSharing"], &[], MISSING), &NONE, &NONE));
        // not optimizer bugs: never merged across culprit sets
        let mut reference = with_matmul.clone();
        reference.class = Class::Reference;
        assert!(!related(&gemm, "ort", Symptom::Error, &reference, &NONE, &NONE));
    }

    /// A review of a 30-minute campaign found GatherToSliceFusion's empty Slice of a negative Range filed twice: a
    /// wrong shape, and a Scan refusing its body's output of that shape.
    #[test]
    fn a_wrong_shape_and_a_body_output_refusing_it_are_one_entry() {
        let refused = "Non-zero status code returned while running Scan node. ... The output OrtValue provided for \
            output 'g' of node 'Slice' (Slice) has shape {8,8,8,8} but the computed output shape for this run is {8,8,0,8}.";
        let error = record(triaged(&["GatherToSliceFusion"], &[], refused));
        let shape = "output 'y' is float32[0, 8, 8, 8], reference has float32[8, 8, 8, 8]";
        let wrong = triaged(&["GatherToSliceFusion"], &[], shape);
        assert!(related(&error, "ort", Symptom::Inconsistency, &wrong, &NONE, &NONE));
        let mut back = record(wrong.clone());
        back.symptom = Symptom::Inconsistency;
        assert!(related(&back, "ort", Symptom::Error, &triaged(&["GatherToSliceFusion"], &[], refused), &NONE, &NONE));
        // wrong values of the right shape, another dtype, or another pass: not this evidence
        let values = triaged(&["GatherToSliceFusion"], &[], "output 'y'[3]: expected 1, got 2");
        assert!(!related(&error, "ort", Symptom::Inconsistency, &values, &NONE, &NONE));
        let dtype = triaged(&["GatherToSliceFusion"], &[], "output 'y' is int64[8], reference has float32[8]");
        assert!(!related(&error, "ort", Symptom::Inconsistency, &dtype, &NONE, &NONE));
        assert!(!related(
            &error,
            "ort",
            Symptom::Inconsistency,
            &triaged(&["ConstantFolding"], &[], shape),
            &NONE,
            &NONE
        ));
    }

    /// The review of a 30-minute campaign found one root cause filed twice: MatMul_BatchNormalization_Fusion's
    /// error (a returned Transpose output removed) and wrong result (a returned Reshape output batch-normalized),
    /// both minimized to MatMul, Reshape, Transpose, BatchNormalization; #25001 with and without a zero point;
    /// LayerNormFusion at levels 1 and 2; but not GemmTransposeFusion's two ways of losing a value.
    #[test]
    fn one_root_cause_across_symptoms_reports_and_levels_is_one_entry() {
        let ops = |v: &[&str]| Evidence { ops: Some(v.iter().map(|s| s.to_string()).collect()), ..NONE };
        let bn = ["BatchNormalization", "MatMul", "Reshape", "Transpose"];
        let error = record(triaged(&["MatMul_BatchNormalization_Fusion"], &[], "output 't' came back without a value"));
        let wrong = triaged(&["MatMul_BatchNormalization_Fusion"], &[], "output 'r'[3]: expected 3.3, got 16.5");
        let lost = Evidence { lost: Some("Transpose".into()), ..ops(&bn) };
        assert!(related(&error, "ort", Symptom::Inconsistency, &wrong, &lost, &ops(&bn)));
        // a kernel refusing the fused node and a wrong fused result in the same ops: two causes (LayerNormFusion's
        // broadcast scale and its unchecked Pow exponent)
        assert!(!related(&error, "ort", Symptom::Inconsistency, &wrong, &ops(&bn), &ops(&bn)));
        // other ops, no shared report: not known to be one bug
        assert!(!related(&error, "ort", Symptom::Inconsistency, &wrong, &ops(&bn), &ops(&bn[1..])));
        assert!(!related(&error, "ort", Symptom::Inconsistency, &wrong, &NONE, &NONE));
        // one upstream report, two messages
        let link = |l: &str| Evidence { known: Some(l.into()), ..NONE };
        let zp = record(triaged(&["QDQPropagationTransformer"], &[], "Type 'tensor(int32)' of input parameter"));
        let no_zp = triaged(&["QDQPropagationTransformer"], &[], "Could not find an implementation for QuantizeLinear");
        assert!(related(&zp, "ort", Symptom::Error, &no_zp, &link("u/25001"), &link("u/25001")));
        assert!(!related(&zp, "ort", Symptom::Error, &no_zp, &link("u/25001"), &link("u/25526")));
        // two kinds of error of one ORT pass on the same ops: two bugs (QDQS8ToU8Transformer's initializer-name
        // clash and its kept output_dtype, seed 277)
        let clash = triaged(&["QDQS8ToU8Transformer"], &[], "graph.cc:4164 AddInitializedOrtValue Attempt to replace");
        let kept = record(triaged(&["QDQS8ToU8Transformer"], &[], "[TypeInferenceError] output_dtype INT8 does not"));
        let qdq = ["DequantizeLinear", "QuantizeLinear", "Relu"];
        assert!(!related(&kept, "ort", Symptom::Error, &clash, &ops(&qdq), &ops(&qdq)));
        // two wrong values of one pass minimized to the same ops (LayerNormFusion's unchecked Pow exponent and its
        // broadcast scale, both the 9-op layer normalization): not known to be one bug
        let mut wrong_too = error.clone();
        wrong_too.symptom = Symptom::Inconsistency;
        assert!(!related(&wrong_too, "ort", Symptom::Inconsistency, &wrong, &ops(&bn), &ops(&bn)));
        // another pass never joins, whatever the evidence
        let other = triaged(&["DivMulFusion"], &[], "output 'r'[3]: expected 3.3, got 16.5");
        assert!(!related(&error, "ort", Symptom::Inconsistency, &other, &ops(&bn), &ops(&bn)));
        // one pass at two levels, one failure kind
        let l1 = record(triaged(&["LayerNormFusionL1"], &[], "Type Error: Type (tensor(float16)) of input"));
        let l2 = triaged(&["LayerNormFusionL2"], &[], "Type Error: Type (tensor(bool)) of input");
        assert!(related(&l1, "ort", Symptom::Error, &l2, &NONE, &NONE));
        // a removed value read by a node, or returned: two failure kinds (two GemmTransposeFusion bugs)
        let returned = record(triaged(&["GemmTransposeFusion"], &[], "output 'a' came back without a value"));
        let read = triaged(&["GemmTransposeFusion"], &[], MISSING);
        assert!(!related(&returned, "ort", Symptom::Error, &read, &NONE, &NONE));
        // ... unless the lost value's producer is of one op type in both minimized models (EmbedLayerNormFusion's
        // embedding-sum Add, read by a Cast in one model and returned in the other)
        let lost = |op: &str| Evidence { lost: Some(op.into()), ..NONE };
        assert!(related(&returned, "ort", Symptom::Error, &read, &lost("Add"), &lost("Add")));
        assert!(!related(&returned, "ort", Symptom::Error, &read, &lost("Gemm"), &lost("Identity")));
        // one pass's stale edge followed by another pass, an error with one and a wrong value with the other
        // (DivMulFusion beside CastElimination, and beside MatMul_BatchNormalization_Fusion): one bug; its
        // integer rewrite shown alone (no enabler) is another
        let cast = record(triaged(&["CastElimination", "DivMulFusion"], &["CastElimination"], MISSING));
        let bn =
            triaged(&["DivMulFusion", "MatMul_BatchNormalization_Fusion"], &["MatMul_BatchNormalization_Fusion"], "o");
        assert!(related(&cast, "ort", Symptom::Inconsistency, &bn, &NONE, &NONE));
        let alone = triaged(&["DivMulFusion"], &[], "output 'r'[3]: expected 0, got 1");
        assert!(!related(&cast, "ort", Symptom::Inconsistency, &alone, &NONE, &NONE));
        // a wrong result whose optimized graph reads a value nothing defines lost that value (its note names it)
        let g = {
            use crate::graph::{DType, Graph, Node, OpId, TensorType};
            let mut g = Graph::new("g");
            g.add_input("x", TensorType::new(DType::F32, &[1]));
            g.add_node(Node::new("a", OpId::onnx("Add"), vec!["x".into(), "x".into()], vec!["sum".into()])).unwrap();
            g.add_output("sum", TensorType::new(DType::F32, &[1]));
            crate::graph::Model::new(g)
        };
        let note =
            format!("{} ('sum' is returned): the output holds whatever", crate::finding::signature::NOTHING_DEFINES);
        let e = Evidence::of(Some(&g), "output 'sum'[0]: expected 2, got 7", &note, None);
        assert_eq!(e.lost.as_deref(), Some("Add"));
    }

    /// A review of TVM campaigns found ExpandMatmulOfSum's missing shape check filed twice, for a broadcast and for
    /// a scalar bias, with two messages: one pass, one minimized module's ops.
    #[test]
    fn two_errors_of_one_relax_pass_on_the_same_ops_are_one_entry() {
        const MODULE: &str = r#"@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32")):
        with R.dataflow():
            s: R.Tensor((3, 4), dtype="float32") = R.add(R.const(1, "float32"), BIAS)
            y = R.matmul(x, s)
            z = R.nn.relu(y)
            R.output(z)
        return z
"#;
        let module = |bias: &str| MODULE.replace("BIAS", bias);
        let (scalar, broadcast) = (module("R.const(2, \"float32\")"), module("w"));
        assert_eq!(super::super::evidence::relax_ops(&scalar), ["add", "matmul", "nn.relu"]);
        let mut entry = record(triaged(&["ExpandMatmulOfSum"], &[], "Check failed: (lhs_shape.size() >= 2) is false"));
        entry.target = "tvm".into();
        let other = triaged(&["ExpandMatmulOfSum"], &[], "InternalError: Index -1 out of bounds");
        let (a, b) = (Evidence::of_module(&scalar, None), Evidence::of_module(&broadcast, None));
        assert!(related(&entry, "tvm", Symptom::Error, &other, &a, &b));
        // another reader of the same values (ConvertLayout's stack layout read by a sum, a reshape): one bug
        let c = Evidence::of_module(&broadcast.replace("R.nn.relu", "R.sum"), None);
        assert_eq!(c.reader.as_deref(), Some("sum"));
        assert!(related(&entry, "tvm", Symptom::Error, &other, &a, &c));
        // ... but not where the values differ too, nor a wrong result
        let d = Evidence::of_module(&broadcast.replace("R.nn.relu", "R.sum").replace("R.add", "R.subtract"), None);
        assert!(!related(&entry, "tvm", Symptom::Error, &other, &a, &d));
        let mut wrong = entry.clone();
        wrong.symptom = Symptom::Inconsistency;
        assert!(!related(&wrong, "tvm", Symptom::Error, &other, &a, &c));
        // the stack and its reader alone (ConvertLayout needs no conv2d to fail on it); the reader alone is no evidence
        let short = |ops: &[&str]| {
            let body: String = ops.iter().map(|op| format!("        a = {op}(a)\n")).collect();
            Evidence::of_module(&format!("    def main(a):\n{body}"), None)
        };
        let (max, reshape) = (short(&["R.stack", "R.max"]), short(&["R.stack", "R.reshape"]));
        assert!(related(&entry, "tvm", Symptom::Error, &other, &max, &reshape));
        assert!(!related(&entry, "tvm", Symptom::Error, &other, &short(&["R.max"]), &short(&["R.reshape"])));
        // the stack failing alone, and read by a sum (a review of seed 5 found them filed twice)
        assert!(related(&entry, "tvm", Symptom::Error, &other, &short(&["R.stack"]), &max));
        assert!(related(&entry, "tvm", Symptom::Error, &other, &max, &short(&["R.stack"])));
        assert!(!related(&entry, "tvm", Symptom::Error, &other, &short(&["R.squeeze"]), &max));
        // ... crashing alone (a stack of scalars: SIGFPE), and read by a max
        let mut fpe = entry.clone();
        fpe.symptom = Symptom::Crash;
        assert!(related(&fpe, "tvm", Symptom::Error, &other, &max, &short(&["R.stack"])));
        // an error and a crash on the same ops (a squeeze of negative axes: bad_alloc, SIGSEGV)
        let squeeze = short(&["R.squeeze"]);
        let mut crashed = entry.clone();
        crashed.symptom = Symptom::Crash;
        assert!(related(&crashed, "tvm", Symptom::Error, &other, &squeeze, &squeeze));
    }

    /// A review found MatMul_BatchNormalization_Fusion filed twice: a returned Transpose output lost (an error) and
    /// a returned Reshape output batch-normalized (a wrong result), minimized to other ops. Both fail on a value the
    /// model returns and reads: one skipped check, one entry. A lost value nobody else reads is not such evidence.
    #[test]
    fn one_pass_failing_on_returned_intermediates_is_one_entry() {
        use crate::graph::{DType, Graph, Model, Node, OpId, TensorType};
        let mut g = Graph::new("g");
        g.add_input("x", TensorType::new(DType::F32, &[2]));
        g.add_node(Node::new("t", OpId::onnx("Transpose"), vec!["x".into()], vec!["t".into()])).unwrap();
        g.add_node(Node::new("r", OpId::onnx("Relu"), vec!["t".into()], vec!["r".into()])).unwrap();
        g.add_output("t", TensorType::new(DType::F32, &[2]));
        g.add_output("r", TensorType::new(DType::F32, &[2]));
        let m = Model::new(g);
        let lost = "the session was created, but output 't' came back without a value or type information";
        let (error, wrong) =
            (Evidence::of(Some(&m), lost, "", None), Evidence::of(Some(&m), "output 't'[1]: expected 1", "", None));
        assert!(error.returned && wrong.returned);
        assert!(!Evidence::of(Some(&m), "output 'r'[1]: expected 1, got 2", "", None).returned, "a sink");
        let e = record(triaged(&["MatMul_BatchNormalization_Fusion"], &["ConstantSharing"], lost));
        let t = triaged(&["MatMul_BatchNormalization_Fusion"], &[], "output 'p_reshape_output0'[3]: expected 3.8");
        assert!(related(&e, "ort", Symptom::Inconsistency, &t, &error, &wrong));
        assert!(!related(&e, "ort", Symptom::Inconsistency, &t, &error, &NONE));
        // the same inside an If branch: the If returns the branch's Transpose output, which the branch reads too
        let mut outer = Graph::new("o");
        outer.add_input("c", TensorType::new(DType::Bool, &[]));
        let branch = crate::graph::Attr::Graph(Box::new(m.graph.clone()));
        let node = Node::new("if", OpId::onnx("If"), vec!["c".into()], vec!["yt".into(), "yr".into()])
            .with_attr("then_branch", branch.clone())
            .with_attr("else_branch", branch);
        outer.add_node(node).unwrap();
        outer.add_output("yt", TensorType::new(DType::F32, &[2]));
        outer.add_output("yr", TensorType::new(DType::F32, &[2]));
        let o = Model::new(outer);
        let lost_in_if = "the session was created, but output 'yt' came back without a value or type information";
        assert!(Evidence::of(Some(&o), lost_in_if, "", None).returned);
        assert!(!Evidence::of(Some(&o), "output 'yr'[1]: expected 1, got 2", "", None).returned, "a sink");
    }

    #[test]
    fn a_lost_values_producer_is_found_in_bodies_too() {
        use crate::graph::{DType, Graph, Model, Node, OpId, TensorType};
        let mut body = Graph::new("body");
        body.add_input("x", TensorType::new(DType::F32, &[1]));
        body.add_node(Node::new("a", OpId::onnx("Add"), vec!["x".into(), "x".into()], vec!["sum".into()])).unwrap();
        body.add_output("sum", TensorType::new(DType::F32, &[1]));
        let g = crate::ops::testutil::if_of(body);
        let m = Model::new(g);
        let e = Evidence::of(
            Some(&m),
            "Invalid model. Node input 'sum' is not a graph input, initializer, or output of a previous node",
            "",
            None,
        );
        assert_eq!(e.lost.as_deref(), Some("Add"));
        assert_eq!(
            Evidence::of(
                Some(&m),
                "Node input 'o' is not a graph input, initializer, or output of a previous node",
                "",
                None
            )
            .lost
            .as_deref(),
            Some("Add"),
            "an If output lost with the node that computes it in a branch"
        );
    }
}
