//! Fresh worker processes without a fresh start: `oatest worker --zygote` opens its target once (TVM's import
//! costs one or two CPU-seconds) and, for each request on its socket, forks a worker that has run nothing yet,
//! serving the pipes the parent passed along (SCM_RIGHTS). The zygote reaps its forks and reports each one's wait
//! status (`S pid status` lines), so that the parent classifies a fork's death as it does a spawned worker's.
//! A fork copies only the calling thread: the zygote forks while idle, having run nothing, through CPython's fork
//! hooks (as `os.fork` does); the parent uses it for TVM only, which starts its runtime threads at a first run.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The parent's side of a zygote.
pub struct Zygote {
    child: Child,
    sock: BufReader<UnixStream>,
    /// Wait statuses the zygote reported for forks the parent has not asked about yet.
    ended: HashMap<u32, i32>,
}

/// A forked worker's pipes, from the parent's side.
pub struct Forked {
    pub pid: u32,
    pub stdin: std::fs::File,
    pub stdout: std::fs::File,
    pub stderr: std::fs::File,
}

impl Zygote {
    /// Wraps a started `oatest worker --zygote` whose stdin is the other end of `sock`.
    pub fn new(child: Child, sock: UnixStream) -> Zygote {
        Zygote { child, sock: BufReader::new(sock), ended: HashMap::new() }
    }

    /// A fresh worker forked from the zygote, or why not (the zygote died, or did not answer in `limit`).
    pub fn fork(&mut self, limit: Duration) -> anyhow::Result<Forked> {
        let [(in_r, in_w), (out_r, out_w), (err_r, err_w)] = [pipe()?, pipe()?, pipe()?];
        send_fds(self.sock.get_ref(), &[in_r.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()])?;
        drop((in_r, out_w, err_w));
        let deadline = Instant::now() + limit;
        loop {
            match self.line(deadline)? {
                Line::Forked(pid) => {
                    return Ok(Forked { pid, stdin: in_w.into(), stdout: out_r.into(), stderr: err_r.into() })
                }
                Line::Ended(pid, status) => {
                    self.ended.insert(pid, status);
                }
            }
        }
    }

    /// The wait status of fork `pid` once it ended: within `wait` (zero: only what the zygote reported already).
    pub fn status(&mut self, pid: u32, wait: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(s) = self.ended.remove(&pid) {
                return Some(ExitStatus::from_raw(s));
            }
            match self.line(deadline) {
                Ok(Line::Ended(p, s)) => {
                    self.ended.insert(p, s);
                }
                Ok(Line::Forked(_)) | Err(_) => return None,
            }
        }
    }

    /// Whether the zygote process is still there to fork.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The zygote's next line before `deadline`.
    fn line(&mut self, deadline: Instant) -> anyhow::Result<Line> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        self.sock.get_ref().set_read_timeout(Some(left))?;
        let mut text = String::new();
        anyhow::ensure!(self.sock.read_line(&mut text)? > 0, "the zygote closed its socket");
        let f: Vec<&str> = text.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|s| s.parse::<i64>().ok());
        match (f.first(), num(1), num(2)) {
            // a pid that is no process's (a failed fork says -1) is never signalled: kill(-1) reaches every process
            (Some(&"P"), Some(pid), _) if pid > 0 && pid <= i32::MAX as i64 => Ok(Line::Forked(pid as u32)),
            (Some(&"S"), Some(pid), Some(s)) => Ok(Line::Ended(pid as u32, s as i32)),
            _ => anyhow::bail!("the zygote said {text:?}"),
        }
    }
}

impl Drop for Zygote {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker process: started by the parent, or forked by its zygote (whose reports give its wait status).
pub(super) enum Handle {
    Spawned(Child),
    Forked(u32),
}

impl Handle {
    pub(super) fn id(&self) -> u32 {
        match self {
            Handle::Spawned(c) => c.id(),
            Handle::Forked(pid) => *pid,
        }
    }

