//! Reproducing a finding: runs under chosen pass sets, recognizing its symptom in a run, delta debugging of
//! its fired passes, and the check every reduction candidate must pass.

use super::classify::{self, Class, Classified, NoReference, Semantic};
use super::conditioning;
use super::dd::{self, Culprits, Probe};
use super::holds;
use super::load::Finding;
use super::perturb;
use super::reduce::Case;
use crate::compiler::worker::Worker;
use crate::compiler::{Config, NamedTensor, Outcome, Status};
use crate::finding::signature::error_kind;
use crate::graph::{onnx, Model, Tensor};
use crate::oracle::{Hints, Oracle, Symptom};
use std::collections::HashMap;

/// The rewrite rules inside `pass` when it is one of ORT's rule-based containers (else none).
pub(super) fn rules_of(pass: &str) -> &'static [&'static str] {
    crate::compiler::rules::RULE_CONTAINERS.iter().find(|(c, _)| *c == pass).map_or(&[], |(_, rules)| rules)
}

/// How a crash died, from its message: `signal N`, or the normalized message of another abnormal end.
pub fn crash_kind(message: &str) -> String {
    match message.strip_prefix("killed by signal ") {
        Some(rest) => format!("signal {}", rest.split_whitespace().next().unwrap_or_default()),
        None => crate::finding::signature::normalize(message.lines().next().unwrap_or_default()),
    }
}

/// Whether a finding's symptom is a value its optimized graph reads but nothing defines, and where its runs then
/// save their optimized graphs (`dangling.rs`).
#[derive(Default)]
pub struct Dangling {
    /// Asked once, on the finding's own model and configuration.
    pub(super) asked: Option<bool>,
    pub(super) dir: Option<tempfile::TempDir>,
    pub(super) saved: usize,
}

/// How a finding's symptom is recognized in a run, and the runs spent recognizing it.
pub struct Reproducer<'w> {
    pub worker: &'w mut Worker,
    pub oracle: Oracle,
    pub finding: Finding,
    pub runs: usize,
    /// The semantic reference that classifies inconsistencies (none: every inconsistency is undecided).
    pub semantic: Option<&'w mut Semantic>,
    /// The class a reduction candidate must keep (set once the original is classified).
    pub keep_class: Option<Class>,
    /// [`Self::passes_at_level`] once asked, with the configuration (disabled passes cleared) it was asked for.
    level_passes: Option<(Config, Vec<String>)>,
    /// Whether the finding's symptom is a value its optimized graph reads but nothing defines.
    pub(super) dangling: Dangling,
    /// The outcomes of this worker process's runs so far.
    pub(super) memo: super::memo::Memo,
}

impl<'w> Reproducer<'w> {
    pub fn new(worker: &'w mut Worker, oracle: Oracle, finding: Finding, semantic: Option<&'w mut Semantic>) -> Self {
        let dangling = Default::default();
        let memo = Default::default();
        Reproducer { worker, oracle, finding, runs: 0, semantic, keep_class: None, level_passes: None, dangling, memo }
    }

