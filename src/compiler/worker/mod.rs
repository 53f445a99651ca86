//! Worker processes: `oatest worker --target T` serves length-prefixed bincode requests on stdin/stdout; the
//! parent side (`Worker`) turns the wait status of a dead, hung or bloated worker into an `Outcome` and respawns.

mod child;
mod cpu;
mod parent;
mod pool;
mod protocol;
mod reader;
mod zygote;

pub use child::serve;
pub use cpu::{cpu_time, own_cpu_time, own_peak_rss_mb, rss_bytes, thread_cpu_time};
pub use parent::{classify, Worker, WorkerCpu, WorkerInfo, WorkerSpec, BACKGROUND_WALL_FACTOR};
pub use pool::Pool;
pub use protocol::{read_frame, write_frame, Accounting, Request, Response, MAX_INPUT_BYTES};
