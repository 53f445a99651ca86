//! Worker processes: `oatest worker --target T` serves length-prefixed bincode requests on stdin/stdout; the
//! parent side (`Worker`) turns the wait status of a dead, hung or bloated worker into an `Outcome` and respawns.

use super::{open, Config, NamedTensor, Outcome, Status, TargetKind};
use anyhow::Context;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Serialize, Deserialize, Debug)]
pub enum Request {
    Hello,
    /// Run the model under each configuration; one `Response::Outcome` comes back per configuration.
    Run {
        model: Vec<u8>,
        inputs: Vec<NamedTensor>,
        configs: Vec<Config>,
    },
}

/// The parent's view of [`Request`]: the same encoding, without copying the model and inputs.
#[derive(Serialize)]
enum RequestRef<'a> {
    #[allow(dead_code)]
    Hello,
    Run {
        model: &'a [u8],
        inputs: &'a [NamedTensor],
        configs: &'a [Config],
    },
}

#[derive(Serialize, Deserialize, Debug)]
pub enum Response {
    Hello {
        target: String,
        version: String,
        default_configs: Vec<Config>,
        optional_passes: Vec<String>,
    },
    Outcome(Outcome),
    /// The worker cannot serve (e.g. the compiler library failed to load).
    Fatal(String),
}

/// The largest frame accepted (a model plus its inputs).
const MAX_FRAME: usize = 1 << 30;
/// Inputs larger than this are not sent: the model is compiled without running.
pub const MAX_INPUT_BYTES: usize = 256 << 20;

pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> anyhow::Result<()> {
    let bytes = bincode::serialize(msg)?;
    w.write_all(&(bytes.len() as u32).to_le_bytes())?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Reads one frame; `Ok(None)` at a clean end of stream.
pub fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> anyhow::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_le_bytes(len) as usize;
    anyhow::ensure!(len <= MAX_FRAME, "frame of {len} bytes exceeds the limit");
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(Some(bincode::deserialize(&buf)?))
}

/// The child side: serve requests until stdin closes. Stdout is kept for frames only: anything a library
/// prints to fd 1 goes to stderr instead.
pub fn serve(kind: &TargetKind, ort_lib: Option<&std::path::Path>) -> anyhow::Result<()> {
    // SAFETY: plain fd duplication at startup, before any other thread writes to stdout.
    let frames_fd = unsafe {
        let fd = libc::dup(1);
        anyhow::ensure!(fd >= 0 && libc::dup2(2, 1) >= 0, "cannot redirect stdout");
        fd
    };
    use std::os::fd::FromRawFd;
    // SAFETY: frames_fd is a fresh descriptor owned by nobody else.
    let mut out = std::io::BufWriter::new(unsafe { std::fs::File::from_raw_fd(frames_fd) });
    let mut input = std::io::BufReader::new(std::io::stdin().lock());
    let mut target = match open(kind, ort_lib) {
        Ok(t) => t,
        Err(e) => {
            write_frame(&mut out, &Response::Fatal(format!("{e:#}")))?;
            return Ok(());
        }
    };
    while let Some(req) = read_frame::<Request>(&mut input)? {
        match req {
            Request::Hello => {
                let hello = Response::Hello {
                    target: target.name().into(),
                    version: target.version(),
                    default_configs: target.default_configs(),
                    optional_passes: target.optional_passes(),
                };
                write_frame(&mut out, &hello)?;
            }
            Request::Run { model, inputs, configs } => {
                for config in &configs {
                    let o = fit_frame(target.run(&model, &inputs, config));
                    write_frame(&mut out, &Response::Outcome(o))?;
                }
            }
        }
    }
    Ok(())
}

/// An outcome whose outputs would not fit in a frame keeps its passes but loses its outputs, with a message.
fn fit_frame(mut o: Outcome) -> Outcome {
    if bincode::serialized_size(&o).unwrap_or(u64::MAX) > MAX_FRAME as u64 {
        let bytes: usize = o.outputs.iter().map(|t| t.tensor.raw().map_or(0, |r| r.len())).sum();
        o.outputs.clear();
        o.status =
            Status::Error { message: format!("outputs of {bytes} bytes exceed oatest's {MAX_FRAME}-byte frame limit") };
    }
    o
}