    /// [`Self::classify_case`] of the whole `case`, with the semantic reference's run of it (or why there is none).
    pub(super) fn classify_with(
        &mut self,
        case: &Case,
        unoptimized: &Outcome,
        optimized: &Outcome,
        semantic: Result<Outcome, NoReference>,
    ) -> Classified {
        if let Some(c) = self.dangling_class(optimized) {
            return c;
        }
        let hints = self.hints();
        let c = classify::classify(&self.oracle, &hints, unoptimized, optimized, semantic.as_ref());
        // the model evaluated in float64, asked at most once below
        let mut exact = None;
        let runs = [unoptimized, optimized];
        // both runs deviate from onnx.reference (it rounds in the model's 16-bit types): the float64 values decide
        let c = if c.class == Class::Undecided && semantic.is_ok() {
            self.by_float64(c, case, runs, semantic.as_ref().ok(), &mut exact)
        } else {
            c
        };
        // NaN in the exact values that the unoptimized run keeps and the optimized one loses is a wrong result
        // (unless perturbed references give finite values there: a 0 / 0 of rounding noise that is exactly 0)
        let c = match (c.class == Class::Nonfinite).then(|| self.float64(case, &mut exact).cloned()).flatten() {
            Some(e) => {
                let open = super::domains::nan_open(&case.model.graph);
                match conditioning::refine_lost_nan(c.clone(), (unoptimized, optimized), &e, &[], &open) {
                    lost if lost.class == Class::Optimizer => {
                        let perturbed = perturb::runs(self, case, false, &[]);
                        conditioning::refine_lost_nan(c, (unoptimized, optimized), &e, &perturbed, &open)
                    }
                    kept => kept,
                }
            }
            None => c,
        };
        // a wrong optimized float16 result may be a skipped rounding: compare it with the model computed in float32
        let c = match (&semantic, self.semantic.as_mut()) {
            (Ok(truth), Some(s)) if c.class == Class::Optimizer && holds::has_half_floats(&case.model) => {
                let widened = s.run_widened(&onnx::encode_model(&case.model), &case.feeds).ok();
                classify::refine_widened(&self.oracle, &hints, c, truth, optimized, widened.as_ref())
            }
            _ => c,
        };
        // under a configuration that approximates by design, the approximation may be all there is
        let approximations = Self::approximations_of(optimized);
        let c = match self.semantic.as_mut() {
            Some(s) if c.class == Class::Optimizer && !approximations.is_empty() => {
                let model = onnx::encode_model(&case.model);
                let evaluate = |names: &[String]| s.run_approximated(&model, &case.feeds, names).ok();
                let runs = [unoptimized, optimized];
                super::approximated::refine_by_approximations(&self.oracle, &hints, c, runs, &approximations, evaluate)
            }
            _ => c,
        };
        // a float result as close to the exact (float64) values as the unoptimized one only rounds differently
        // (onnx.reference's own error, a conforming evaluation in the model's types, is rounding too)
        let c = if c.class == Class::Optimizer {
            self.by_float64(c, case, runs, semantic.as_ref().ok(), &mut exact)
        } else {
            c
        };
        // a value quantized twice is collapsed into one Q/DQ pair by design: the model collapsed so tells
        let c = super::requantized::refine(self, c, case, optimized);
        // at an ill-conditioned input, rounding alone moves the exact result as far: perturbed inputs tell
        let c = match &semantic {
            Ok(truth) if c.class == Class::Optimizer => {
                let runs = perturb::runs(self, case, true, &approximations);
                conditioning::refine(&self.oracle, c, truth, (unoptimized, optimized), &runs)
            }
            _ => c,
        };
        // an integer cast of a float on a rounding boundary flips by one: the float values tell
        let c = super::boundary::refine(self, c, case, unoptimized, optimized);
        // a wrong quantized result on x64 may be the fast kernels' documented overflow: ORT's precise mode tells
        super::platform::refine(self, c, case, unoptimized, optimized)
    }

    /// The approximations the optimized run makes by design: its named configuration's, and WeightBiasQuantization's
    /// int8 weights when that pass fired (it quantizes the float weights of a quantized Conv or Gemm on purpose).
    fn approximations_of(optimized: &Outcome) -> Vec<String> {
        let mut all = crate::compiler::named::approximations(&optimized.config);
        if optimized.passes_fired.iter().any(|p| p == "WeightBiasQuantization") {
            all.push("weight_bias".to_string());
        }
        all
    }

    /// Where `case`'s values contradict the shapes ONNX shape inference gives them (see
    /// [`Semantic::shape_contradiction`]); `None` without a semantic reference.
    pub fn shape_contradiction(&mut self, case: &Case) -> Option<String> {
        let model = onnx::encode_model(&case.model);
        self.semantic.as_mut()?.shape_contradiction(&model, &case.feeds)
    }

