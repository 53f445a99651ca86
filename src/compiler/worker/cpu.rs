//! CPU-time accounting from /proc: how much CPU a worker actually got, so that a background worker starved of
//! CPU is not mistaken for a hung one.

use std::time::Duration;

/// CPU time (user + system) a process has used so far, from /proc.
pub(super) fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // after the command: state is field 3, utime 14 and stime 15 (1-based, as in proc(5))
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_millis(ticks * 1000 / hz))
}
