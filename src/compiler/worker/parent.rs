//! The parent side of a worker: starts `oatest worker` (memory limit, SCHED_IDLE for background work), sends
//! requests, and turns a dead, hung or bloated worker's wait status and last words into an `Outcome`, then
//! respawns it for the next request.

use super::cpu::{cpu_time, runqueue_wait};
use super::protocol::{write_frame, Request, RequestRef, Response, MAX_INPUT_BYTES};
use super::reader::{FrameReader, Got};
use super::zygote::{Handle, Zygote};
use crate::compiler::{Config, NamedTensor, Outcome, Status, TargetKind};
use anyhow::Context;
use std::collections::VecDeque;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How to start a worker.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    /// The oatest executable (the worker is `oatest worker ...`).
    pub exe: PathBuf,
    pub kind: TargetKind,
    pub ort_lib: Option<PathBuf>,
    /// A directory put first on the worker's Python path (`PYTHONPATH`): another apache-tvm installation
    /// (`--also-tvm`), whose `tvm` then shadows the `.venv` one.
    pub python_path: Option<PathBuf>,
    /// Per-request time limit.
    pub timeout: Duration,
    /// Address-space limit of the worker, in MiB.
    pub mem_limit_mb: Option<u64>,
    /// Background work (the campaign's triager): the worker runs under SCHED_IDLE, so it only takes CPU time
    /// the campaign leaves, and its hang limit counts the CPU time it got (up to [`BACKGROUND_WALL_FACTOR`]
    /// times the limit in wall time), so that waiting for the CPU never looks like a hang.
    pub background: bool,
}

/// How long a worker may take to start (CPU time, for a background worker).
const START_LIMIT: Duration = Duration::from_secs(120);

/// A background worker's request ends, however little CPU it got, after this many hang limits of wall time.
pub const BACKGROUND_WALL_FACTOR: u32 = 6;

impl WorkerSpec {
    pub fn new(kind: TargetKind) -> anyhow::Result<WorkerSpec> {
        Ok(WorkerSpec {
            exe: std::env::current_exe().context("cannot locate the oatest executable")?,
            kind,
            ort_lib: None,
            python_path: None,
            timeout: Duration::from_secs(10),
            mem_limit_mb: Some(8192),
            background: false,
        })
    }
}

/// What the worker said about itself at start.
#[derive(Clone, Debug)]
pub struct WorkerInfo {
    pub target: String,
    pub version: String,
    pub default_configs: Vec<Config>,
    /// The passes a configuration may leave out (for TVM, the optional passes of its pipeline: what a
    /// synthesized test can target); empty where the target does not list them.
    pub optional_passes: Vec<String>,
}

struct Proc {
    child: Handle,
    stdin: std::fs::File,
    stdout: FrameReader,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    /// Ends when the worker's stderr closes: joined after the worker died, so its last words are all read.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

/// A worker process seen from the parent; restarted after every crash, hang or memory blow-up.
pub struct Worker {
    spec: WorkerSpec,
    proc: Option<Proc>,
    /// Forks fresh worker processes for [`Worker::fresh`] (started at its first use; TVM only).
    zygote: Option<Zygote>,
    pub info: WorkerInfo,
    /// How many times the worker process was (re)started.
    pub starts: u64,
    /// How many times the worker process was found dead between requests (an infrastructure event: restarted,
    /// never blamed on the next test).
    pub idle_deaths: u64,
    /// CPU time of this worker's processes, from their own accounting.
    pub cpu: WorkerCpu,
}

/// Where a worker's CPU time went, summed over its processes, in milliseconds (what the processes reported
/// with their outcomes: a process's time after its last outcome, e.g. a crash, is not counted).
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerCpu {
    /// Inside the target (ORT: session creation and run).
    pub target_ms: f64,
    /// Processes that ended.
    ended_ms: f64,
    /// The running process, as of its last outcome.
    current_ms: f64,
}

impl WorkerCpu {
    /// Everything the worker processes used: start-up, requests, the target.
    pub fn total_ms(&self) -> f64 {
        self.ended_ms + self.current_ms
    }
    fn ended(&mut self) {
        self.ended_ms += std::mem::take(&mut self.current_ms);
    }
}

const TAIL: usize = 8192;

impl Worker {
    /// How this worker was started (to start another like it).
    pub fn spec(&self) -> &WorkerSpec {
        &self.spec
    }