    /// The configuration with only `enabled` of the fired passes on.
    /// `enabled` may name rewrite rules (ORT): their rule-based container stays on, with its other rules off.
    pub fn config_enabling(&self, enabled: &[String]) -> Config {
        let mut c = self.finding.config.clone();
        for p in self.finding.fired.iter().filter(|p| !enabled.contains(p)) {
            let rules = rules_of(p);
            let on: Vec<&&str> = rules.iter().filter(|r| enabled.iter().any(|e| e == **r)).collect();
            if on.is_empty() {
                c.disabled.push(p.clone());
            } else {
                c.disabled.extend(rules.iter().filter(|r| !on.contains(r)).map(|r| r.to_string()));
            }
        }
        c
    }

    /// Whether `o` shows the finding's symptom: the same kind of failure (for errors, the same
    /// [`error_kind`]: the normalized message whichever op reports it), or outputs that differ from
    /// `reference`'s.
    pub fn classify(&self, o: &Outcome, reference: Option<&Outcome>) -> Probe {
        match (self.finding.symptom, &o.status) {
            // the same way of dying: the same signal (or the same normalized message of an abnormal exit)
            (Symptom::Crash, Status::Crash { .. } | Status::Oom { .. }) => {
                if crash_kind(&o.status.message()) == crash_kind(&self.finding.message) {
                    Probe::Symptom
                } else {
                    Probe::Unresolved
                }
            }
            (Symptom::Hang, Status::Timeout { .. }) => Probe::Symptom,
            (Symptom::Error, Status::Error { message }) => {
                if error_kind(message) == error_kind(&self.finding.message) {
                    Probe::Symptom
                } else {
                    Probe::Unresolved
                }
            }
            (Symptom::Inconsistency, Status::Ok) if self.dangling_in(o).is_some() => Probe::Symptom,
            (Symptom::Inconsistency, Status::Ok) => match reference {
                Some(r) if r.status == Status::Ok => {
                    if self.oracle.inconsistency_with(r, o, &self.hints()).is_some() {
                        Probe::Symptom
                    } else {
                        Probe::Clean
                    }
                }
                _ => Probe::Unresolved,
            },
            (_, Status::Ok) => Probe::Clean,
            _ => Probe::Unresolved,
        }
    }

    /// What the oracle knows about the finding's model: its quantized values, by name, which every reduced case
    /// keeps (reduction removes nodes and values, it never renames one).
    pub fn hints(&self) -> Hints {
        Hints::of(&self.finding.case.model.graph)
    }

    /// Delta-debugs the fired passes of the finding's own model, then names the rewrite rules inside a
    /// rule-based container among them ([`Self::rule_culprits`]).
    pub fn culprits(&mut self) -> Culprits {
        let model = self.finding.bytes(&self.finding.case);
        let feeds = self.finding.case.feeds.clone();
        let reference = (self.finding.symptom == Symptom::Inconsistency)
            .then(|| self.run(&model, &feeds, &self.finding.reference.clone()));
        let c = self.pass_culprits(&model, &feeds, reference.as_ref());
        let mut c = self.rule_culprits(c, &model, &feeds, reference.as_ref());
        // the pass the error was raised in is the faulty one, whatever else its structure needs (the enablers);
        // a pass that raises never reports that it fired, so the search may not have named it
        if let Some(p) = self.raised_in().filter(|p| !c.passes.contains(p)) {
            let note = format!("raised in {p} (the runner's pass at the error), which never reports firing");
            c.note = Some(c.note.map_or(note.clone(), |n| format!("{n}; {note}")));
            c.passes.insert(0, p);
        }
        c
    }

    /// The configuration pass the finding's error was raised in, when the target names it (TVM's runner).
    pub fn raised_in(&self) -> Option<String> {
        let raised = crate::compiler::tvm::raised_in(&self.finding.message);
        raised.filter(|_| self.finding.symptom == Symptom::Error).map(str::to_string)
    }

