//! Reporting, one floor above triage: an entry's directory (`entry`: the filer triage hands its results to; report.md
//! in the tracker's words, `tracker`, `templates*`, `words`, its results per level, `levels`; repro.py; the typed
//! bug.json, `record`), what upstream knows (`known`, `upstream`), one bug under several culprit sets (`related`,
//! weighing `evidence`), the run's bug index (`index`), regression suites (`export`), and the campaign page (`page`:
//! `<run>/index.html`, minimized graphs drawn by `graph`). The page reads only what was written (stats.json, the plots,
//! bug.json and report.md of each entry), so it renders a finished run, a running one, or merged shards alike.

pub mod entry;
mod evidence;
pub mod export;
pub mod graph;
pub mod index;
pub mod known;
mod levels;
pub mod page;
pub mod record;
pub mod related;
mod templates;
mod templates_ortx;
mod tracker;
pub mod upstream;
mod words;