    /// The per-request time limit (what counts as a hang).
    pub fn timeout(&self) -> std::time::Duration {
        self.spec.timeout
    }

    /// The next frame of a request started at `start`, within the hang limit (see [`WorkerSpec::background`]).
    fn wait(proc: &mut Proc, start: Instant, spec: &WorkerSpec) -> Got {
        Self::wait_within(proc, start, spec.timeout, spec.background)
    }

    /// The next frame within `limit`. A background worker's limit counts the CPU time it got, and its wall-time
    /// cap ([`BACKGROUND_WALL_FACTOR`] limits) leaves out the time it spent runnable but waiting for a CPU: a
    /// SCHED_IDLE worker beside busy campaign workers may wait minutes for the CPU second it needs (starting
    /// TVM takes one or two), and that is not a hang.
    fn wait_within(proc: &mut Proc, start: Instant, limit: Duration, background: bool) -> Got {
        let pid = proc.child.id();
        let cpu0 = if background { cpu_time(pid) } else { None };
        let wait0 = runqueue_wait(pid).unwrap_or_default();
        let mut deadline = start + limit;
        loop {
            let got = proc.stdout.next(deadline);
            let (Got::TimedOut, Some(cpu0)) = (&got, cpu0) else { return got };
            let used = cpu_time(pid).map_or(limit, |c| c.saturating_sub(cpu0));
            let waited = runqueue_wait(pid).unwrap_or_default().saturating_sub(wait0);
            if used >= limit || start.elapsed().saturating_sub(waited) >= limit * BACKGROUND_WALL_FACTOR {
                return got;
            }
            deadline = Instant::now() + (limit - used).max(Duration::from_millis(100));
        }
    }

    /// Starts a worker and waits for its greeting; a worker that cannot serve is an error with its reason.
    pub fn start(spec: WorkerSpec) -> anyhow::Result<Worker> {
        let mut w = Worker {
            spec,
            proc: None,
            zygote: None,
            info: WorkerInfo {
                target: String::new(),
                version: String::new(),
                default_configs: Vec::new(),
                optional_passes: Vec::new(),
            },
            starts: 0,
            idle_deaths: 0,
            cpu: WorkerCpu::default(),
        };
        w.spawn()?;
        Ok(w)
    }

    /// `oatest worker` for this spec (a zygote's with `--zygote`), its stdio and limits set.
    fn command(&self, zygote: bool) -> Command {
        let mut cmd = Command::new(&self.spec.exe);
        cmd.arg("worker").arg("--target").arg(self.spec.kind.name());
        if zygote {
            cmd.arg("--zygote");
        }
        if let Some(lib) = &self.spec.ort_lib {
            cmd.arg("--ort-lib").arg(lib);
        }
        if let Some(dir) = &self.spec.python_path {
            cmd.env("PYTHONPATH", dir);
        }
        // OATEST_WORKER_STDERR=inherit shows a worker's whole stderr (debugging oatest itself)
        let inherit = std::env::var("OATEST_WORKER_STDERR").is_ok_and(|v| v == "inherit");
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(if inherit {
            Stdio::inherit()
        } else {
            Stdio::piped()
        });
        // a panic's message, not its backtrace, should be the last words classify() reads
        if std::env::var_os("RUST_BACKTRACE").is_none() {
            cmd.env("RUST_BACKTRACE", "0");
        }
        let (limit, background) = (self.spec.mem_limit_mb, self.spec.background);
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls (setrlimit, sched_setscheduler, prctl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if background {
                    let param = libc::sched_param { sched_priority: 0 };
                    libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
                }
                if let Some(mb) = limit {
                    let bytes = mb.saturating_mul(1 << 20);
                    let rl = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                    libc::setrlimit(libc::RLIMIT_AS, &rl);
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // Ctrl-C stops the campaign, which then stops its workers: a worker must not die of it first
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        cmd
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut cmd = self.command(false);
        let mut child = cmd.spawn().with_context(|| format!("cannot start worker {}", self.spec.exe.display()))?;
        let stdin = std::fs::File::from(std::os::fd::OwnedFd::from(child.stdin.take().expect("piped")));
        let stdout = FrameReader::new(child.stdout.take().expect("piped"));
        let stderr = child.stderr.take().map(|e| std::fs::File::from(std::os::fd::OwnedFd::from(e)));
        self.greet(Handle::Spawned(child), stdin, stdout, stderr)
    }

    /// A fresh worker process forked from the zygote (started first when there is none, or it died).
    fn fork(&mut self) -> anyhow::Result<()> {
        if !self.zygote.as_mut().is_some_and(|z| z.alive()) {
            let (mine, theirs) = std::os::unix::net::UnixStream::pair()?;
            let mut cmd = self.command(true);
            cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs))).stdout(Stdio::null()).stderr(Stdio::null());
            let child = cmd.spawn().with_context(|| format!("cannot start a zygote {}", self.spec.exe.display()))?;
            self.zygote = Some(Zygote::new(child, mine));
        }
        let f = self.zygote.as_mut().expect("started").fork(START_LIMIT)?;
        self.greet(Handle::Forked(f.pid), f.stdin, FrameReader::new(f.stdout), Some(f.stderr))
    }