    fn pass_culprits(&mut self, model: &[u8], feeds: &[NamedTensor], reference: Option<&Outcome>) -> Culprits {
        let fired = self.finding.fired.clone();
        let probe = |r: &mut Self, enabled: &[String]| -> Probe {
            let c = r.config_enabling(enabled);
            let o = r.run(model, feeds, &c);
            r.classify(&o, reference)
        };
        let first = dd::culprits(&fired, &mut |e: &[String]| probe(self, e));
        // an error raised in a pass names it (`culprits` adds it): the fired passes are only its enablers
        let raised = self.raised_in().is_some();
        let beyond_fired = [dd::SHOWN_WITH_NONE, dd::NONE_CANNOT_RUN];
        if raised || (first.passes.is_empty() && !first.note.as_deref().is_some_and(|n| beyond_fired.contains(&n))) {
            return first;
        }
        // the culprits alone among every pass that runs, not only the fired ones: a pass whose rewrite breaks the
        // graph before it reports firing is needed too (GemmTransposeFusion on the Gemm MatMulAddFusion made)
        if !first.passes.is_empty() && !self.needs_unfired_passes(model, feeds, reference, &first.passes) {
            return first;
        }
        // a pass that crashes or fails never reports that it modified the graph, and one a culprit shadows fires
        // only once the culprit is disabled (SimplifiedLayerNormFusion where LayerNormFusion left no match):
        // search every pass that runs
        let mut universe: Vec<String> = Vec::new();
        // a Relax test's inserted pass runs only for its own test, not for the probe model
        let inserted = match &self.finding.relax {
            Some(crate::triage::RelaxTest::Recipe(r)) => Some(r.pass.clone()),
            Some(crate::triage::RelaxTest::Module(m)) => m.pass.clone(),
            None => None,
        };
        let pipeline = (self.finding.target == "tvm").then(crate::compiler::tvm::Pipeline::embedded);
        for p in self.passes_at_level().into_iter().chain(inserted) {
            let p = crate::compiler::rules::canonical(&p).to_string();
            // TVM's required passes run in every configuration, the reference's too: never a culprit
            if pipeline.as_ref().is_some_and(|pl| pl.role(&p) == crate::compiler::tvm::PassRole::Required) {
                continue;
            }
            if !self.finding.config.disabled.contains(&p) && !universe.contains(&p) {
                universe.push(p);
            }
        }
        if universe.is_empty() {
            return first;
        }
        let saved = std::mem::replace(&mut self.finding.fired, universe.clone());
        let mut wide = dd::culprits(&universe, &mut |e: &[String]| probe(self, e));
        wide.runs += first.runs;
        if wide.passes.is_empty() {
            self.finding.fired = saved;
            if !first.passes.is_empty() {
                return first;
            }
            wide.note = Some(format!(
                "{} (among every pass that runs at this level: {})",
                first.note.unwrap_or_default(),
                wide.note.unwrap_or_default()
            ));
        } else {
            wide.note =
                Some("found among all passes that run at this level (the culprit never reported a change)".into());
        }
        wide
    }

    /// Whether a pass that never reported firing is needed too: `culprits` show the symptom with the other
    /// fired passes off, but not with every other pass that runs off too (ONNX Runtime; `culprits` passes, not rules).
    fn needs_unfired_passes(
        &mut self,
        model: &[u8],
        feeds: &[NamedTensor],
        reference: Option<&Outcome>,
        culprits: &[String],
    ) -> bool {
        if self.finding.target != "ort" || self.finding.relax.is_some() {
            return false;
        }
        let mut c = self.config_enabling(culprits);
        let more: Vec<String> = self
            .passes_at_level()
            .iter()
            .map(|p| crate::compiler::rules::canonical(p).to_string())
            .filter(|p| !culprits.contains(p) && !c.disabled.contains(p))
            .collect();
        c.disabled.extend(more);
        let o = self.run(model, feeds, &c);
        self.classify(&o, reference) != Probe::Symptom
    }

