//! The worker side (`oatest worker --target T`): opens one target and answers requests on stdin until it
//! closes, writing frames to the original stdout while everything else printed to fd 1 goes to stderr.

use super::protocol::{read_frame, write_frame, Accounting, Request, Response, MAX_FRAME, MAX_OUTPUT_BYTES};
use crate::compiler::{open, Outcome, Status, TargetKind};

/// The child side: serve requests until stdin closes. Stdout is kept for frames only: anything a library
/// prints to fd 1 goes to stderr instead. A zygote (`super::zygote`) opens the target first and serves in each
/// of its forks.
pub fn serve(kind: &TargetKind, ort_lib: Option<&std::path::Path>, zygote: bool) -> anyhow::Result<()> {
    // a worker takes transparent huge pages as the system allows (main turned them off for the fuzzer, whose
    // many threads' allocator segments they made resident; the compilers' speed with them is left as it was)
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
    }
    let opened = match zygote {
        // a zygote that cannot open its target just ends: the parent then starts a worker, which says why
        true => match open(kind, ort_lib) {
            Ok(t) if super::zygote::serve(&mut fork).is_some() => Some(t),
            _ => return Ok(()),
        },
        false => None,
    };
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
    let mut target = match opened.map_or_else(|| open(kind, ort_lib), Ok) {
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
                    // the worker's own accounting: CPU time inside the target (session creation and run, for
                    // ORT) and the process's whole CPU time so far
                    let before = process_cpu_ms();
                    let o = fit_frame(target.run(&model, &inputs, config));
                    let after = process_cpu_ms();
                    let cpu = Accounting { target_cpu_ms: after - before, process_cpu_ms: after };
                    write_frame(&mut out, &Response::Outcome(o, cpu))?;
                }
            }
        }
    }
    Ok(())
}

/// Forks the zygote (in a target with an interpreter, through CPython's fork hooks).
fn fork() -> i32 {
    #[cfg(feature = "python")]
    return crate::compiler::python::fork();
    #[cfg(not(feature = "python"))]
    // SAFETY: the zygote has one thread
    unsafe {
        libc::fork()
    }
}

/// An outcome whose outputs exceed [`MAX_OUTPUT_BYTES`] keeps its passes but loses its outputs, with a message:
/// an error under every configuration, the reference's included, so the test counts as invalid. Such a test (a
/// few-node graph expanding its inputs millions of times) would cost the fuzzer, which holds and compares every
/// configuration's outputs, hundreds of megabytes for one test.
fn fit_frame(mut o: Outcome) -> Outcome {
    let size = bincode::serialized_size(&o.outputs).unwrap_or(u64::MAX);
    if size > MAX_OUTPUT_BYTES as u64 || bincode::serialized_size(&o).unwrap_or(u64::MAX) > MAX_FRAME as u64 {
        o.outputs.clear();
        o.status = Status::Error {
            message: format!("outputs of {size} bytes exceed oatest's limit of {MAX_OUTPUT_BYTES} bytes a run"),
        };
    }
    o
}

/// CPU time (user + system, every thread) this process has used, in milliseconds.
fn process_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}