/// How to start a worker.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    /// The oatest executable (the worker is `oatest worker ...`).
    pub exe: PathBuf,
    pub kind: TargetKind,
    pub ort_lib: Option<PathBuf>,
    /// Per-request time limit.
    pub timeout: Duration,
    /// Address-space limit of the worker, in MiB.
    pub mem_limit_mb: Option<u64>,
    /// Background work (the campaign's triager): the worker runs under SCHED_IDLE, so it only takes CPU time
    /// the campaign leaves, and its hang limit counts the CPU time it got (up to [`BACKGROUND_WALL_FACTOR`]
    /// times the limit in wall time), so that waiting for the CPU never looks like a hang.
    pub background: bool,
}

/// A background worker's request ends, however little CPU it got, after this many hang limits of wall time.
pub const BACKGROUND_WALL_FACTOR: u32 = 6;

/// CPU time (user + system) a process has used so far, from /proc.
fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // after the command: state is field 3, utime 14 and stime 15 (1-based, as in proc(5))
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_millis(ticks * 1000 / hz))
}

impl WorkerSpec {
    pub fn new(kind: TargetKind) -> anyhow::Result<WorkerSpec> {
        Ok(WorkerSpec {
            exe: std::env::current_exe().context("cannot locate the oatest executable")?,
            kind,
            ort_lib: None,
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
    child: Child,
    stdin: ChildStdin,
    stdout: FrameReader,
    stderr_tail: Arc<Mutex<VecDeque<u8>>>,
    /// Ends when the worker's stderr closes: joined after the worker died, so its last words are all read.
    stderr_reader: Option<std::thread::JoinHandle<()>>,
}

/// What reading the worker's next frame gave.
enum Got {
    Frame(Response),
    /// End of stream or an undecodable frame: the worker is dead or broken.
    Gone,
    TimedOut,
}

/// Reads frames from the worker's stdout in the calling thread, with a deadline (poll(2)): no reader thread,
/// no channel hand-off on the hot path.
struct FrameReader {
    out: std::process::ChildStdout,
    buf: Vec<u8>,
}

impl FrameReader {
    fn next(&mut self, deadline: Instant) -> Got {
        use std::os::fd::AsRawFd;
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_le_bytes(self.buf[..4].try_into().unwrap()) as usize;
                if len > MAX_FRAME {
                    return Got::Gone;
                }
                if self.buf.len() >= 4 + len {
                    let r = bincode::deserialize(&self.buf[4..4 + len]);
                    self.buf.drain(..4 + len);
                    return r.map_or(Got::Gone, Got::Frame);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Got::TimedOut;
            }
            let mut pfd = libc::pollfd { fd: self.out.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the duration of the call.
            let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().clamp(1, i32::MAX as u128) as i32) };
            if n < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Got::Gone;
            }
            if n == 0 {
                continue; // deadline check above decides
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.out.read(&mut chunk) {
                Ok(0) | Err(_) => return Got::Gone,
                Ok(k) => self.buf.extend_from_slice(&chunk[..k]),
            }
        }
    }
}

/// A worker process seen from the parent; restarted after every crash, hang or memory blow-up.
pub struct Worker {
    spec: WorkerSpec,
    proc: Option<Proc>,
    pub info: WorkerInfo,
    /// How many times the worker process was (re)started.
    pub starts: u64,
}

const TAIL: usize = 8192;

impl Worker {
    /// The per-request time limit (what counts as a hang).
    pub fn timeout(&self) -> std::time::Duration {
        self.spec.timeout
    }

