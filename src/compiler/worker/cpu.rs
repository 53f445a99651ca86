//! CPU-time and memory accounting from /proc: how much CPU a worker actually got, so that a background worker
//! starved of CPU is not mistaken for a hung one, and how much memory a process holds (endurance figures).

use std::time::Duration;

/// CPU time (user + system) a process has used so far, from /proc.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // after the command: state is field 3, utime 14 and stime 15 (1-based, as in proc(5))
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_millis(ticks * 1000 / hz))
}

/// Time a process has spent runnable but waiting for a CPU, from /proc/PID/task/*/schedstat: the largest over
/// its threads (a starved process waits in every thread at once; summing would count that wait several times).
/// `None` where the kernel keeps no scheduler statistics.
pub(super) fn runqueue_wait(pid: u32) -> Option<Duration> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut most: Option<u64> = None;
    for t in tasks.flatten() {
        let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else { continue };
        // "<ns on a CPU> <ns waiting on a run queue> <time slices>"
        if let Some(ns) = s.split_whitespace().nth(1).and_then(|w| w.parse::<u64>().ok()) {
            most = Some(most.map_or(ns, |m| m.max(ns)));
        }
    }
    most.map(Duration::from_nanos)
}

/// Resident set size of a process (`None`: this one), in bytes, from /proc.
pub fn rss_bytes(pid: Option<u32>) -> Option<u64> {
    let path = pid.map_or_else(|| "/proc/self/statm".to_string(), |p| format!("/proc/{p}/statm"));
    let statm = std::fs::read_to_string(path).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    Some(pages * page)
}

/// CPU time (user + system, every thread) this process has used so far.
pub fn own_cpu_time() -> Duration {
    let ru = own_rusage();
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(us(ru.ru_utime) + us(ru.ru_stime))
}

/// CPU time (user + system) the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    // SAFETY: an all-zero timespec is a valid value, and clock_gettime writes into the struct it is given.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// The largest resident set size this process has had, in MiB.
pub fn own_peak_rss_mb() -> f64 {
    own_rusage().ru_maxrss as f64 / 1024.0 // KiB on Linux
}

fn own_rusage() -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value, and getrusage writes into the struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    }
}
