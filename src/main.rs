use clap::Parser;

/// mimalloc serves every allocation of the process, ONNX Runtime's and TVM's included (see Cargo.toml).
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = oatest::cli::Cli::parse();
    if let Err(err) = oatest::cli::run(cli) {
        eprintln!("error: {err:#}");
        std::process::exit(2);
    }
}
