//! The wire protocol between parent and worker: frames are a little-endian `u32` length and that many bytes of
//! bincode; the parent sends [`Request`]s, the worker answers with [`Response`]s.

use crate::compiler::{Config, NamedTensor, Outcome};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io::{Read, Write};

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
pub(super) enum RequestRef<'a> {
    /// Never sent through this view (the parent sends `Request::Hello`): it keeps `Run` at the variant index that
    /// `Request` gives it, which is what bincode writes.
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
    /// One configuration's outcome, with the worker's CPU accounting for it.
    Outcome(Outcome, Accounting),
    /// The worker cannot serve (e.g. the compiler library failed to load).
    Fatal(String),
}

/// What a worker says about its CPU time with each outcome (from its own clock, in milliseconds).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default)]
pub struct Accounting {
    /// CPU time spent inside the target for this outcome (ORT: session creation and run).
    pub target_cpu_ms: f64,
    /// The worker process's CPU time since it started.
    pub process_cpu_ms: f64,
}

/// The largest frame accepted (a model plus its inputs).
pub(super) const MAX_FRAME: usize = 1 << 30;
/// The most output bytes one run may return (see `child::fit_frame`): 4 MiB, a million float32 values, where
/// tests' outputs are kilobytes.
pub const MAX_OUTPUT_BYTES: usize = 4 << 20;
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
