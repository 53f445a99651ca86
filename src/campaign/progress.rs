//! What a running campaign shows: a live progress bar on a terminal (plain log lines otherwise), and at the end
//! SVG plots of throughput over time and of passes fired.

use super::stats::Stats;
use super::{Budget, Settings};
use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<ProgressBar>,
    last_line: Instant,
}

impl Progress {
    pub fn new(settings: &Settings, stats: &Stats) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let (len, template) = match settings.budget {
                Budget::Tests(n) => {
                    (settings.shard.tests_below(n), "{elapsed_precise} [{bar:30}] {pos}/{len} tests (eta {eta}) {msg}")
                }
                Budget::Seconds(s) => (s as u64, "{elapsed_precise} [{bar:30}] {pos}/{len} s {msg}"),
            };
            let b = ProgressBar::new(len);
            b.set_style(ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()));
            b.set_position(match settings.budget {
                Budget::Tests(_) => stats.tests_executed,
                Budget::Seconds(_) => stats.elapsed_sec as u64,
            });
            b
        });
        Progress { bar, last_line: Instant::now() }
    }

    fn line(stats: &Stats) -> String {
        let f = |k: &str| stats.by_symptom.get(k).copied().unwrap_or(0);
        format!(
            "{:.0} tests/s, valid {:.1}%, {} passes fired, findings {} ({} unique): crash {} error {} hang {} inconsistency {}",
            stats.tests_per_sec,
            stats.validity_rate * 100.0,
            stats.passes_fired.len(),
            stats.findings_raw,
            stats.findings_unique,
            f("crash"),
            f("error"),
            f("hang"),
            f("inconsistency")
        )
    }

    pub fn update(&mut self, stats: &Stats, budget: &Budget) {
        match &self.bar {
            Some(b) => {
                b.set_position(match budget {
                    Budget::Tests(_) => stats.tests_executed,
                    Budget::Seconds(_) => stats.elapsed_sec as u64,
                });
                b.set_message(Self::line(stats));
            }
            None if self.last_line.elapsed() >= Duration::from_secs(10) => {
                eprintln!("[{:>7.0}s] {} tests: {}", stats.elapsed_sec, stats.tests_executed, Self::line(stats));
                self.last_line = Instant::now();
            }
            None => {}
        }
    }

    pub fn note(&mut self, msg: &str) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// throughput.svg and passes.svg in the run directory (each written atomically); a plot that cannot be drawn is
/// reported, not fatal.
pub fn plots(out: &Path, stats: &Stats) {
    if let Err(e) = throughput(&out.join("throughput.svg"), stats) {
        eprintln!("warning: cannot draw throughput.svg: {e}");
    }
    if let Err(e) = passes(&out.join("passes.svg"), stats) {
        eprintln!("warning: cannot draw passes.svg: {e}");
    }
}

fn throughput(path: &Path, stats: &Stats) -> Result<(), Box<dyn std::error::Error>> {
    let pts: Vec<(f64, f64)> = stats
        .timeline
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| (w[1].0, (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0)))
        .collect();
    let xmax = pts.last().map_or(1.0, |p| p.0).max(1.0);
    let ymax = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} {}: throughput", stats.target, stats.target_version), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart.configure_mesh().x_desc("elapsed (s)").y_desc("tests/s").draw()?;
        chart.draw_series(LineSeries::new(pts, &BLUE))?;
        root.present()?;
    }
    crate::util::write_atomic(path, svg.as_bytes())?;
    Ok(())
}

fn passes(path: &Path, stats: &Stats) -> Result<(), Box<dyn std::error::Error>> {
    let mut v: Vec<(&String, &u64)> = stats.passes_fired.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.truncate(30);
    let n = v.len().max(1);
    let ymax = v.first().map_or(1, |p| *p.1) as f64 * 1.1 + 1.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 160 + 22 * n as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{}: tests in which each pass fired (top {n})", stats.target), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(260)
            .build_cartesian_2d(0f64..ymax, 0f64..n as f64)?;
        let names: Vec<String> = v.iter().map(|p| p.0.clone()).collect();
        chart
            .configure_mesh()
            .y_labels(n)
            .y_label_formatter(&|y| {
                let i = y.floor() as usize;
                if (*y - y.floor()).abs() < 1e-9 {
                    names.get(n - 1 - i.min(n - 1)).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("tests")
            .draw()?;
        chart.draw_series(v.iter().enumerate().map(|(i, (_, &c))| {
            let y = (n - 1 - i) as f64;
            Rectangle::new([(0.0, y + 0.1), (c as f64, y + 0.9)], BLUE.mix(0.6).filled())
        }))?;
        root.present()?;
    }
    crate::util::write_atomic(path, svg.as_bytes())?;
    Ok(())
}