    /// The next frame of a request started at `start`, within the hang limit (see [`WorkerSpec::background`]).
    fn wait(proc: &mut Proc, start: Instant, spec: &WorkerSpec) -> Got {
        let limit = spec.timeout;
        let cpu0 = if spec.background { cpu_time(proc.child.id()) } else { None };
        let mut deadline = start + limit;
        loop {
            let got = proc.stdout.next(deadline);
            let (Got::TimedOut, Some(cpu0)) = (&got, cpu0) else { return got };
            let used = cpu_time(proc.child.id()).map_or(limit, |c| c.saturating_sub(cpu0));
            if used >= limit || start.elapsed() >= limit * BACKGROUND_WALL_FACTOR {
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
            info: WorkerInfo {
                target: String::new(),
                version: String::new(),
                default_configs: Vec::new(),
                optional_passes: Vec::new(),
            },
            starts: 0,
        };
        w.spawn()?;
        Ok(w)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let mut cmd = Command::new(&self.spec.exe);
        cmd.arg("worker").arg("--target").arg(self.spec.kind.name());
        if let Some(lib) = &self.spec.ort_lib {
            cmd.arg("--ort-lib").arg(lib);
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
        let mut child = cmd.spawn().with_context(|| format!("cannot start worker {}", self.spec.exe.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = FrameReader { out: child.stdout.take().expect("piped"), buf: Vec::new() };
        let stderr = child.stderr.take();
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
        match proc.stdout.next(Instant::now() + Duration::from_secs(120)) {
            Got::Frame(Response::Hello { target, version, default_configs, optional_passes }) => {
                self.info = WorkerInfo { target, version, default_configs, optional_passes };
                self.proc = Some(proc);
                Ok(())
            }
            Got::Frame(Response::Fatal(msg)) => {
                let _ = proc.child.wait();
                anyhow::bail!("{} worker cannot start: {msg}", self.spec.kind.name())
            }
            _ => {
                let _ = proc.child.kill();
                let status = proc.child.wait().ok();
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
                    Got::Frame(Response::Outcome(mut o)) => {
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
        let mut proc = self.proc.take().expect("present");
        let deadline = Instant::now() + Duration::from_millis(2000);
        while Instant::now() < deadline && matches!(proc.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = proc.child.kill();
        let status = proc.child.wait();
        // the process is gone, so its stderr reaches end of file: read all of what it wrote last
        if let Some(h) = proc.stderr_reader.take() {
            let _ = h.join();
        }
        classify(status.ok(), &tail_text(&proc.stderr_tail))
    }

    fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            drop(p.stdin);
            let deadline = Instant::now() + Duration::from_millis(500);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
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

/// N workers, each used by one thread at a time.
pub struct Pool {
    workers: Vec<Mutex<Worker>>,
}

impl Pool {
    pub fn start(spec: &WorkerSpec, n: usize) -> anyhow::Result<Pool> {
        let workers =
            (0..n.max(1)).map(|_| Worker::start(spec.clone()).map(Mutex::new)).collect::<anyhow::Result<_>>()?;
        Ok(Pool { workers })
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    pub fn info(&self) -> WorkerInfo {
        self.workers[0].lock().unwrap().info.clone()
    }

    /// Applies `f` to every item, spreading them over the workers; results come back in item order.
    pub fn map<T: Send, R: Send>(&self, items: Vec<T>, f: impl Fn(&mut Worker, T) -> R + Sync) -> Vec<R> {
        let n = items.len();
        let queue = Mutex::new(items.into_iter().enumerate().collect::<VecDeque<_>>());
        let results = Mutex::new((0..n).map(|_| None).collect::<Vec<Option<R>>>());
        std::thread::scope(|s| {
            for w in &self.workers {
                let (queue, results, f) = (&queue, &results, &f);
                s.spawn(move || {
                    let mut worker = w.lock().unwrap();
                    loop {
                        let Some((i, item)) = queue.lock().unwrap().pop_front() else { break };
                        let r = f(&mut worker, item);
                        results.lock().unwrap()[i] = Some(r);
                    }
                });
            }
        });
        results.into_inner().unwrap().into_iter().map(|r| r.expect("every item ran")).collect()
    }
}
