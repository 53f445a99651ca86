//! Named configurations beyond levels: ONNX Runtime session configuration entries that switch opt-in passes on
//! or default passes off (`data/ort-configs.toml`, embedded), used as `LEVEL+NAME` in configurations, and the
//! rotation of extra configurations a default ORT campaign adds.

use super::{Config, Level};
use crate::graph::{Dim, Graph, TensorType, ValueType};
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::OnceLock;

/// The embedded data file (its path in the repository, for messages).
const FILE: &str = "data/ort-configs.toml";
const TEXT: &str = include_str!("../../data/ort-configs.toml");

/// One named configuration, as the data file writes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Named {
    pub name: String,
    /// Session configuration entries, `key=value`.
    pub entries: Vec<String>,
    /// Passes the entries add to a session.
    #[serde(default)]
    pub on: Vec<String>,
    /// Passes the entries take out of a session.
    #[serde(default)]
    pub off: Vec<String>,
    /// Whether outputs under it are compared with the unoptimized run (false: it changes results by design).
    pub compare: bool,
    /// The smallest absolute tolerance of float outputs under it (an approximation's error).
    #[serde(default)]
    pub atol: Option<f64>,
    /// The semantic reference's approximations that model what it changes by design (`onnxref`'s
    /// [`super::APPROXIMATE`] pseudo-passes), tried as growing prefixes.
    #[serde(default)]
    pub approximates: Vec<String>,
    pub about: String,
}

impl Named {
    /// The entries as (key, value) pairs.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.entries.iter().filter_map(|e| e.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    rotation: Vec<String>,
    config: Vec<Named>,
}

/// The parsed data file (checked once: names are words, entries are `key=value`, rotation entries parse).
fn file() -> &'static File {
    static FILE_DATA: OnceLock<File> = OnceLock::new();
    FILE_DATA.get_or_init(|| {
        let f: File = toml::from_str(TEXT).unwrap_or_else(|e| panic!("{FILE} (embedded) is not valid: {e}"));
        for n in &f.config {
            let word = !n.name.is_empty() && n.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            assert!(word, "{FILE}: name '{}' is not a word", n.name);
            for e in &n.entries {
                assert!(
                    e.split_once('=').is_some_and(|(k, _)| !k.is_empty()),
                    "{FILE}: {}: '{e}' is not key=value",
                    n.name
                );
                assert!(
                    e.split_once('=').is_none_or(|(k, v)| !k.starts_with(super::FREE_DIM) || v.parse::<i64>().is_ok()),
                    "{FILE}: {}: '{e}' gives a free dimension no integer size",
                    n.name
                );
            }
        }
        f
    })
}

/// The model metadata key by which a test model asks to be optimized under a named configuration (its value a
/// name of the data file): a compiler test of an opt-in pass (DQMatMulNBitsFusion) says so, and the patterns
/// extracted from it and the tests spliced from those keep it ([`crate::pattern::is_setting`]). Extraction and
/// the usability check optimize such a model at `all+NAME`; a campaign runs `all+NAME` on every such test.
pub const SETTING: &str = "oatest.config";

/// The named configuration a model's metadata asks for, if any ([`SETTING`]); an unknown name is an error.
pub fn asked(metadata: &[(String, String)]) -> anyhow::Result<Option<&'static Named>> {
    metadata.iter().find(|(k, _)| k == SETTING).map(|(_, v)| lookup(v)).transpose()
}

/// The name of the named configuration a model's metadata asks for, if it names a known one.
pub fn asked_name(metadata: &[(String, String)]) -> Option<String> {
    asked(metadata).ok().flatten().map(|n| n.name.clone())
}

/// `all+NAME` for the named configuration `name` (what a model that asks for it is optimized with).
pub fn all_with(name: &str) -> anyhow::Result<Config> {
    Config::parse(&format!("all+{name}"))
}

/// The `all` configuration for a model with `metadata`: `all+NAME` when it asks for a named configuration.
pub fn all_for(metadata: &[(String, String)]) -> anyhow::Result<Config> {
    match asked(metadata)? {
        Some(n) => all_with(&n.name),
        None => Ok(Config::level(Level::All)),
    }
}

/// Every named configuration, in file order.
pub fn all() -> &'static [Named] {
    &file().config
}

/// The named configuration `name`.
pub fn lookup(name: &str) -> anyhow::Result<&'static Named> {
    all().iter().find(|n| n.name == name).ok_or_else(|| {
        let names: Vec<&str> = all().iter().map(|n| n.name.as_str()).collect();
        anyhow::anyhow!(
            "unknown named configuration '{name}' (known: {}; see oatest run --list-configs)",
            names.join(", ")
        )
    })
}

/// Splits session entries into the named configurations whose entries they hold (in file order) and the rest.
pub fn names_of(options: &[(String, String)]) -> (Vec<&'static str>, Vec<(String, String)>) {
    let mut rest: Vec<(String, String)> = options.to_vec();
    let mut names = Vec::new();
    for n in all() {
        let pairs = n.pairs();
        if !pairs.is_empty() && pairs.iter().all(|p| rest.contains(p)) {
            rest.retain(|p| !pairs.contains(p));
            names.push(n.name.as_str());
        }
    }
    (names, rest)
}

