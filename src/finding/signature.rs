//! Signatures: a message normalized (numbers, addresses, quoted and node names removed), the verdict a finding
//! is filed under, the coarse signature (before triage) and the bug signature (after triage: culprits).

use crate::oracle::{Judgement, Symptom, Verdict};

/// The verdict a finding is filed under: crash, then hang, then error, then inconsistency.
pub fn primary(j: &Judgement) -> Option<&Verdict> {
    let rank = |s: Symptom| match s {
        Symptom::Crash => 0,
        Symptom::Hang => 1,
        Symptom::Error => 2,
        Symptom::Inconsistency => 3,
    };
    j.verdicts.iter().min_by_key(|v| rank(v.symptom))
}

/// A message with the parts that vary between occurrences of one bug removed: numbers, hex addresses, quoted
/// names, and the free text after a TVM check's condition (see [`check_condition`]).
pub fn normalize(msg: &str) -> String {
    if let Some(family) = family(innermost(msg)) {
        return format!("ONNX Runtime: {family}");
    }
    let msg = general_part(check_condition(innermost(msg)));
    let mut out = String::with_capacity(msg.len());
    let mut chars = msg.chars().peekable();
    let mut in_quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if let Some(q) = in_quote {
            if c == q {
                in_quote = None;
                out.push(q);
            }
            continue;
        }
        match c {
            '\'' | '"' => {
                in_quote = Some(c);
                out.push(c);
                out.push('*');
            }
            // a parenthesized identifier with digits or underscores is a node or value name: `Node (conv_12)`
            '(' => {
                let rest: String = chars.clone().take_while(|&c| c != ')' && c != '(' && !c.is_whitespace()).collect();
                let closed = chars.clone().nth(rest.chars().count()) == Some(')');
                if closed && !rest.is_empty() && rest.chars().any(|c| c.is_ascii_digit() || c == '_') {
                    for _ in 0..=rest.chars().count() {
                        chars.next();
                    }
                    out.push_str("(*)");
                } else {
                    out.push('(');
                }
            }
            '0' if chars.peek() == Some(&'x') => {
                chars.next();
                while chars.peek().is_some_and(|d| d.is_ascii_hexdigit()) {
                    chars.next();
                }
                out.push('#');
            }
            '-' if chars.peek().is_some_and(|d| d.is_ascii_digit()) => {}
            d if d.is_ascii_digit() => {
                while chars.peek().is_some_and(|d| d.is_ascii_digit() || *d == '.' || *d == 'e' || *d == '-') {
                    chars.next();
                }
                out.push('#');
            }
            _ => out.push(c),
        }
    }
    out
}

/// ONNX Runtime's ways of saying one thing, which depend on where the broken value sits: a node reads a value
/// that nothing defines any more (at session creation, while inlining an If branch, at run time inside a Loop or
/// Scan body), or an output, of the graph or of a body, that nothing produces any more (the first is oatest's
/// own message for a graph output). A pass that removes a producer it should have kept shows whichever fits the
/// graph (the 1-hour run of 2026-11-26 filed DivMulFusion, FastGeluFusion, EmbedLayerNormFusion, Pad_Fusion and
/// GemmTransposeFusion twice or three times each): each family normalizes to one message.
const FAMILIES: &[(&str, &[&str])] = &[
    (
        "a node reads a value that nothing defines",
        &[
            "is not a graph input, initializer, or output of a previous node",
            "is not If node's input or previous node output in this subgraph",
            "Missing Input: ",
        ],
    ),
    (
        "an output that nothing produces",
        &[
            "came back without a value or type information",
            "IsTensor() was false. All scan outputs MUST be tensors",
            "IsTensor() was false. Trying to get a Tensor, but got: (null)",
        ],
    ),
    // a QDQ selector fusing Q/DQ pairs whose scale or zero point is per-axis or a 1-element vector into a QLinear
    // node that takes a scalar only: its type inference or its kernel refuses it (QLinearAveragePool, and the
    // lookup table of QLinearLeakyRelu and QLinearSigmoid; a review found one missing check filed twice)
    (
        "a quantized node given a scale or zero point that is not a scalar",
        &["Scale and Zero-point must be a scalar", "must be a scalar or 1D tensor of size 1"],
    ),
    // a rewrite that leaves a node with element types no kernel takes, reported by whichever op holds them (the
    // ONNX QLinearConv, or the com.microsoft one NhwcTransformer made of it), or, for a type its schema refuses, by
    // the type check (LayerNormFusion absorbing a leading Cast of int64 or float64 input: one unchecked Cast; of
    // float input to a float64 scale: types that disagree)
    (
        "a node whose element types no kernel implements",
        &[
            "Failed to find kernel for ",
            "Type Error: Type 'tensor(",
            "Type Error: Type (tensor(",
            ") bound to different types (",
        ],
    ),
];