    /// Every pass the target runs at the finding's level, from a run of a two-node model (Relu -> Transpose: ORT's
    /// TransposeOptimizer only reports running on a graph with a Transpose), run once per configuration.
    pub(super) fn passes_at_level(&mut self) -> Vec<String> {
        use crate::graph::{DType, Graph, Node, OpId, TensorType};
        let mut c = self.finding.config.clone();
        c.disabled.clear();
        if let Some((asked, passes)) = &self.level_passes {
            if *asked == c {
                return passes.clone();
            }
        }
        let mut g = Graph::new("probe");
        g.add_input("x", TensorType::new(DType::F32, &[1, 2]));
        let _ = g.add_node(Node::new("relu", OpId::onnx("Relu"), vec!["x".into()], vec!["r".into()]));
        let _ = g.add_node(Node::new("transpose", OpId::onnx("Transpose"), vec!["r".into()], vec!["y".into()]));
        g.add_output("y", TensorType::new(DType::F32, &[2, 1]));
        let m = Model::new(g);
        let feeds = crate::compiler::inputs::generate(&m.graph, 0).unwrap_or_default();
        let passes = self.run(&onnx::encode_model(&m), &feeds, &c).passes_ran;
        self.level_passes = Some((c, passes.clone()));
        passes
    }

    /// Whether a candidate still shows the finding: the reference runs cleanly, the culprits alone show the
    /// symptom, disabling any one culprit makes it go away, and an inconsistency keeps its class
    /// ([`Self::keep_class`]). Returns the reference and symptom runs.
    /// The filing gate: whether disabling every culprit (each pass under every name it runs as) in the finding's
    /// own configuration, every other pass on, makes the symptom go (another failure may come instead: a second
    /// bug the first one hid). `reference`: the unoptimized run of `case` (what an
    /// inconsistency is judged against). A culprit set found with the other fired passes off may not be the
    /// whole story with them on (another pass, or another instance of one, shows the same symptom).
    pub fn cured_by_disabling(&mut self, case: &Case, culprits: &[String], reference: Option<&Outcome>) -> bool {
        let model = self.finding.bytes(case);
        let mut config = self.finding.config.clone();
        config.disabled.extend(culprits.iter().cloned());
        let o = self.run(&model, &case.feeds, &config);
        self.classify(&o, reference) != Probe::Symptom
    }

    /// `config` (the finding's configuration with `extra` passes disabled besides) with as few of `extra`
    /// disabled as still show the symptom, and still cure it with `culprits` disabled too: each is enabled again
    /// in turn and stays enabled when both hold (a repro that disables 21 passes where one suffices hides which
    /// one masks the bug).
    pub fn fewest_disabled(
        &mut self,
        (model, feeds): (&[u8], &[NamedTensor]),
        config: Config,
        culprits: &[String],
        reference: Option<&Outcome>,
    ) -> Config {
        let extra: Vec<String> =
            config.disabled.iter().filter(|p| !self.finding.config.disabled.contains(p)).cloned().collect();
        let mut best = config;
        for p in extra {
            let mut candidate = best.clone();
            candidate.disabled.retain(|d| *d != p);
            let o = self.run(model, feeds, &candidate);
            if self.classify(&o, reference) != Probe::Symptom {
                continue;
            }
            let mut cured = candidate.clone();
            cured.disabled.extend(culprits.iter().cloned());
            let o = self.run(model, feeds, &cured);
            if self.classify(&o, reference) != Probe::Symptom {
                best = candidate;
            }
        }
        best
    }

    /// In how many of `n` fresh worker processes one run of `model` under `config` shows the symptom (a symptom
    /// that needs the process's history, such as memory an earlier run left, shows in fewer).
    pub fn shown_fresh(
        &mut self,
        (model, feeds): (&[u8], &[NamedTensor]),
        config: &Config,
        reference: Option<&Outcome>,
        n: usize,
    ) -> usize {
        (0..n)
            .filter(|_| {
                self.fresh();
                let o = self.run(model, feeds, config);
                self.classify(&o, reference) == Probe::Symptom
            })
            .count()
    }

