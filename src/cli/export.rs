//! `oatest export RUN_DIR`: a campaign's bugs and pass-covering passing tests as a regression suite.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// A campaign's run directory (with bugs/ after triage, examples/).
    pub run: PathBuf,
    /// Where to write the regression suite.
    #[arg(long)]
    pub out: PathBuf,
    /// The tolerance the suite checks outputs with (each flag not given: the campaign's, else the default).
    #[command(flatten)]
    pub tolerance: super::tolerance::ToleranceArgs,
}

pub fn run(a: ExportArgs) -> anyhow::Result<()> {
    let campaign = crate::campaign::load_checkpoint(&a.run).ok().map(|(s, _, _)| s.tolerance);
    let tolerance = a.tolerance.over(campaign.unwrap_or_default())?;
    let e = crate::report::export::export(&a.run, &a.out, tolerance)?;
    for s in &e.skipped {
        eprintln!("skipped: {s}");
    }
    let bugs = e.cases.values().filter(|c| c.kind == "bug").count();
    println!(
        "exported {} cases ({bugs} bugs, {} passing tests) to {}; run: pytest {}",
        e.cases.len(),
        e.cases.len() - bugs,
        a.out.display(),
        a.out.display()
    );
    Ok(())
}