    /// Reads a new worker process's stderr, and waits for its greeting.
    fn greet(
        &mut self,
        child: Handle,
        stdin: std::fs::File,
        stdout: FrameReader,
        stderr: Option<std::fs::File>,
    ) -> anyhow::Result<()> {
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL)));
        let t2 = tail.clone();
        let stderr_reader = std::thread::spawn(move || {
            let Some(mut stderr) = stderr else { return };
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut t = t2.lock().unwrap();
                t.extend(&buf[..n]);
                while t.len() > TAIL {
                    t.pop_front();
                }
            }
        });
        self.starts += 1;
        let mut proc = Proc { child, stdin, stdout, stderr_tail: tail, stderr_reader: Some(stderr_reader) };
        write_frame(&mut proc.stdin, &Request::Hello).context("worker closed its input at start")?;
        match Self::wait_within(&mut proc, Instant::now(), START_LIMIT, self.spec.background) {
            Got::Frame(Response::Hello { target, version, default_configs, optional_passes }) => {
                self.info = WorkerInfo { target, version, default_configs, optional_passes };
                self.proc = Some(proc);
                Ok(())
            }
            Got::Frame(Response::Fatal(msg)) => {
                let _ = proc.child.ended(&mut self.zygote, START_LIMIT);
                anyhow::bail!("{} worker cannot start: {msg}", self.spec.kind.name())
            }
            _ => {
                let status = proc.child.kill(&mut self.zygote);
                if let Some(h) = proc.stderr_reader.take() {
                    let _ = h.join();
                }
                let tail = tail_text(&proc.stderr_tail);
                anyhow::bail!("{} worker failed at start ({status:?}): {tail}", self.spec.kind.name())
            }
        }
    }

    /// Runs one model under one configuration. Never fails: a dead or stuck worker is the outcome.
    pub fn run(&mut self, model: &[u8], inputs: &[NamedTensor], config: &Config) -> Outcome {
        self.run_configs(model, inputs, std::slice::from_ref(config)).pop().expect("one outcome per config")
    }

    /// Runs one model under several configurations with one request: one outcome per configuration, in order.
    /// A configuration that kills or hangs the worker gets that outcome; the rest go to a fresh worker.
    pub fn run_configs(&mut self, model: &[u8], inputs: &[NamedTensor], configs: &[Config]) -> Vec<Outcome> {
        // inputs too large to send: compile only (passes still fire), and say so
        let input_bytes: usize = inputs.iter().map(|t| t.tensor.raw().map_or(0, |r| r.len())).sum();
        let oversize = input_bytes > MAX_INPUT_BYTES;
        let inputs = if oversize { &[][..] } else { inputs };
        let mut out: Vec<Outcome> = Vec::with_capacity(configs.len());
        while out.len() < configs.len() {
            let rest = &configs[out.len()..];
            // a worker that died while idle (after answering its last request) is restarted first: its death
            // belongs to no test
            if self.proc.as_mut().is_some_and(|p| p.child.ended(&mut self.zygote, Duration::ZERO).is_some()) {
                let _ = self.reap();
                self.idle_deaths += 1;
            }
            if self.proc.is_none() {
                if let Err(e) = self.spawn() {
                    let message = format!("worker restart failed: {e:#}");
                    out.extend(
                        rest.iter().map(|c| Outcome::failed(c, Status::Error { message: message.clone() }, 0.0)),
                    );
                    break;
                }
            }
            let req = RequestRef::Run { model, inputs, configs: rest };
            let proc = self.proc.as_mut().expect("spawned");
            let sent = write_frame(&mut proc.stdin, &req).is_ok();
            for config in rest {
                let start = Instant::now();
                let got = if sent { Self::wait(proc, start, &self.spec) } else { Got::Gone };
                let ms = start.elapsed().as_secs_f64() * 1e3;
                match got {
                    Got::Frame(Response::Outcome(mut o, acct)) => {
                        self.cpu.target_ms += acct.target_cpu_ms;
                        self.cpu.current_ms = acct.process_cpu_ms;
                        if oversize {
                            let message =
                                format!("inputs of {input_bytes} bytes exceed oatest's {MAX_INPUT_BYTES}-byte limit: compiled only");
                            o.status = Status::Error { message };
                            o.outputs.clear();
                        }
                        out.push(o);
                        continue;
                    }
                    Got::Frame(other) => {
                        let message = format!("worker protocol error: {other:?}");
                        self.kill();
                        out.push(Outcome::failed(config, Status::Error { message }, ms));
                    }
                    Got::TimedOut => {
                        self.kill();
                        out.push(Outcome::failed(
                            config,
                            Status::Timeout { limit_ms: self.spec.timeout.as_millis() as u64 },
                            ms,
                        ));
                    }
                    Got::Gone => {
                        let status = self.reap();
                        out.push(Outcome::failed(config, status, ms));
                    }
                }
                break;
            }
        }
        for o in &mut out {
            o.target = self.info.target.clone();
        }
        out
    }

    /// The worker stopped answering: wait for it (briefly), kill it, and say how it ended.
    fn reap(&mut self) -> Status {
        self.cpu.ended();
        let mut proc = self.proc.take().expect("present");
        let status = match proc.child.ended(&mut self.zygote, Duration::from_millis(2000)) {
            Some(s) => Some(s),
            None => proc.child.kill(&mut self.zygote),
        };
        // the process is gone, so its stderr reaches end of file: read all of what it wrote last
        if let Some(h) = proc.stderr_reader.take() {
            let _ = h.join();
        }
        classify(status, &tail_text(&proc.stderr_tail))
    }

    fn kill(&mut self) {
        self.cpu.ended();
        if let Some(mut p) = self.proc.take() {
            let _ = p.child.kill(&mut self.zygote);
        }
    }
}

