//! The parent's frame reader: reads the worker's next [`Response`] from its stdout in the calling thread, with a
//! deadline (poll(2)), and says whether a frame came, the worker is gone, or the deadline passed.

use super::protocol::{Response, MAX_FRAME};
use std::io::Read;
use std::time::Instant;

/// What reading the worker's next frame gave.
pub(super) enum Got {
    Frame(Response),
    /// End of stream or an undecodable frame: the worker is dead or broken.
    Gone,
    TimedOut,
}

/// Reads frames from the worker's stdout in the calling thread, with a deadline (poll(2)): no reader thread,
/// no channel hand-off on the hot path.
pub(super) struct FrameReader {
    out: std::fs::File,
    buf: Vec<u8>,
}

impl FrameReader {
    pub(super) fn new(out: impl Into<std::os::fd::OwnedFd>) -> FrameReader {
        FrameReader { out: std::fs::File::from(out.into()), buf: Vec::new() }
    }

    pub(super) fn next(&mut self, deadline: Instant) -> Got {
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
