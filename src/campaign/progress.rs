//! What a running campaign shows: a live progress bar on a terminal (plain log lines otherwise), and at the end
//! SVG plots of throughput, resident memory and discovery (distinct signatures and bugs) over time and of
//! passes fired (one labelled horizontal bar per
//! pass).

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
            "{:.0} tests/s, valid {:.1}%, {} passes fired, findings {} ({} signatures, {} keys, {} kept, {} triaged), {} bugs: crash {} error {} hang {} inconsistency {}",
            stats.tests_per_sec,
            stats.validity_rate * 100.0,
            stats.passes_fired.len(),
            stats.findings_raw,
            stats.findings_unique,
            stats.keys.len(),
            stats.findings_written,
            stats.findings_triaged,
            stats.bugs,
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

    /// Finishing triage: `done` of `total` findings triaged this run (a bar with its ETA on a terminal, a line
    /// every 10 seconds otherwise).
    pub fn finishing(&mut self, done: u64, total: u64) {
        match &self.bar {
            Some(b) => {
                if b.length() != Some(total) {
                    let template = "{elapsed_precise} finishing triage [{bar:30}] {pos}/{len} findings (eta {eta})";
                    b.set_style(
                        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
                    );
                    b.set_length(total);
                    b.reset_eta();
                }
                b.set_position(done);
            }
            None if self.last_line.elapsed() >= Duration::from_secs(10) || done == total => {
                eprintln!("finishing triage: {done}/{total} findings");
                self.last_line = Instant::now();
            }
            None => {}
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// throughput.svg, memory.svg and passes.svg in the run directory (each written atomically); a plot that cannot be drawn is
/// reported, not fatal.
pub fn plots(out: &Path, stats: &Stats) {
    if let Err(e) = throughput(&out.join("throughput.svg"), stats) {
        eprintln!("warning: cannot draw throughput.svg: {e}");
    }
    if let Err(e) = passes(&out.join("passes.svg"), stats) {
        eprintln!("warning: cannot draw passes.svg: {e}");
    }
    if let Err(e) = memory(&out.join("memory.svg"), stats) {
        eprintln!("warning: cannot draw memory.svg: {e}");
    }
    if let Err(e) = discovery(&out.join("discovery.svg"), stats) {
        eprintln!("warning: cannot draw discovery.svg: {e}");
    }
}

/// The discovery curve: distinct coarse signatures, source keys and bugs/ entries over time (left axis), and
/// raw findings (right axis), which grow with tests where the others level off.
fn discovery(path: &Path, stats: &Stats) -> Result<(), Box<dyn std::error::Error>> {
    let mut d = stats.discovery.clone();
    if let Some(&(_, raw, sigs, keys, bugs)) = d.last() {
        d.push((stats.elapsed_sec, raw, sigs, keys, bugs)); // the curve runs to the end
    }
    let xmax = d.last().map_or(1.0, |p| p.0).max(1.0);
    let ymax = d.iter().map(|p| p.2.max(p.3).max(p.4)).max().unwrap_or(1).max(1) as f64 * 1.1;
    let rmax = d.iter().map(|p| p.1).max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} {}: discovery", stats.target, stats.target_version), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .right_y_label_area_size(55)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?
            .set_secondary_coord(0f64..xmax, 0f64..rmax);
        chart.configure_mesh().x_desc("elapsed (s)").y_desc("distinct").draw()?;
        chart.configure_secondary_axes().y_desc("raw findings").draw()?;
        let series: [(&str, RGBColor, fn(&(f64, u64, u64, u64, u64)) -> u64); 3] =
            [("coarse signatures", BLUE, |p| p.2), ("source keys", GREEN, |p| p.3), ("bugs/ entries", RED, |p| p.4)];
        for (label, color, f) in series {
            let pts = d.iter().map(move |p| (p.0, f(p) as f64));
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        let raw = d.iter().map(|p| (p.0, p.1 as f64));
        chart
            .draw_secondary_series(LineSeries::new(raw, BLACK.mix(0.4)))?
            .label("raw findings (right)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.4)));
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
    }
    crate::util::write_atomic(path, svg.as_bytes())?;
    Ok(())
}

/// Resident memory over time: the fuzzer and each worker (a worker slot's line skips moments without a process).
fn memory(path: &Path, stats: &Stats) -> Result<(), Box<dyn std::error::Error>> {
    let m = &stats.memory;
    let xmax = m.last().map_or(1.0, |s| s.elapsed_sec).max(1.0);
    let all = m.iter().flat_map(|s| std::iter::once(s.fuzzer_mb).chain(s.workers_mb.iter().copied()));
    let ymax = all.fold(1.0, f64::max) * 1.1;
    let slots = m.iter().map(|s| s.workers_mb.len()).max().unwrap_or(0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 400)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} {}: resident memory", stats.target, stats.target_version), ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart.configure_mesh().x_desc("elapsed (s)").y_desc("RSS (MiB)").draw()?;
        let fuzzer = m.iter().map(|s| (s.elapsed_sec, s.fuzzer_mb));
        chart
            .draw_series(LineSeries::new(fuzzer, &BLUE))?
            .label("fuzzer")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        for k in 0..slots {
            let color = Palette99::pick(k + 1).to_rgba();
            let pts = m.iter().filter_map(|s| s.workers_mb.get(k).filter(|&&v| v > 0.0).map(|&v| (s.elapsed_sec, v)));
            chart
                .draw_series(LineSeries::new(pts, color))?
                .label(format!("worker {k}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
    }
    crate::util::write_atomic(path, svg.as_bytes())?;
    Ok(())
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
    crate::util::write_atomic(path, passes_svg(stats).as_bytes())?;
    Ok(())
}

/// Height of one bar of passes.svg, and the space between bars.
const BAR: usize = 18;
const GAP: usize = 6;

/// passes.svg: one horizontal bar per pass that fired (every pass, most frequent first), labelled with the
/// pass's name on the left and its count at the bar's end; the picture is as tall as the list.
fn passes_svg(stats: &Stats) -> String {
    let mut v: Vec<(&String, &u64)> = stats.passes_fired.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let max = v.first().map_or(1, |p| *p.1).max(1) as f64;
    // sans-serif at 13 px is at most about 8 px a character
    let label = 16 + 8 * v.iter().map(|p| p.0.chars().count()).max().unwrap_or(4);
    let (plot, count_room, top) = (600, 90, 50);
    let (width, height) = (label + plot + count_room, top + (BAR + GAP) * v.len().max(1) + 20);
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;");
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"28\" font-size=\"18\" text-anchor=\"middle\">{}: tests in which each pass fired \
         ({} passes)</text>\n",
        width / 2,
        esc(&stats.target),
        v.len()
    );
    for (i, (name, &count)) in v.iter().enumerate() {
        let y = top + i * (BAR + GAP);
        let w = ((count as f64 / max) * plot as f64).round().max(1.0) as usize;
        let mid = y + BAR / 2 + 5;
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{mid}\" text-anchor=\"end\">{}</text>\n\
             <rect x=\"{label}\" y=\"{y}\" width=\"{w}\" height=\"{BAR}\" fill=\"#4a7fd4\"/>\n\
             <text x=\"{}\" y=\"{mid}\">{count}</text>\n",
            label - 8,
            esc(name),
            label + w + 6
        ));
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pass_gets_a_labelled_bar_and_the_picture_grows_with_them() {
        let mut stats = Stats::default();
        for i in 0..70u64 {
            stats.passes_fired.insert(format!("Pass<{i}>"), 1000 - i);
        }
        let svg = passes_svg(&stats);
        assert_eq!(svg.matches("<rect x=").count(), 70);
        for i in 0..70u64 {
            assert!(svg.contains(&format!(">Pass&lt;{i}&gt;</text>")), "pass {i} has no label");
            assert!(svg.contains(&format!(">{}</text>", 1000 - i)), "pass {i} has no count");
        }
        let height = |svg: &str| {
            let at = svg.find("height=\"").unwrap() + 8;
            svg[at..].split('"').next().unwrap().parse::<usize>().unwrap()
        };
        assert!(height(&svg) >= 70 * BAR);
        stats.passes_fired.retain(|k, _| k.ends_with("<1>"));
        assert!(height(&passes_svg(&stats)) < 5 * (BAR + GAP) + 100);
        // the most frequent pass comes first
        let first = svg.find("Pass&lt;0&gt;").unwrap();
        assert!(first < svg.find("Pass&lt;69&gt;").unwrap());
    }
}
