//! What two runs may differ by, per element type: floats `|a-b| <= atol + rtol*|ref|` with per-dtype defaults
//! (overridable), 16-bit floats also within a number of ULPs, integer outputs of quantized ops within a number of
//! quantization steps; other integers exactly. One small `Copy` value, serialized in checkpoints and repro.py.

use crate::graph::DType;
use serde::{Deserialize, Serialize};

/// The per-dtype defaults `(dtype, atol, rtol)`, measured (docs/BENCHMARKS.md, "Tolerance"): for float32 and
/// float64 about 100 machine epsilons absolutely (cancellation of magnitude-1 intermediates) and 1000 relatively
/// (reordered sums of fused kernels); 16-bit floats one ULP of 1.0 absolutely, relatively their ULPs.
pub const DEFAULTS: [(DType, f64, f64); 4] =
    [(DType::F32, 1e-5, 1e-4), (DType::F64, 1e-13, 1e-12), (DType::F16, 1e-3, 0.0), (DType::BF16, 1e-2, 0.0)];

/// Default ULPs a float16/bfloat16 element may differ by (besides its atol/rtol).
pub const DEFAULT_ULPS: u32 = 2;
/// Default quantization steps an integer output of a quantized op may differ by.
pub const DEFAULT_STEPS: u32 = 1;

/// The tolerance of the inconsistency oracle. `atol`/`rtol` override every float dtype's default when set.
/// Deserializes from a bare number too (the Chebyshev tolerance of older checkpoints and manifests: an atol).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "Repr")]
pub struct Tolerance {
    pub atol: Option<f64>,
    pub rtol: Option<f64>,
    /// ULPs a float16/bfloat16 element may differ by.
    pub ulps: u32,
    /// Quantization steps an integer output of a quantized op (`super::quantized_outputs`) may differ by.
    pub steps: u32,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Repr {
    Legacy(f64),
    Fields {
        #[serde(default)]
        atol: Option<f64>,
        #[serde(default)]
        rtol: Option<f64>,
        #[serde(default = "default_ulps")]
        ulps: u32,
        #[serde(default = "default_steps")]
        steps: u32,
    },
}

fn default_ulps() -> u32 {
    DEFAULT_ULPS
}

fn default_steps() -> u32 {
    DEFAULT_STEPS
}

impl From<Repr> for Tolerance {
    fn from(r: Repr) -> Tolerance {
        match r {
            Repr::Legacy(atol) => Tolerance { atol: Some(atol), ..Tolerance::default() },
            Repr::Fields { atol, rtol, ulps, steps } => Tolerance { atol, rtol, ulps, steps },
        }
    }
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance { atol: None, rtol: None, ulps: DEFAULT_ULPS, steps: DEFAULT_STEPS }
    }
}

/// The float dtype whose rule applies to an element of `dtype` (complex parts: their float type).
fn float_kind(dtype: DType) -> Option<DType> {
    match dtype {
        DType::C64 => Some(DType::F32),
        DType::C128 => Some(DType::F64),
        d if d.is_float() => Some(d),
        _ => None,
    }
}

impl Tolerance {
    /// Bit-identical outputs only.
    pub const EXACT: Tolerance = Tolerance { atol: Some(0.0), rtol: Some(0.0), ulps: 0, steps: 0 };

    /// Checks the values a user gave.
    pub fn validate(self) -> anyhow::Result<Tolerance> {
        for (flag, v) in [("--atol", self.atol), ("--rtol", self.rtol)] {
            if let Some(x) = v {
                anyhow::ensure!(x >= 0.0 && x.is_finite(), "{flag} must be a finite number >= 0, got {x}");
            }
        }
        Ok(self)
    }

    /// The tolerance for outputs of `config`: at least the absolute tolerance its named parts ask for (an
    /// approximating opt-in pass such as GeluApproximation, `compiler::named`).
    pub fn for_config(self, config: &crate::compiler::Config) -> Tolerance {
        match crate::compiler::named::min_atol(config) {
            Some(min) if self.atol.is_none_or(|a| a < min) => Tolerance { atol: Some(min), ..self },
            _ => self,
        }
    }

    /// `(atol, rtol)` for elements of a float (or complex) dtype; `None` for the others.
    pub fn float_rule(self, dtype: DType) -> Option<(f64, f64)> {
        let kind = float_kind(dtype)?;
        let (_, atol, rtol) = DEFAULTS.iter().find(|(d, _, _)| *d == kind).copied().unwrap_or(DEFAULTS[0]);
        Some((self.atol.unwrap_or(atol), self.rtol.unwrap_or(rtol)))
    }

    /// Whether a finite float element `o` is close enough to its finite reference `r`; `ulps` is their ULP
    /// distance for 16-bit floats.
    pub fn allows(self, dtype: DType, r: f64, o: f64, ulps: Option<u64>) -> bool {
        let Some((atol, rtol)) = self.float_rule(dtype) else { return r == o };
        (r - o).abs() <= atol + rtol * r.abs() || ulps.is_some_and(|u| u <= u64::from(self.ulps))
    }

    /// Whether a finite float element `o` of a dequantized output (one quantization step = `step`) is within the
    /// allowed steps of its finite reference `r`, give or take the dtype's float rule.
    pub fn allows_steps(self, dtype: DType, r: f64, o: f64, step: f64) -> bool {
        let (atol, rtol) = self.float_rule(dtype).unwrap_or_default();
        (r - o).abs() <= f64::from(self.steps) * step + atol + rtol * r.abs()
    }

    /// The rule in words, for reports.
    pub fn describe(self) -> String {
        let rules: Vec<String> = DEFAULTS
            .iter()
            .map(|(d, _, _)| {
                let (a, r) = self.float_rule(*d).unwrap_or_default();
                format!("{} {a:e} + {r:e}·|ref|", d.name())
            })
            .collect();
        format!(
            "|diff| <= atol + rtol·|ref| ({}); 16-bit floats also within {} ULPs; quantized outputs (also dequantized) within {} steps; \
             other integers exact; NaN/Inf must match in kind",
            rules.join(", "),
            self.ulps,
            self.steps
        )
    }

    /// The resolved rule as repro.py and the exported suite read it: `{dtype: [atol, rtol], "ulps", "steps"}`.
    pub fn table(self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (d, _, _) in DEFAULTS {
            let (a, r) = self.float_rule(d).unwrap_or_default();
            m.insert(d.name(), serde_json::json!([a, r]));
        }
        m.insert("ulps".into(), self.ulps.into());
        m.insert("steps".into(), self.steps.into());
        serde_json::Value::Object(m)
    }
}

/// The ULP distance of two 16-bit float bit patterns (sign-magnitude, so +0 and -0 are 0 apart).
pub fn ulp_distance16(a: u16, b: u16) -> u64 {
    let key = |x: u16| {
        let m = i64::from(x & 0x7fff);
        if x & 0x8000 != 0 {
            -m
        } else {
            m
        }
    };
    key(a).abs_diff(key(b))
}
