//! A test-only target that misbehaves on request: a model's metadata `oatest.fault` = `segfault`, `abort`,
//! `hang`, `oom` or `exit` makes the worker do exactly that (`exit_later`: it dies 100 ms after answering; `crash_once`: only the first optimized run crashes); `wrong` shifts the optimized outputs by 1 (an
//! inconsistency), `noisy` adds run-to-run noise in every configuration (nondeterminism); otherwise it echoes
//! its inputs as outputs. With `oatest.fault.needs` = `FuseA;FuseB` the fault is an optimizer bug with known
//! culprits: every optimized run "fires" one pass `Fuse<Op>` per op type in the graph (unless disabled), and
//! the fault happens only when every needed pass fired.

use super::{Config, NamedTensor, Outcome, Status, Target};
use crate::graph::onnx::decode_model;

pub struct FaultTarget;

impl Target for FaultTarget {
    fn name(&self) -> &'static str {
        "fault"
    }
    fn version(&self) -> String {
        "test".into()
    }
    fn default_configs(&self) -> Vec<super::Config> {
        vec![Config::level(super::Level::Disable), Config::level(super::Level::All)]
    }
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let m = match decode_model(model) {
            Ok(m) => m,
            Err(e) => return Outcome::failed(config, Status::Error { message: e.to_string() }, 0.0),
        };
        let meta = |key: &str| m.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let needs: Option<Vec<&str>> =
            meta("oatest.fault.needs").map(|n| n.split(';').filter(|p| !p.is_empty()).collect());
        let passes_fired: Vec<String> = match (&needs, config.level) {
            (_, super::Level::Disable) => Vec::new(),
            (None, _) => vec!["FaultPass".to_string()],
            (Some(_), _) => {
                let ops: std::collections::BTreeSet<String> =
                    m.graph.node_ids().map(|id| format!("Fuse{}", m.graph.node(id).op.name)).collect();
                ops.into_iter().filter(|p| !config.disabled.contains(p)).collect()
            }
        };
        // like ORT's transformers, every pass runs whatever the graph: one per op the catalog knows
        let passes_ran: Vec<String> = if config.level == super::Level::Disable {
            Vec::new()
        } else {
            std::iter::once("FaultPass".to_string())
                .chain(crate::ops::registry().iter().map(|s| format!("Fuse{}", s.name())))
                .filter(|p| !config.disabled.contains(p))
                .collect()
        };
        let triggered = needs.as_ref().is_none_or(|n| n.iter().all(|p| passes_fired.iter().any(|f| f == p)));
        let fault = meta("oatest.fault").filter(|_| triggered);
        // `crash_once`: the first optimized run crashes, later ones do not (a flaky crash); the file named by
        // `oatest.fault.marker` remembers the first run across worker restarts
        let fault = match (fault, meta("oatest.fault.marker")) {
            (Some("crash_once"), Some(marker)) if config.level != super::Level::Disable => {
                if std::fs::OpenOptions::new().write(true).create_new(true).open(marker).is_ok() {
                    Some("segfault")
                } else {
                    None
                }
            }
            (f, _) => f,
        };
        // `exit_later`: answers, then the worker dies while idle (a death no test caused)
        if fault == Some("exit_later") {
            std::thread::spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                std::process::exit(3)
            });
        }
        // only optimized configurations misbehave, as an optimizer bug would
        if config.level != super::Level::Disable {
            match fault {
                Some("segfault") => unsafe {
                    std::ptr::null_mut::<u64>().write_volatile(1);
                },
                Some("abort") => std::process::abort(),
                Some("hang") => loop {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                },
                Some("oom") => {
                    let mut hog: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hog.push(vec![0u8; 64 << 20]); // address space, not touched pages: fails fast under the limit
                    }
                }
                Some("exit") => std::process::exit(3),
                _ => {}
            }
        }
        let shift = match fault {
            Some("wrong") if config.level != super::Level::Disable => 1.0,
            Some("noisy") => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos() % 1000 + 1) as f64,
            _ => 0.0,
        };
        let outputs = inputs
            .iter()
            .map(|t| match t.tensor.to_f64s() {
                Some(v) if shift != 0.0 && t.tensor.dtype.is_float() => {
                    let dims: Vec<usize> = t.tensor.dims.iter().map(|&d| d as usize).collect();
                    let v: Vec<f64> = v.iter().map(|x| x + shift).collect();
                    NamedTensor {
                        name: t.name.clone(),
                        tensor: crate::graph::Tensor::from_f64s(t.tensor.dtype, &dims, &v),
                    }
                }
                _ => t.clone(),
            })
            .collect();
        Outcome {
            target: "fault".into(),
            config: config.clone(),
            status: Status::Ok,
            outputs,
            passes_ran,
            passes_fired,
            time_ms: 0.0,
        }
    }
}