impl Worker {
    /// The running worker process's id.
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(|p| p.child.id())
    }

    /// Replaces the worker process by a fresh one between requests (a leaking compiler's memory comes back);
    /// a fresh process that cannot start is started again at the next request, which reports why not.
    pub fn recycle(&mut self) {
        self.stop();
        let _ = self.spawn();
    }

    /// Replaces the worker process by one that has run nothing (triage's fresh processes). A TVM worker's import
    /// costs one or two CPU-seconds: its fresh processes are forks of a zygote that only imported it (one more
    /// process of a worker's size, kept while this worker lives).
    pub fn fresh(&mut self) {
        self.stop();
        if self.spec.kind != TargetKind::Tvm || self.fork().is_err() {
            let _ = self.spawn();
        }
    }

    /// Ends the worker process: its input closed, it exits; killed if it does not within 500 ms.
    fn stop(&mut self) {
        self.cpu.ended();
        if let Some(mut p) = self.proc.take() {
            drop(p.stdin);
            if p.child.ended(&mut self.zygote, Duration::from_millis(500)).is_none() {
                let _ = p.child.kill(&mut self.zygote);
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn tail_text(t: &Mutex<VecDeque<u8>>) -> String {
    let t = t.lock().unwrap();
    let bytes: Vec<u8> = t.iter().copied().collect();
    let s = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = s.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

/// Messages that mean the worker ran out of memory.
const OOM_MARKERS: &[&str] = &["memory allocation of", "bad_alloc", "Cannot allocate memory", "out of memory"];

/// The status of a worker that stopped answering, from its wait status and last words.
pub fn classify(status: Option<std::process::ExitStatus>, stderr_tail: &str) -> Status {
    use std::os::unix::process::ExitStatusExt;
    if OOM_MARKERS.iter().any(|m| stderr_tail.contains(m)) {
        return Status::Oom { message: stderr_tail.to_string() };
    }
    match status {
        Some(s) if s.signal().is_some() => Status::Crash { signal: s.signal(), message: stderr_tail.to_string() },
        Some(s) => Status::Crash { signal: None, message: format!("worker exited with {s}: {stderr_tail}") },
        None => Status::Crash { signal: None, message: format!("worker vanished: {stderr_tail}") },
    }
}
