use clap::Parser;

fn main() {
    let cli = oatest::cli::Cli::parse();
    if let Err(err) = oatest::cli::run(cli) {
        eprintln!("error: {err:#}");
        std::process::exit(2);
    }
}