/// A pass by its class: ORT registers some at two levels (LayerNormFusionL1/L2, GeluFusionL1/L2) and runs the
/// transpose optimizer twice (`TransposeOptimizer_CPUExecutionProvider`).
pub fn pass_class(p: &str) -> &str {
    let p = p.strip_suffix("_CPUExecutionProvider").unwrap_or(p);
    p.strip_suffix("L1").or_else(|| p.strip_suffix("L2")).unwrap_or(p)
}

/// How triage says that an optimized graph ORT saved reads a value nothing defines (a wrong result: the value is
/// whatever its buffer held), followed by the value's name in quotes: the third way of losing a value.
pub const NOTHING_DEFINES: &str = "the optimized graph reads a value nothing defines";

/// The value a "lost value" error names (a node's input nothing defines, an output nothing produces: the first two
/// [`FAMILIES`]; or triage's [`NOTHING_DEFINES`] note of a wrong result), when the message names one.
pub fn lost_value(msg: &str) -> Option<&str> {
    let inner = innermost(msg);
    let lost = FAMILIES[..2].iter().any(|(_, forms)| forms.iter().any(|f| inner.contains(f)));
    if !lost && !inner.contains(NOTHING_DEFINES) {
        return None;
    }
    if let Some(rest) = inner.split("Missing Input: ").nth(1) {
        return rest.split_whitespace().next();
    }
    // triage's note names the value after what reads it: "node 'n' reads 'v'", or "'v' is returned"
    let inner = inner.split(NOTHING_DEFINES).nth(1).unwrap_or(inner);
    let inner = inner.split(" reads ").nth(1).unwrap_or(inner);
    inner.split('\'').nth(1).filter(|v| !v.is_empty())
}

fn family(msg: &str) -> Option<&'static str> {
    FAMILIES.iter().find(|(_, forms)| forms.iter().any(|f| msg.contains(f))).map(|(name, _)| *name)
}

/// An ONNX Runtime error raised inside a control-flow body, without the wrappers of the If, Loop and Scan nodes
/// around it (`Non-zero status code returned while running Scan node. Name:'n2_Scan' Status Message: <the
/// error of the node inside>`, or at session creation `Node (n8_Loop) Op (Loop) [TypeInferenceError] Graph
/// attribute inferencing failed: <the body's error>`): one bug inside a body and at the top level, or in two
/// bodies, is one signature.
fn innermost(msg: &str) -> &str {
    const RUNNING: &str = "Non-zero status code returned while running ";
    const STATUS: &str = " Status Message: ";
    const INFERRING: &str = "Graph attribute inferencing failed: ";
    let mut m = msg;
    loop {
        if let Some(i) = m.find(RUNNING) {
            let rest = &m[i + RUNNING.len()..];
            let control = ["If node.", "Loop node.", "Scan node."].iter().any(|op| rest.starts_with(op));
            if let (Some(j), true) = (rest.find(STATUS), control) {
                m = &rest[j + STATUS.len()..];
                continue;
            }
        }
        let control = [") Op (If)", ") Op (Loop)", ") Op (Scan)"].iter().any(|op| m.contains(op));
        match m.find(INFERRING) {
            Some(i) if control => m = &m[i + INFERRING.len()..],
            _ => return m,
        }
    }
}

/// A TVM `ICHECK` message up to its condition: `Check failed: (COND) is false: FREE TEXT` keeps what precedes the
/// free text, which names the values of this occurrence without quotes (`Inconsistent buffers PadInput and
/// arg0 mapped to the same relax var: lv6`, then `... compute and arg0 ... lv10` for the same bug). A condition
/// that is only a literal (`(false)`, `(0)`) says nothing by itself: such a message is kept whole.
fn check_condition(msg: &str) -> &str {
    const MARK: &str = "Check failed: (";
    let Some(start) = msg.find(MARK) else { return msg };
    let cond_start = start + MARK.len();
    let Some(len) = msg[cond_start..].find(") is false") else { return msg };
    let cond = &msg[cond_start..cond_start + len];
    if matches!(cond.trim(), "false" | "0" | "nullptr") {
        return msg;
    }
    &msg[..cond_start + len + ") is false".len()]
}

