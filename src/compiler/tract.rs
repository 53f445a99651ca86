//! tract (pure Rust, needs nothing installed): `disable` = decluttered model, `all` = `into_optimized`.
//! A panic inside tract is a crash of the compiler, reported as such.

use super::{Config, Level, NamedTensor, Outcome, Status, Target};
use crate::graph::{DType, Tensor, TensorData};
use std::time::Instant;
use tract_onnx::prelude::*;

pub struct TractTarget;

impl TractTarget {
    pub fn new() -> TractTarget {
        TractTarget
    }
}

impl Default for TractTarget {
    fn default() -> Self {
        Self::new()
    }
}

fn datum(d: DType) -> Option<DatumType> {
    Some(match d {
        DType::F32 => DatumType::F32,
        DType::F64 => DatumType::F64,
        DType::F16 => DatumType::F16,
        DType::I8 => DatumType::I8,
        DType::U8 => DatumType::U8,
        DType::I16 => DatumType::I16,
        DType::U16 => DatumType::U16,
        DType::I32 => DatumType::I32,
        DType::U32 => DatumType::U32,
        DType::I64 => DatumType::I64,
        DType::U64 => DatumType::U64,
        DType::Bool => DatumType::Bool,
        _ => return None,
    })
}

fn dtype(d: DatumType) -> Option<DType> {
    Some(match d {
        DatumType::F32 => DType::F32,
        DatumType::F64 => DType::F64,
        DatumType::F16 => DType::F16,
        DatumType::I8 => DType::I8,
        DatumType::U8 => DType::U8,
        DatumType::I16 => DType::I16,
        DatumType::U16 => DType::U16,
        DatumType::I32 => DType::I32,
        DatumType::U32 => DType::U32,
        DatumType::I64 => DType::I64,
        DatumType::U64 => DType::U64,
        DatumType::Bool => DType::Bool,
        _ => return None,
    })
}

fn ops(m: &TypedModel) -> Vec<String> {
    m.nodes().iter().map(|n| n.op.name().to_string()).collect()
}

/// Runs the model; `fired` gets `declutter` / `optimize` when that stage changed the graph.
fn compile_and_run(
    model: &[u8],
    inputs: &[NamedTensor],
    level: Level,
    fired: &mut Vec<String>,
) -> TractResult<Vec<NamedTensor>> {
    let mut m = tract_onnx::onnx().model_for_read(&mut &model[..])?;
    let mut values: TVec<TValue> = tvec![];
    let outlets = m.input_outlets()?.to_vec();
    for (i, outlet) in outlets.iter().enumerate() {
        let name = m.node(outlet.node).name.clone();
        let t = inputs.iter().find(|t| t.name == name).ok_or_else(|| anyhow::anyhow!("no value for input '{name}'"))?;
        let dt = datum(t.tensor.dtype)
            .ok_or_else(|| anyhow::anyhow!("input '{name}': unsupported type {}", t.tensor.dtype))?;
        let shape: Vec<usize> = t.tensor.dims.iter().map(|&d| d as usize).collect();
        let raw = t.tensor.raw().ok_or_else(|| anyhow::anyhow!("input '{name}': no raw data"))?;
        // SAFETY: raw holds exactly numel * size_of(dt) bytes in little-endian layout (checked on import).
        let value = unsafe { tract_onnx::prelude::Tensor::from_raw_dt(dt, &shape, raw)? };
        m.set_input_fact(i, InferenceFact::dt_shape(dt, &shape))?;
        values.push(value.into());
    }
    if !matches!(level, Level::Disable | Level::All) {
        anyhow::bail!("tract has no optimization level '{}' (use disable or all)", level.name());
    }
    let mut typed = m.into_typed()?;
    let before = ops(&typed);
    typed.declutter()?;
    if ops(&typed) != before {
        fired.push("declutter".into());
    }
    if level == Level::All {
        let before = ops(&typed);
        typed.optimize()?;
        if ops(&typed) != before {
            fired.push("optimize".into());
        }
    }
    let names: Vec<String> = typed
        .output_outlets()?
        .iter()
        .map(|o| typed.outlet_label(*o).map(str::to_string).unwrap_or_else(|| typed.node(o.node).name.clone()))
        .collect();
    let plan = typed.into_runnable()?;
    let out = plan.run(values)?;
    out.into_iter()
        .zip(names)
        .map(|(v, name)| {
            let d = dtype(v.datum_type())
                .ok_or_else(|| anyhow::anyhow!("output '{name}' has type {:?}", v.datum_type()))?;
            let dims = v.shape().iter().map(|&x| x as i64).collect();
            Ok(NamedTensor { name, tensor: Tensor { dtype: d, dims, data: TensorData::Raw(v.as_bytes().to_vec()) } })
        })
        .collect()
}

impl Target for TractTarget {
    fn name(&self) -> &'static str {
        "tract"
    }
    fn version(&self) -> String {
        env!("OATEST_TRACT_VERSION").to_string()
    }
    fn default_configs(&self) -> Vec<Config> {
        vec![Config::level(Level::Disable), Config::level(Level::All)]
    }
    fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        let start = Instant::now();
        let mut passes_fired = Vec::new();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compile_and_run(model, inputs, config.level, &mut passes_fired)
        }));
        let time_ms = start.elapsed().as_secs_f64() * 1e3;
        let (status, outputs) = match res {
            Ok(Ok(out)) => (Status::Ok, out),
            Ok(Err(e)) => (Status::Error { message: format!("{e:#}") }, Vec::new()),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                (Status::Crash { signal: None, message: format!("tract panicked: {msg}") }, Vec::new())
            }
        };
        Outcome {
            target: "tract".into(),
            config: config.clone(),
            status,
            outputs,
            passes_fired,
            passes_ran: Vec::new(),
            time_ms,
        }
    }
}
