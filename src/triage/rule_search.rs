//! The rewrite rules behind a rule-based container among the culprits: ORT's `Level1_RuleBasedTransformer` runs
//! about twenty rules, and a report must name the rule, not the container.

use super::dd::{self, Culprits, Probe};
use super::reproduce::{rules_of, Reproducer};
use crate::compiler::{NamedTensor, Outcome};

impl Reproducer<'_> {
    /// A rule-based container (ORT's `Level1_RuleBasedTransformer`, ...) among the culprits stands for ~20
    /// rewrite rules: delta-debug its rules (the other culprits on, the container's other rules disabled by
    /// name) and name the ones that explain the symptom. The container stays the culprit only when no set of
    /// its rules does (the symptom then needs the container itself, or a rule oatest does not know).
    pub(super) fn rule_culprits(
        &mut self,
        mut c: Culprits,
        model: &[u8],
        feeds: &[NamedTensor],
        reference: Option<&Outcome>,
    ) -> Culprits {
        if self.finding.target != "ort" {
            return c;
        }
        let containers: Vec<String> = c.passes.iter().filter(|p| !rules_of(p).is_empty()).cloned().collect();
        if containers.is_empty() {
            return c;
        }
        for container in containers {
            let others: Vec<String> = c.passes.iter().filter(|p| **p != container).cloned().collect();
            let rules: Vec<String> = rules_of(&container).iter().map(|r| r.to_string()).collect();
            // with none of its rules on, `config_enabling` turns the container itself off
            let mut search = |tries: usize| {
                dd::culprits(&rules, &mut |on: &[String]| {
                    let enabled: Vec<String> = others.iter().chain(on).cloned().collect();
                    let config = self.config_enabling(&enabled);
                    let mut probe = Probe::Clean;
                    for _ in 0..tries {
                        let o = self.run(model, feeds, &config);
                        probe = self.classify(&o, reference);
                        if probe != Probe::Clean {
                            break;
                        }
                    }
                    probe
                })
            };
            let mut found = search(1);
            if found.passes.is_empty() {
                // a rule that leaves an output nothing writes gives whatever its buffer held, at times the expected
                // value itself: a probe then shows the symptom when any of three runs does
                let again = search(3);
                found = Culprits { runs: found.runs + again.runs, ..again };
            }
            c.runs += found.runs;
            if found.passes.is_empty() {
                let why = found.note.unwrap_or_default();
                c.note = Some(format!("{container}: no set of its rules explains the symptom ({why})"));
                continue;
            }
            c.passes = others.into_iter().chain(found.passes).collect();
        }
        c
    }
}
