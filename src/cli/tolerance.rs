//! The oracle's tolerance flags, shared by fuzz, run, triage, reduce and export: each given flag overrides one
//! part of a base `Tolerance` (the defaults, or a campaign's own).

use crate::oracle::Tolerance;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct ToleranceArgs {
    /// Absolute tolerance of every float dtype, `|a-b| <= atol + rtol*|ref|` (default per dtype: float32 1e-5,
    /// float64 1e-13, float16 1e-3, bfloat16 1e-2); `--tolerance` is the older name.
    #[arg(long, visible_alias = "tolerance")]
    pub atol: Option<f64>,
    /// Relative tolerance of every float dtype (default per dtype: float32 1e-4, float64 1e-12, 16-bit 0).
    #[arg(long)]
    pub rtol: Option<f64>,
    /// ULPs a float16/bfloat16 element may also differ by [default: 2].
    #[arg(long)]
    pub ulps: Option<u32>,
    /// Quantization steps an integer output of a quantized op (QuantizeLinear, QLinear*, ...) may differ by
    /// [default: 1].
    #[arg(long)]
    pub steps: Option<u32>,
}

impl ToleranceArgs {
    /// `base` with the given flags applied, validated.
    pub fn over(&self, base: Tolerance) -> anyhow::Result<Tolerance> {
        Tolerance {
            atol: self.atol.or(base.atol),
            rtol: self.rtol.or(base.rtol),
            ulps: self.ulps.unwrap_or(base.ulps),
            steps: self.steps.unwrap_or(base.steps),
        }
        .validate()
    }

    /// The defaults with the given flags applied.
    pub fn tolerance(&self) -> anyhow::Result<Tolerance> {
        self.over(Tolerance::default())
    }
}
