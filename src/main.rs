use clap::Parser;

/// mimalloc serves every allocation of the process, ONNX Runtime's and TVM's included (see Cargo.toml).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // no transparent huge pages for this process (a worker takes them back): mimalloc asks for them on every
    // thread's segments, which nearly doubled the fuzzer's resident memory at 16 jobs (docs/BENCHMARKS.md)
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    let cli = oatest::cli::Cli::parse();
    if let Err(err) = oatest::cli::run(cli) {
        eprintln!("error: {err:#}");
        std::process::exit(2);
    }
}
