//! A test-only target that misbehaves on request: a model's metadata `oatest.fault` = `segfault`, `abort`,
//! `hang`, `oom` or `exit` makes the worker do exactly that (`exit_later`: it dies 100 ms after answering;
//! `crash_once`: only the first optimized run crashes). Value faults shift float outputs: `wrong` the optimized
//! run's by +1, `wrong_reference` the unoptimized run's by +1 (the optimized run is right), `wrong_both` +1 and
//! -1, `skew` +k and -k (k = `oatest.fault.skew`), `nan_to_inf` turns the optimized run's NaNs into +Inf;
//! `noisy` shifts every run by one more than the last, in every configuration (nondeterminism), `noisy_wrong` is
//! `wrong` on a reference that varies from run to run by a few 1e-7 (within the tolerance, but not bit for bit the
//! same); `float64`: the optimized run computes in float64 (a rewrite nearer the exact values). Outputs are the inputs echoed, or,
//! with `oatest.fault.compute` = `onnx`, the model's true values (onnx.reference, `python` feature). With
//! `oatest.fault.needs` = `FuseA;FuseB` the fault is an optimizer bug with known culprits: every optimized
//! run "fires" one pass `Fuse<Op>` per op type in the graph (unless disabled), and the fault happens only
//! when every needed pass fired (`FuseA|FuseB`: either). `oatest.fault.without` = `Op=fault[;Op=fault]`: in a
//! graph without an `Op` node the fault is that other one (a reduction that removes it would slide to another bug). `leak`: every run keeps 16 MiB
//! for the life of the worker process (a leaking compiler; the answers stay right). `stale`: `wrong` in every
//! optimized run but a process's first (a value left over from an earlier run: a fresh process does not show it).

use super::{Config, NamedTensor, Outcome, Status, Target};
use crate::graph::onnx::decode_model;

/// `noisy`: every run of the process shifts by one more than the last, so two runs never agree and a deviation
/// is never far beyond the references' spread (a clock's digits could make two runs agree).
fn noisy_shift() -> f64 {
    static NOISY_RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NOISY_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as f64
}

/// `stale`: the optimized runs of this process so far.
static STALE_RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[derive(Default)]
pub struct FaultTarget {
    /// The semantic reference, loaded for the first model that asks for true values.
    #[cfg(feature = "python")]
    semantic: Option<super::onnxref::OnnxRefTarget>,
}

impl FaultTarget {
    /// The model's true output values (onnx.reference), or the status of the failed evaluation.
    fn true_values(
        &mut self,
        model: &[u8],
        inputs: &[NamedTensor],
        config: &Config,
    ) -> Result<Vec<NamedTensor>, Status> {
        #[cfg(feature = "python")]
        {
            if self.semantic.is_none() {
                let loaded = super::onnxref::OnnxRefTarget::new();
                self.semantic = Some(loaded.map_err(|e| Status::Error { message: format!("{e:#}") })?);
            }
            let o = self.semantic.as_mut().expect("loaded").run(model, inputs, config);
            match o.status {
                Status::Ok => Ok(o.outputs),
                st => Err(Status::Error { message: st.message() }),
            }
        }
        #[cfg(not(feature = "python"))]
        {
            let _ = (model, inputs, config);
            Err(Status::Error { message: "oatest.fault.compute = onnx needs the `python` feature".into() })
        }
    }
}

