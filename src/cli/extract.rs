//! `oatest extract ort` / `oatest extract ort-transformers` / `oatest extract tvm`: cut verified
//! optimization-aware patterns from captured graphs into a pattern library.

use crate::compiler::TargetKind;
use crate::pattern::library::{extract_ort, extract_tvm, OrtExtraction, TvmExtraction};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum ExtractCmd {
    /// From ONNX Runtime's optimizer test models.
    Ort(OrtArgs),
    /// From the whole models of ort-transformers' library (what ORT's transformers tests hand to
    /// `optimize_model`, captured by python/oatest_ortx_extract.py): block and subgraph patterns of each fusion,
    /// written beside them, each still firing its fusion in the Python optimizer under its model's settings.
    OrtTransformers(OrtxArgs),
    /// From TVM's Relax transform tests (tests/python/relax/test_transform_*.py), run with a capture plugin.
    Tvm(TvmArgs),
}

#[derive(Args, Debug)]
pub struct TvmArgs {
    /// A test file, or a directory whose files matching --include are run (TVM's tests/python/relax).
    #[arg(long)]
    pub tests: PathBuf,
    /// The Python with apache-tvm and pytest (default: .venv/bin/python of the project, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The pattern library to (re)write.
    #[arg(long, default_value = "patterns/tvm")]
    pub out: PathBuf,
    /// Test files run at once (each in its own pytest process: a TVM crash loses one file, not the run).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Per-file time limit in seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout_secs: u64,
    /// Which test files of a --tests directory run (file-name patterns with `*`; repeatable).
    #[arg(long = "include", default_value = "test_transform*.py")]
    pub include: Vec<String>,
}

#[derive(Args, Debug)]
pub struct OrtxArgs {
    /// A directory searched recursively for whole-model patterns (and models) to cut from.
    #[arg(long, default_value = "patterns/ort-transformers")]
    pub models: PathBuf,
    /// The pattern library to (re)write: its cut patterns are replaced, its whole models left alone.
    #[arg(long, default_value = "patterns/ort-transformers")]
    pub out: PathBuf,
    #[arg(long)]
    pub jobs: Option<usize>,
}

#[derive(Args, Debug)]
pub struct OrtArgs {
    /// A directory searched recursively for .onnx models (default, when neither --models nor --pytest is given: the vendored tests/data/ort-transform-testdata).
    #[arg(long)]
    pub models: Option<PathBuf>,
    /// A pytest test path (e.g. ORT's onnxruntime/test/python/quantization): its tests run with the capture
    /// plugin from python/, and every model they open a session on is extracted from.
    #[arg(long)]
    pub pytest: Option<PathBuf>,
    /// The Python that runs --pytest (default: .venv/bin/python of the project, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// The pattern library to (re)write.
    #[arg(long, default_value = "patterns/ort")]
    pub out: PathBuf,
    #[arg(long)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub ort: super::OrtLib,
    /// Do not repair corpus models that miss the pass their test names (PAIRS-from-test-sources.tsv) with
    /// cheap rewrites (python/oatest_repair.py: outputs given a consumer, concrete dims, opset upgrade, integer
    /// scalar constants computed at run time).
    #[arg(long)]
    pub no_repair: bool,
    /// Also keep every pattern below this ai.onnx opset upgraded to it with onnx's version converter, when it
    /// still fires its pass (campaigns write seeds at opset 20); 0 turns it off.
    #[arg(long, default_value_t = crate::graph::DEFAULT_OPSET)]
    pub upgrade_opset: i64,
}

impl OrtArgs {
    fn config(self) -> anyhow::Result<OrtExtraction> {
        let mut models = self.models;
        if models.is_none() && self.pytest.is_none() {
            models = crate::util::project_file("tests/data/ort-transform-testdata");
            anyhow::ensure!(models.is_some(), "give --models DIR and/or --pytest PATH");
        }
        Ok(OrtExtraction {
            models,
            pytest: self.pytest,
            python: self.python,
            out: self.out,
            jobs: self.jobs,
            ort_lib: self.ort.ort_lib,
            repair: !self.no_repair,
            upgrade_opset: (self.upgrade_opset > 0).then_some(self.upgrade_opset),
            target: TargetKind::Ort,
        })
    }
}

impl OrtxArgs {
    fn config(self) -> OrtExtraction {
        OrtExtraction {
            models: Some(self.models),
            pytest: None,
            python: None,
            out: self.out,
            jobs: self.jobs,
            ort_lib: None,
            repair: false,
            upgrade_opset: None,
            target: TargetKind::OrtTransformers,
        }
    }
}

impl TvmArgs {
    fn config(self) -> TvmExtraction {
        TvmExtraction {
            tests: self.tests,
            python: self.python,
            out: self.out,
            jobs: self.jobs,
            timeout_secs: self.timeout_secs,
            include: self.include,
        }
    }
}

pub fn run(cmd: ExtractCmd) -> anyhow::Result<()> {
    match cmd {
        ExtractCmd::Ort(a) => println!("{}", extract_ort(&a.config()?)?),
        ExtractCmd::OrtTransformers(a) => println!("{}", extract_ort(&a.config())?),
        ExtractCmd::Tvm(a) => println!("{}", extract_tvm(&a.config())?),
    }
    Ok(())
}
