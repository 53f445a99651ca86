//! A value the optimized graph reads but nothing defines (a Scan, Loop or If body output whose producer a fusion
//! rewired): ORT runs such a graph and returns whatever that value's buffer held, at times the expected value
//! itself, so the same probe shows the symptom or not by chance. When the finding's own optimized graph has one,
//! every run of triage saves its optimized graph and a dangling value in it is the symptom, decided on the graph.
//! An error raised while running may be one too (a body output nothing produces): its entry's note names the value.

use super::classify::{Class, Classified};
use super::reproduce::Reproducer;
use crate::compiler::{Config, Level, Outcome};
use crate::graph::GraphError;
use crate::oracle::Symptom;

/// How ONNX Runtime's errors raised while running a session begin.
const RUNNING: &str = "Non-zero status code returned while running ";

/// The value `model` (an optimized graph ORT saved) reads, or returns from a body, that nothing defines.
pub fn undefined(model: &[u8]) -> Option<String> {
    let m = crate::graph::onnx::decode_model(model).ok()?;
    match m.graph.validate() {
        Err(GraphError::Undefined { value, node }) => Some(format!("node '{node}' reads '{value}'")),
        Err(GraphError::OutputUndefined { value }) => Some(format!("'{value}' is returned")),
        _ => None,
    }
}

impl Reproducer<'_> {
    /// `config` made to save its optimized graph, when the finding's symptom is a dangling value and `config`
    /// optimizes (`None`: run it as it is).
    pub(super) fn saving(&mut self, config: &Config) -> Option<Config> {
        let applies = self.finding.target == "ort"
            && (self.finding.symptom == Symptom::Inconsistency || self.raised_running())
            && config.level != Level::Disable
            && config.save_optimized.is_none();
        if !applies {
            return None;
        }
        if self.dangling.asked.is_none() {
            self.dangling.dir = tempfile::tempdir().ok();
            let model = self.finding.bytes(&self.finding.case);
            let feeds = self.finding.case.feeds.clone();
            let own = self.next_path().map(|p| Config { save_optimized: Some(p), ..self.finding.config.clone() });
            let found = own.is_some_and(|c| {
                self.runs += 1;
                self.worker.run(&model, &feeds, &c);
                self.dangling_at(&c).is_some()
            });
            self.dangling.asked = Some(found);
        }
        if self.dangling.asked != Some(true) {
            return None;
        }
        Some(Config { save_optimized: Some(self.next_path()?), ..config.clone() })
    }

    fn next_path(&mut self) -> Option<std::path::PathBuf> {
        self.dangling.saved += 1;
        Some(self.dangling.dir.as_ref()?.path().join(format!("{}.onnx", self.dangling.saved)))
    }

    /// The dangling value of the optimized graph `o`'s run saved (see [`Self::saving`]).
    pub fn dangling_in(&self, o: &Outcome) -> Option<String> {
        (self.dangling.asked == Some(true)).then(|| self.dangling_at(&o.config)).flatten()
    }

    fn dangling_at(&self, config: &Config) -> Option<String> {
        undefined(&std::fs::read(config.save_optimized.as_ref()?).ok()?)
    }

    /// Whether the finding is an error raised while running (its session was made and saved its optimized graph).
    fn raised_running(&self) -> bool {
        self.finding.symptom == Symptom::Error && self.finding.message.contains(RUNNING)
    }

    /// For an error raised while running, what the optimized graph of `case` (under the finding's configuration)
    /// reads or returns that nothing defines, as a note: a Loop body output a fusion removed fails as "All scan
    /// outputs MUST be tensors", naming no value (a review found EmbedLayerNormFusion's lost Add filed twice so).
    pub(super) fn dangling_note(&mut self, case: &super::reduce::Case) -> Option<String> {
        if !self.raised_running() || self.dangling.asked != Some(true) {
            return None;
        }
        let (model, config) = (self.finding.bytes(case), self.finding.config.clone());
        let o = self.run(&model, &case.feeds, &config);
        Some(format!("{} ({})", crate::finding::signature::NOTHING_DEFINES, self.dangling_in(&o)?))
    }

    /// `optimized`'s class when its graph has a dangling value: a wrong result whatever the values show.
    pub(super) fn dangling_class(&self, optimized: &Outcome) -> Option<Classified> {
        let what = self.dangling_in(optimized)?;
        Some(Classified {
            class: Class::Optimizer,
            note: format!(
                "{} ({what}): the output holds whatever its buffer held, the expected value only by chance",
                crate::finding::signature::NOTHING_DEFINES
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Attr, DType, Graph, Model, Node, OpId, TensorType};

    /// A Scan whose body returns `y` and `extra`; only `y` has a producer unless `whole`.
    fn scan(whole: bool) -> Vec<u8> {
        let mut body = Graph::new("body");
        body.add_input("x", TensorType::new(DType::F32, &[2]));
        body.add_node(Node::new("r", OpId::onnx("Relu"), vec!["x".into()], vec!["y".into()])).unwrap();
        if whole {
            body.add_node(Node::new("n", OpId::onnx("Neg"), vec!["x".into()], vec!["extra".into()])).unwrap();
        }
        body.outputs = vec!["y".into(), "extra".into()];
        let mut g = Graph::new("g");
        g.add_input("a", TensorType::new(DType::F32, &[1, 2]));
        let node = Node::new("s", OpId::onnx("Scan"), vec!["a".into()], vec!["o".into(), "p".into()])
            .with_attr("body", Attr::Graph(Box::new(body)))
            .with_attr("num_scan_inputs", Attr::Int(1));
        g.add_node(node).unwrap();
        g.add_output("o", TensorType::new(DType::F32, &[1, 2]));
        crate::graph::onnx::encode_model(&Model::new(g))
    }

    #[test]
    fn a_body_output_nothing_defines_is_dangling() {
        assert_eq!(undefined(&scan(false)).as_deref(), Some("'extra' is returned"));
        assert_eq!(undefined(&scan(true)), None);
    }
}
