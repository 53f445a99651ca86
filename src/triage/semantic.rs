//! The semantic reference (onnx.reference) in a worker of its own, started on first use and kept: a model's
//! outputs as ONNX defines them, or evaluated with 16-bit floats widened, in float64, or with named
//! approximations; and why there are none when it cannot answer.

use crate::compiler::worker::{Worker, WorkerSpec};
use crate::compiler::{Config, Level, NamedTensor, Outcome, Status, TargetKind};

/// Why the semantic reference gave no outputs for a model.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum NoReference {
    /// This triage has none, or the test has no ONNX model to ask it about.
    #[error("{0}")]
    NotAsked(String),
    /// It could not start earlier.
    #[error("the semantic reference is not available: {0}")]
    Unavailable(String),
    #[error("the semantic reference could not start: {0}")]
    NotStarted(String),
    /// It ran and failed on this model (a missing kernel, an error, a crash).
    #[error("{kind}: {message}")]
    Failed { kind: String, message: String },
}

/// The semantic reference's worker, started on first use and kept (importing onnx takes a while).
pub struct Semantic {
    spec: Option<WorkerSpec>,
    worker: Option<Worker>,
    /// Why the reference cannot run at all (it could not start), once known.
    broken: Option<String>,
}

impl Semantic {
    /// The reference in a worker of the oatest executable (60 s per model: numpy is slow on big convolutions);
    /// `background`: it only takes CPU time others leave (the campaign's triage).
    pub fn new(background: bool) -> Semantic {
        match WorkerSpec::new(TargetKind::OnnxRef) {
            Ok(mut spec) => {
                spec.timeout = std::time::Duration::from_secs(60);
                spec.background = background;
                Semantic { spec: Some(spec), worker: None, broken: None }
            }
            Err(e) => Semantic::unavailable(&format!("{e:#}")),
        }
    }

    /// A reference that never answers (`why` says why): every inconsistency is then undecided.
    pub fn unavailable(why: &str) -> Semantic {
        Semantic { spec: None, worker: None, broken: Some(why.to_string()) }
    }

    /// The process id of the reference's worker, while one runs.
    pub fn pid(&self) -> Option<u32> {
        self.worker.as_ref().and_then(|w| w.pid())
    }

    /// The reference's outputs for `model` (ONNX bytes), or why there are none.
    pub fn run(&mut self, model: &[u8], feeds: &[NamedTensor]) -> Result<Outcome, NoReference> {
        self.evaluate(model, feeds, false)
    }

    /// The outputs of `model` evaluated with every 16-bit float widened to float32 (the outputs rounded to their
    /// declared types at the end): what a compiler computes that skips the intermediate 16-bit roundings.
    pub fn run_widened(&mut self, model: &[u8], feeds: &[NamedTensor]) -> Result<Outcome, NoReference> {
        self.evaluate(model, feeds, true)
    }

    /// The outputs of `model` evaluated with every float tensor float64, the outputs too: values rounding does
    /// not move, against which each side of a float inconsistency is measured.
    pub fn run_float64(&mut self, model: &[u8], feeds: &[NamedTensor]) -> Result<Outcome, NoReference> {
        self.evaluate_with(model, feeds, &[crate::compiler::FLOAT_ROUNDING.to_string()])
    }

    /// Where the values of `model` contradict the shapes ONNX shape inference gives them (which a compiler plans
    /// memory and fuses by), when they do; `None` when they agree or the reference cannot evaluate it.
    pub fn shape_contradiction(&mut self, model: &[u8], feeds: &[NamedTensor]) -> Option<String> {
        match self.evaluate_with(model, feeds, &[crate::compiler::INFERRED_SHAPES.to_string()]) {
            Err(NoReference::Failed { message, .. }) => {
                message.strip_prefix("inferred shapes: ").map(|m| m.to_string())
            }
            _ => None,
        }
    }

    /// The outputs of `model` evaluated with the approximations `names` (see [`crate::compiler::APPROXIMATE`]).
    pub fn run_approximated(
        &mut self,
        model: &[u8],
        feeds: &[NamedTensor],
        names: &[String],
    ) -> Result<Outcome, NoReference> {
        let pseudo: Vec<String> = names.iter().map(|n| format!("{}{n}", crate::compiler::APPROXIMATE)).collect();
        self.evaluate_with(model, feeds, &pseudo)
    }

    fn evaluate(&mut self, model: &[u8], feeds: &[NamedTensor], widened: bool) -> Result<Outcome, NoReference> {
        let pseudo = if widened { vec![crate::compiler::HALF_ROUNDING.to_string()] } else { Vec::new() };
        self.evaluate_with(model, feeds, &pseudo)
    }

    /// Evaluates `model` with the reference's pseudo-passes `pseudo` disabled.
    fn evaluate_with(
        &mut self,
        model: &[u8],
        feeds: &[NamedTensor],
        pseudo: &[String],
    ) -> Result<Outcome, NoReference> {
        if let Some(why) = &self.broken {
            return Err(NoReference::Unavailable(why.clone()));
        }
        if self.worker.is_none() {
            let spec = self.spec.clone().expect("a reference that is not broken has a spec");
            match Worker::start(spec) {
                Ok(w) => self.worker = Some(w),
                Err(e) => {
                    self.broken = Some(format!("{e:#}"));
                    return Err(NoReference::NotStarted(format!("{e:#}")));
                }
            }
        }
        let w = self.worker.as_mut().expect("started");
        let mut config = Config::level(Level::Disable);
        config.disabled.extend(pseudo.iter().cloned());
        let o = w.run(model, feeds, &config);
        match &o.status {
            Status::Ok => Ok(o),
            st => Err(NoReference::Failed { kind: st.kind().to_string(), message: st.message() }),
        }
    }
}