/// The named configurations a configuration holds.
pub fn of(config: &Config) -> Vec<&'static Named> {
    names_of(&config.options).0.into_iter().filter_map(|n| lookup(n).ok()).collect()
}

/// Whether outputs under `config` are compared with the unoptimized run (no named part changes them by design).
pub fn compared(config: &Config) -> bool {
    of(config).iter().all(|n| n.compare)
}

/// The smallest absolute float tolerance the named parts of `config` ask for.
pub fn min_atol(config: &Config) -> Option<f64> {
    of(config).iter().filter_map(|n| n.atol).reduce(f64::max)
}

/// The approximations `config` makes by design (see [`Named::approximates`]), in the data file's order.
pub fn approximations(config: &Config) -> Vec<String> {
    of(config).iter().flat_map(|n| n.approximates.iter().cloned()).collect()
}

/// The size a named configuration overrides the symbolic dim `name` to (`free_dim:NAME=SIZE`), if one does: what
/// generated inputs give that dim, so that a session with the override accepts them.
pub fn free_dim_size(name: &str) -> Option<i64> {
    let key = format!("{}{name}", super::FREE_DIM);
    all().iter().flat_map(|n| n.pairs()).find(|(k, _)| *k == key).and_then(|(_, v)| v.parse().ok())
}

/// `g` with every symbolic graph-input dim a named configuration overrides at its size: what the op catalog,
/// whose shapes are static, infers types on (triage's reduction of a test with freed input dims); `g` itself
/// when it has no named symbolic input dims.
pub fn at_override_sizes(g: &Graph) -> Cow<'_, Graph> {
    if !g.has_symbolic_inputs() {
        return Cow::Borrowed(g);
    }
    let mut fixed = g.clone();
    for input in &g.inputs {
        if let Some(ValueType::Tensor(TensorType { shape: Some(dims), .. })) = fixed.types.get_mut(input) {
            for d in dims.iter_mut() {
                if let Some(size) = match d {
                    Dim::Sym(name) => free_dim_size(name),
                    Dim::Fixed(_) => None,
                } {
                    *d = Dim::Fixed(size);
                }
            }
        }
    }
    Cow::Owned(fixed)
}

/// The rotation of extra optimized configurations for a target of `version` (ORT_ENABLE_LAYOUT needs 1.22).
pub fn rotation(version: &str) -> Vec<Config> {
    let layout = version_at_least(version, (1, 22));
    file()
        .rotation
        .iter()
        .map(|s| Config::parse(s).unwrap_or_else(|e| panic!("{FILE}: rotation: {e:#}")))
        .filter(|c| c.level != Level::Layout || layout)
        .collect()
}

/// Whether a `major.minor[.patch]` version is at least `min` (unparsable: no).
fn version_at_least(version: &str, min: (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= min,
        _ => false,
    }
}

/// `--list-configs`: one line per named configuration, then the rotation.
pub fn listing() -> String {
    let mut s = String::from("named configurations (use as LEVEL+NAME, e.g. all+gelu_approx):\n");
    for n in all() {
        let switch = [("on", &n.on), ("off", &n.off)]
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(w, p)| format!("{w}: {}", p.join(", ")))
            .collect::<Vec<_>>()
            .join("; ");
        let judged = if n.compare { "outputs compared" } else { "failures only" };
        s += &format!("  {:<16} {}\n  {:<16}   {} [{judged}{}]\n", n.name, n.about, "", n.entries.join(" "), {
            if switch.is_empty() {
                String::new()
            } else {
                format!("; {switch}")
            }
        });
    }
    let rot: Vec<String> = file().rotation.clone();
    s += &format!("rotation of a default ORT campaign (--rotate-every): {}\n", rot.join(", "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_names_round_trip() {
        assert!(all().len() >= 8);
        assert!(!rotation("1.31.1").is_empty());
        assert!(rotation("1.31.1").iter().any(|c| c.level == Level::Layout));
        assert!(!rotation("1.19.2").iter().any(|c| c.level == Level::Layout));
        let c = Config::parse("all+gelu_approx").unwrap();
        assert_eq!(c.options, [("optimization.enable_gelu_approximation".to_string(), "1".to_string())]);
        assert_eq!(c.to_string(), "all+gelu_approx");
        assert_eq!(min_atol(&c), Some(1e-3));
        assert!(!compared(&Config::parse("all+cast_chain").unwrap()));
        assert!(compared(&Config::parse("all").unwrap()));
        assert!(lookup("nope").is_err());
        let free = Config::parse("all+free_dims").unwrap();
        assert!(!free.dim_overrides().is_empty());
        assert_eq!(free.to_string(), "all+free_dims");
        for (name, size) in free.dim_overrides() {
            assert_eq!(free_dim_size(&name), Some(size));
        }
        assert!(rotation("1.31.1").contains(&free));
    }

    #[test]
    fn a_model_asks_for_a_named_configuration_in_its_metadata() {
        let meta = |v: &str| vec![("author".to_string(), "x".to_string()), (SETTING.to_string(), v.to_string())];
        assert_eq!(all_for(&meta("dq_matmulnbits")).unwrap().to_string(), "all+dq_matmulnbits");
        assert_eq!(all_for(&[]).unwrap(), Config::level(Level::All));
        let err = all_for(&meta("nope")).unwrap_err().to_string();
        assert!(err.contains("unknown named configuration 'nope'"), "{err}");
    }
}