    /// Whether `case` shows the finding's symptom with only `culprits` enabled (the reference runs cleanly) and not
    /// with any of them left out; the reference and culprits' outcomes when it does. An error raised in a culprit
    /// needs no run without that culprit: a pass left out raises nothing (a third of a reduction's full builds).
    pub fn check(&mut self, case: &Case, culprits: &[String]) -> Option<(Outcome, Outcome)> {
        let model = self.finding.bytes(case);
        let config = if culprits.is_empty() { self.finding.config.clone() } else { self.config_enabling(culprits) };
        // an error, crash or hang is judged on the culprits' run alone: a candidate that loses it (most of a
        // reduction's) needs no reference run, and an error raised in a pass no run past that pass (TVM's
        // STOP_AFTER; where the error shows, the run is the whole one)
        let early = (self.finding.symptom != Symptom::Inconsistency).then(|| {
            let mut until = config.clone();
            until.options.extend(self.raised_in().map(|p| (crate::compiler::tvm::STOP_AFTER.to_string(), p)));
            Outcome { config: config.clone(), ..self.run(&model, &case.feeds, &until) }
        });
        if early.as_ref().is_some_and(|o| self.classify(o, None) != Probe::Symptom) {
            return None;
        }
        let reference = self.run(&model, &case.feeds, &self.finding.reference.clone());
        if reference.status != Status::Ok || self.breaks_contract(case, &reference) {
            return None;
        }
        let shown = early.unwrap_or_else(|| self.run(&model, &case.feeds, &config));
        if self.classify(&shown, Some(&reference)) != Probe::Symptom || !self.shown_by_itself(case, &reference, &shown)
        {
            return None;
        }
        let raised = self.raised_in();
        for c in culprits.iter().filter(|c| raised.as_ref() != Some(*c)) {
            let mut without = config.clone();
            without.disabled.push(c.clone());
            let o = self.run(&model, &case.feeds, &without);
            if !self.gone(&o, &reference) {
                return None;
            }
        }
        // an inconsistency must stay of its class (a candidate must not slide from a wrong optimized result to
        // a wrong reference, or to rounding)
        if let (Some(keep), Symptom::Inconsistency) = (self.keep_class, self.finding.symptom) {
            if self.classify_case(case, &reference, &shown).class != keep {
                return None;
            }
        }
        Some((reference, shown))
    }

    /// Whether `case` shows an inconsistency judged by what its own graph holds: a reduction may read a value past
    /// an op it dropped, so that an output becomes a dequantized value, one level of which is no finding (a review
    /// found an entry whose minimized model `oatest run` judged clean).
    fn shown_by_itself(&self, case: &Case, reference: &Outcome, shown: &Outcome) -> bool {
        self.finding.symptom != Symptom::Inconsistency
            || self.dangling_in(shown).is_some()
            || self.oracle.inconsistency_with(reference, shown, &Hints::of(&case.model.graph)).is_some()
    }

    /// Whether the finding's symptom is gone in `o`: it runs clean, or, for an error raised in a pass, it fails in
    /// another pass (a later bug the raising pass hid: TVM's pipeline stops at the first error).
    fn gone(&self, o: &Outcome, reference: &Outcome) -> bool {
        match self.classify(o, Some(reference)) {
            Probe::Clean => true,
            Probe::Symptom => false,
            Probe::Unresolved => match (self.raised_in(), &o.status) {
                (Some(p), Status::Error { message }) => {
                    crate::compiler::tvm::raised_in(message).is_some_and(|other| other != p)
                }
                _ => false,
            },
        }
    }

    /// Whether the unoptimized run of an ONNX case contradicts the model's declared outputs.
    pub fn breaks_contract(&self, case: &Case, reference: &Outcome) -> bool {
        self.finding.relax.is_none() && classify::contract_violation(&case.model, reference).is_some()
    }

    /// The reference value of every typed intermediate value of a case (one run with all of them exposed).
    pub fn values(&mut self, case: &Case) -> HashMap<String, Tensor> {
        let graph = crate::compiler::named::at_override_sizes(&case.model.graph);
        let Ok(types) = crate::ops::infer_types(&graph, false) else { return HashMap::new() };
        let mut m: Model = case.model.clone();
        let g = &mut m.graph;
        let ids: Vec<_> = g.node_ids().collect();
        for id in ids {
            for o in g.node(id).outputs.clone() {
                if let (false, Some(t)) = (o.is_empty() || g.outputs.contains(&o), types.get(&o)) {
                    g.add_output(&o, t.clone());
                }
            }
        }
        let o = self.run(&onnx::encode_model(&m), &case.feeds, &self.finding.reference.clone());
        o.outputs.into_iter().map(|t| (t.name, t.tensor)).collect()
    }
}
