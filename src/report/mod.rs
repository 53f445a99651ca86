//! Reporting a campaign to a reader: the campaign page (`page.rs`: `<run>/index.html`) and minimized graphs
//! drawn (`graph.rs`). Reads only what the stages below wrote (stats.json, the plots, bug.json and report.md
//! of each entry), so it renders a finished run, a running one, or merged shards alike.

pub mod graph;
pub mod page;