/// A message up to its specifics: TVM's type checks state the rule, then "However, " and the expression that
/// broke it (`Matmul requires the reduction length of the operands to be equal.  However, the LHS lv has shape
/// R.shape([1, 1, 8, 8]) ...`), whose names and printing vary with every occurrence of one bug.
fn general_part(msg: &str) -> &str {
    match msg.find(" However, ") {
        Some(i) if i > 0 => msg[..i].trim_end(),
        _ => msg,
    }
}

/// An error's kind, for recognizing the same error while delta debugging and reducing: the normalized message
/// with every parenthesized name masked too, op types included (disabling an unrelated pass can make the same
/// type error be reported from another fused op: `Op (Gemm)` then `Op (FusedGemm)`).
pub fn error_kind(msg: &str) -> String {
    let n = normalize(msg);
    let mut out = String::with_capacity(n.len());
    let mut rest = n.as_str();
    while let Some(i) = rest.find('(') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find(')') {
            Some(j) if j > 0 && !after[..j].contains(char::is_whitespace) && !after[..j].contains('(') => {
                out.push_str("(*)");
                rest = &after[j + 1..];
            }
            _ => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The coarse signature of a finding, known as soon as it is found (before triage): target, symptom,
/// configuration and normalized message, as a short stable hash. Groups findings for the campaign's counts and
/// for choosing which finding of a group triage takes first.
pub fn coarse(target: &str, v: &Verdict) -> String {
    let key = format!("{target}|{}|{}|{}", v.symptom, v.config, normalize(&v.detail));
    crate::util::stable_hash(&key)
}

/// The source key of a finding, known as soon as it is found: the coarse signature refined, for an
/// inconsistency, by the op that produces its first deviating output (`producer`). The campaign writes only a
/// few findings of a key as directories and counts the rest ([`super::exemplars`]), choosing the written ones to
/// cover every pass the key's findings fired.
pub fn source_key(target: &str, v: &Verdict, producer: Option<&str>) -> String {
    crate::util::stable_hash(&format!("{}|{}", coarse(target, v), producer.unwrap_or("")))
}

/// The output an inconsistency's detail names first (`output 'NAME'[...]: expected ...`).
pub fn deviating_output(detail: &str) -> Option<&str> {
    let rest = detail.strip_prefix("output '")?;
    rest.find('\'').map(|i| &rest[..i])
}

/// The bug signature, known after triage: target, symptom, culprit passes (sorted; `unresolved@<config>` when
/// there are none) and, for errors, the normalized message. Inconsistency details name outputs and values, so
/// they do not enter it.
pub fn bug(target: &str, symptom: Symptom, culprits: &[String], config: &str, detail: &str) -> String {
    let mut passes = culprits.to_vec();
    passes.sort();
    let passes = if passes.is_empty() { format!("unresolved@{config}") } else { passes.join("+") };
    let message = match symptom {
        Symptom::Error => normalize(detail),
        _ => String::new(),
    };
    crate::util::stable_hash(&format!("{target}|{symptom}|{passes}|{message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A review found the QDQ selectors' missing scalar check filed twice: QLinearAveragePool's type inference and
    /// QLinearLeakyRelu's lookup table refuse a non-scalar scale in their own words.
    #[test]
    fn a_non_scalar_quantization_parameter_is_one_error_kind_in_any_quantized_node() {
        let pool =
            "Node (n7_AveragePool) Op (QLinearAveragePool) [TypeInferenceError] Scale and Zero-point must be a scalar";
        let table = "Exception during initialization: /onnxruntime_src/onnxruntime/contrib_ops/cpu/quantization/\
                     qlinear_lookup_table.cc:48 void f() IsScalarOr1ElementVector(tensor_x_scale) was false. \
                     QlinearBuildLookupTable : input X_scale must be a scalar or 1D tensor of size 1";
        assert_eq!(error_kind(pool), error_kind(table));
        assert_ne!(error_kind(pool), error_kind("Type Error: Type 'tensor(int32)' of input parameter (c4)"));
    }

    #[test]
    fn one_broken_value_is_one_message_wherever_it_sits() {
        let top = "Invalid model. Node input 'p21160_cast_1_output' is not a graph input, initializer, or output of a previous node.";
        let body = "Non-zero status code returned while running Loop node. Name:'n3_Loop' Status Message: Non-zero status \
            code returned while running Div node. Name:'p1412360_div_3' Status Message: /onnxruntime_src/include/onnxruntime/\
            core/framework/op_kernel_context.h:45 const T* onnxruntime::OpKernelContext::Input(int) const [with T = \
            onnxruntime::Tensor] Missing Input: p1404744_add_3\n";
        let inline = "Exception during initialization: /onnxruntime_src/onnxruntime/core/graph/graph.cc:6489 \
            onnxruntime::common::Status onnxruntime::Graph::InlineIfSubgraph(bool, onnxruntime::Node&, const \
            onnxruntime::logging::Logger&) Node's: p1202201_div_2 input: p1194856_cast_0_output is not If node's input \
            or previous node output in this subgraph\n";
        assert_eq!(normalize(top), normalize(body));
        assert_eq!(lost_value(top), Some("p21160_cast_1_output"));
        assert_eq!(lost_value(body), Some("p1404744_add_3"));
        assert_eq!(lost_value("Node (n_1) Op (Gemm) type mismatch"), None);
        // triage's note: the value, not what reads it
        let note = format!("shown; {NOTHING_DEFINES} (node 'n_1' reads 'v_2')");
        assert_eq!(lost_value(&note), Some("v_2"));
        assert_eq!(lost_value(&format!("shown; {NOTHING_DEFINES} ('v_3' is returned)")), Some("v_3"));
        let kernel = |op: &str, domain: &str| {
            format!(
                "Failed to find kernel for {op}(1) (node:'q_1' ep:'CPUExecutionProvider'). Op with name (q_1) domain \
                 ({domain}) and type (QLinearConv) kernel is not supported in CPUExecutionProvider."
            )
        };
        assert_eq!(
            error_kind(&kernel("com.microsoft.QLinearConv", "com.microsoft")),
            error_kind(&kernel("QLinearConv", ""))
        );
        // a type the fused node's schema refuses is the same kind (a review found LayerNormFusion's unchecked
        // leading Cast filed twice: int64 refused by the type check, float64 by the kernel lookup)
        let refused = "This is an invalid model. Type Error: Type 'tensor(int64)' of input parameter (x1) of operator             (LayerNormalization) in node (/LayerNormFusion/) is invalid.";
        let no_kernel = "Failed to find kernel for LayerNormalization(1) (node:'/LayerNormFusion/'             ep:'CPUExecutionProvider'). Op with name (/LayerNormFusion/) domain () and type (LayerNormalization) kernel             is not supported in CPUExecutionProvider.";
        assert_eq!(error_kind(refused), error_kind(no_kernel));
        // and so are types that disagree (a review found the same Cast absorbed before a float64 scale filed apart)
        let bound = "Type Error: Type parameter (T) of Optype (LayerNormalization) bound to different types \
            (tensor(float) and tensor(double) in node (_if_then_branch_Mul/LayerNormFusion/).";
        assert_eq!(error_kind(bound), error_kind(no_kernel));
        assert_eq!(normalize(top), normalize(inline));
        assert_eq!(error_kind(top), error_kind(inline));
        let output = "the session was created, but output 's467080_cf0' came back without a value or type information";
        let loop_output = "Non-zero status code returned while running Loop node. Name:'n0_Loop' Status Message: \
            /onnxruntime_src/include/onnxruntime/core/framework/ort_value.h:85 const T& OrtValue::Get() const [with T = \
            onnxruntime::Tensor] IsTensor() was false. Trying to get a Tensor, but got: (null)\n";
        assert_eq!(normalize(output), normalize(loop_output));
        assert_ne!(normalize(top), normalize(output));
        // other errors keep their own message
        let other =
            "Non-zero status code returned while running FastGelu node. Name:'GPT2Gelu' Status Message: Input 0 is \
            expected to have 1 or more dimensions, got 0";
        assert!(normalize(other).contains("FastGelu node"));
    }

    #[test]
    fn normalization_removes_numbers_addresses_and_names() {
        assert_eq!(
            normalize("node 'conv_12' at 0x7ffd12ab: shape [3, 4] vs 2.5e-3, expected -1"),
            normalize("node 'relu_3' at 0x55aa00: shape [7, 1] vs 9.1e-2, expected 0")
        );
        assert_ne!(normalize("Gather failed"), normalize("Reshape failed"));
        assert_eq!(
            normalize("Node (p1264_conv_q) Op (QuantizeLinear) input (c6) of (x)"),
            normalize("Node (t2_0_q) Op (QuantizeLinear) input (c4) of (x)")
        );
        assert_ne!(normalize("Op (QuantizeLinear)"), normalize("Op (DequantizeLinear)"));
    }

    #[test]
    fn a_tvm_check_is_known_by_its_condition_not_by_the_values_its_message_names() {
        let check = |free: &str| {
            normalize(&format!("InternalError: Check failed: (ffi::StructuralEqual()((*it).second.type(), new_buf.type())) is false: {free}"))
        };
        assert_eq!(
            check("Inconsistent buffers PadInput and arg0 mapped to the same relax var: lv6"),
            check("Inconsistent buffers compute and arg0 mapped to the same relax var: lv10")
        );
        assert_ne!(
            normalize("Check failed: (it != string_lookup.end()) is false: no parameter c0"),
            normalize("Check failed: (it_group != obj2group_.end()) is false: Variable gv not in any group")
        );
        // a literal condition says nothing: the text is the message
        assert_ne!(
            normalize("Check failed: (false) is false: Cannot find op relax.split"),
            normalize("Check failed: (false) is false: Unsupported layout NCHW4c")
        );
    }

    #[test]
    fn a_tvm_type_error_is_known_by_its_rule_not_by_the_expression_that_broke_it() {
        let rule = "ValueError: Matmul requires the reduction length of the operands to be equal.";
        assert_eq!(
            normalize(&format!("{rule}  However, the LHS lv has shape R.shape([1, 1, 8, 8]), while the RHS lv3 has 7")),
            normalize(&format!("{rule}  However, the LHS metadata[\"ir.GenericConst\"][0] # Metadata omitted. has 2"))
        );
        assert_ne!(
            normalize(&format!("{rule}  However, the LHS lv ...")),
            normalize("ValueError: Matmul operands must not be scalar.  However, the expression R.matmul(in3, lv2)")
        );
    }

    #[test]
    fn an_error_inside_a_control_flow_body_is_known_by_the_error_inside() {
        let inner = "Non-zero status code returned while running FastGelu node. Name:'GPT2Gelu' Status Message: \
                     Input 0 is expected to have 1 or more dimensions, got 0";
        let wrapped = format!(
            "Non-zero status code returned while running If node. Name:'n3_If' Status Message: \
             Non-zero status code returned while running Loop node. Name:'n1_Loop' Status Message: {inner}"
        );
        assert_eq!(normalize(&wrapped), normalize(inner));
        assert!(normalize(&wrapped).contains("FastGelu node"));
        let other = "Non-zero status code returned while running Gemm node. Name:'g' Status Message: bad shape";
        assert_eq!(normalize(other), normalize(other).to_string(), "other wrappers stay");
        assert!(normalize(other).starts_with("Non-zero status code returned while running Gemm node."));
        // at session creation (a review found QDQSelectorActionTransformer's int32 QLinearConv weight in a Loop body
        // and at the top level filed twice)
        let top = "This is an invalid model. Type Error: Type 'tensor(int32)' of input parameter (w_quantized) of \
                   operator (QLinearConv) in node (c) is invalid.";
        let body = format!("Node (n8_Loop) Op (Loop) [TypeInferenceError] Graph attribute inferencing failed: {top}");
        assert_eq!(normalize(&body), normalize(top));
        let shape = "Node (n) Op (Reshape) [ShapeInferenceError] Graph attribute inferencing failed: x";
        assert_eq!(normalize(shape), normalize(shape).to_string(), "only control-flow wrappers go");
        assert!(normalize(shape).contains("Reshape"));
    }

    #[test]
    fn an_error_kind_ignores_which_op_reported_it() {
        assert_eq!(
            error_kind("Node (n_1) Op (Gemm) [TypeInferenceError] type 3 mismatch"),
            error_kind("Node (f_7) Op (FusedGemm) [TypeInferenceError] type 9 mismatch")
        );
        assert_ne!(error_kind("Op (Gemm) [TypeInferenceError] x"), error_kind("Op (Gemm) [ShapeInferenceError] x"));
        assert_eq!(error_kind("f(a b) and (x"), "f(a b) and (x");
    }

    #[test]
    fn signatures_group_findings_that_differ_only_in_context() {
        let v = |detail: &str| Verdict {
            symptom: Symptom::Error,
            config: "all".into(),
            detail: detail.into(),
            max_diff: None,
            measure: None,
        };
        assert_eq!(coarse("ort", &v("node 'a1' failed at 12")), coarse("ort", &v("node 'b7' failed at 40")));
        assert_ne!(coarse("ort", &v("x failed")), coarse("tract", &v("x failed")));
    }
}