/// A float tensor's values mapped by `f` and stored as `dtype`; any other tensor, or one `f` leaves as it is in
/// its own dtype, unchanged.
fn map_floats(t: NamedTensor, dtype: crate::graph::DType, f: impl Fn(f64) -> f64) -> NamedTensor {
    match t.tensor.to_f64s() {
        Some(v) if t.tensor.dtype.is_float() => {
            let mapped: Vec<f64> = v.iter().map(|&x| f(x)).collect();
            let same = dtype == t.tensor.dtype && mapped.iter().zip(&v).all(|(a, b)| a.to_bits() == b.to_bits());
            if same {
                return t;
            }
            let dims: Vec<usize> = t.tensor.dims.iter().map(|&d| d as usize).collect();
            NamedTensor { name: t.name, tensor: crate::graph::Tensor::from_f64s(dtype, &dims, &mapped) }
        }
        _ => t,
    }
}

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
        // `A;B` needs both to fire, `A|B` either (two passes each faulty alone)
        let fired = |alternatives: &&str| alternatives.split('|').any(|p| passes_fired.iter().any(|f| f == p));
        let triggered = needs.as_ref().is_none_or(|n| n.iter().all(fired));
        // `oatest.fault.without` = `Op=fault[;Op=fault]`: a graph without an `Op` node fails that other way instead
        let without = meta("oatest.fault.without").and_then(|w| {
            w.split(';')
                .filter_map(|w| w.split_once('='))
                .find(|(op, _)| !m.graph.node_ids().any(|id| m.graph.node(id).op.name == *op))
        });
        let fault = meta("oatest.fault").filter(|_| triggered).map(|f| without.map_or(f, |(_, other)| other));
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
        if fault == Some("leak") {
            static KEPT: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
            KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(vec![1u8; 16 << 20]);
            // touched: resident
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
                // an optimizer that breaks the graph it rewrote: an error, after its passes reported firing
                Some("error") => {
                    let message = "fault: node 'n_7' reads value 'v_3', which nothing defines".to_string();
                    let mut o = Outcome::failed(config, Status::Error { message }, 0.0);
                    o.passes_fired = passes_fired.clone();
                    return o;
                }
                _ => {}
            }
        }
        // value faults: (shift of the unoptimized run, and of an optimized run in which the fault happens); an
        // optimized run without the fault computes what the unoptimized one does
        let skew = meta("oatest.fault.skew").and_then(|k| k.parse::<f64>().ok()).unwrap_or(6e-4);
        let (plain, faulty) = match meta("oatest.fault") {
            Some("wrong") | Some("noisy_wrong") | Some("stale") => (0.0, 1.0),
            Some("wrong_reference") => (1.0, 0.0),
            Some("wrong_both") => (1.0, -1.0),
            Some("skew") => (skew, -skew),
            _ => (0.0, 0.0),
        };
        let optimized = config.level != super::Level::Disable;
        let fault = match fault {
            Some("stale") if optimized && STALE_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0 => None,
            f => f,
        };
        let shift = match fault {
            Some("noisy") => noisy_shift(),
            Some(_) if optimized => faulty,
            _ => plain,
        };
        // `noisy_wrong`: every run also differs from the last by a little, far within the tolerance (a reference
        // that is not bit-for-bit deterministic, as parallel reductions are)
        let shift = if meta("oatest.fault") == Some("noisy_wrong") {
            static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let k = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 16 + 1;
            shift + k as f64 * 2.5e-7
        } else {
            shift
        };
        let nan_to_inf = optimized && fault == Some("nan_to_inf");
        // `float64`: the optimized run computes in float64 (rounded to the declared types at the end), as a
        // rewrite that changes the order of float operations may come closer to the exact values
        let mut evaluated = config.clone();
        if optimized && fault == Some("float64") {
            evaluated.disabled.push(super::FLOAT_ROUNDING.to_string());
        }
        let values = if meta("oatest.fault.compute") == Some("onnx") {
            match self.true_values(model, inputs, &evaluated) {
                Ok(v) => v,
                Err(status) => return Outcome::failed(config, status, 0.0),
            }
        } else {
            inputs.to_vec()
        };
        // (values computed in float64 are rounded to the types the model declares)
        let declared = |t: &NamedTensor| m.graph.tensor_type(&t.name).map_or(t.tensor.dtype, |ty| ty.dtype);
        let outputs = values
            .into_iter()
            .map(|t| {
                let dtype = declared(&t);
                map_floats(t, dtype, |x| if nan_to_inf && x.is_nan() { f64::INFINITY } else { x + shift })
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