    /// Its wait status once it ended (waiting up to `wait` for it to end).
    pub(super) fn ended(&mut self, zygote: &mut Option<Zygote>, wait: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + wait;
        match self {
            Handle::Spawned(c) => loop {
                match c.try_wait() {
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                    Ok(s) => return s,
                    Err(_) => return None,
                }
            },
            Handle::Forked(pid) => zygote.as_mut()?.status(*pid, wait),
        }
    }

    /// Kills it and waits for its status.
    pub(super) fn kill(&mut self, zygote: &mut Option<Zygote>) -> Option<ExitStatus> {
        match self {
            Handle::Spawned(c) => {
                let _ = c.kill();
                c.wait().ok()
            }
            Handle::Forked(pid) => {
                // SAFETY: kill takes plain integers; the pid is a fork the zygote has not reported ended
                unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
                self.ended(zygote, Duration::from_secs(2))
            }
        }
    }
}

enum Line {
    Forked(u32),
    Ended(u32, i32),
}

fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    anyhow::ensure!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == 0, "pipe2 failed");
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A one-byte message (`iov`) with room for three descriptors in `control` (CMSG_SPACE(12) is 32 bytes, and the
/// buffer is aligned for cmsghdr).
///
/// # Safety
/// `iov` and `control` must outlive every use of the message.
unsafe fn message(iov: &mut libc::iovec, control: &mut [u64; 8]) -> libc::msghdr {
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = libc::CMSG_SPACE(12) as usize;
    msg
}

/// Sends one byte with `fds` attached (SCM_RIGHTS).
fn send_fds(sock: &UnixStream, fds: &[RawFd; 3]) -> anyhow::Result<()> {
    let (mut byte, mut control) = ([b'F'], [0u64; 8]);
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: the message's buffers live through the call; its control holds one SCM_RIGHTS of three descriptors.
    unsafe {
        let msg = message(&mut iov, &mut control);
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(12) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c).cast::<RawFd>(), 3);
        anyhow::ensure!(libc::sendmsg(sock.as_raw_fd(), &msg, 0) == 1, "cannot reach the zygote");
    }
    Ok(())
}

/// Receives one request's three descriptors; None when the socket closed.
fn recv_fds(sock: RawFd) -> Option<[OwnedFd; 3]> {
    let (mut byte, mut control) = ([0u8], [0u64; 8]);
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    // SAFETY: as in `send_fds`; the descriptors received are new in this process and owned here.
    unsafe {
        let mut msg = message(&mut iov, &mut control);
        if libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) != 1 {
            return None;
        }
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null() || (*c).cmsg_type != libc::SCM_RIGHTS || (*c).cmsg_len != libc::CMSG_LEN(12) as usize {
            return None;
        }
        let mut fds = [0 as RawFd; 3];
        std::ptr::copy_nonoverlapping(libc::CMSG_DATA(c).cast::<RawFd>(), fds.as_mut_ptr(), 3);
        Some(fds.map(|fd| OwnedFd::from_raw_fd(fd)))
    }
}

/// The zygote's loop on its socket (fd 0): forks a worker per request, which returns from here as `Some` with its
/// stdin, stdout and stderr in place, and reports forks and their ends; `None` when the socket closed.
pub fn serve(fork: &mut dyn FnMut() -> i32) -> Option<()> {
    // SAFETY: fd 0 stays open for the zygote's life; ManuallyDrop never closes it here.
    let mut out = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    loop {
        let mut pfd = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
        // SAFETY: poll reads one pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, 50) };
        reap(&mut out)?;
        if ready <= 0 {
            continue;
        }
        let fds = recv_fds(0)?;
        let pid = fork();
        if pid == 0 {
            // the fork: its stdio are the parent's pipes, and it dies with the zygote
            // SAFETY: dup2 onto the standard descriptors; prctl takes plain integers.
            unsafe {
                for (k, fd) in fds.iter().enumerate() {
                    libc::dup2(fd.as_raw_fd(), k as RawFd);
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            }
            return Some(());
        }
        drop(fds);
        writeln!(out, "P {pid}").ok()?;
    }
}

/// Reports the forks that ended.
fn reap(out: &mut std::fs::File) -> Option<()> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status it is given.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return Some(());
        }
        writeln!(out, "S {pid} {status}").ok()?;
    }
}
