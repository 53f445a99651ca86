//! Seed generation throughput: generate + encode N seeds on one thread, report seeds/s (median of 5 rounds).
//! Run: `cargo bench --bench seedgen`. Recorded in docs/BENCHMARKS.md.

use oatest::graph::onnx::encode_model;
use oatest::seedgen::{generate, SeedConfig};
use std::time::Instant;

fn main() {
    let n: u64 = std::env::var("SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let cfg = SeedConfig::default();
    let mut rates = Vec::new();
    let mut bytes = 0usize;
    let mut nodes = 0usize;
    for round in 0..5 {
        let t = Instant::now();
        for i in 0..n {
            let m = generate(7 + round, i, &cfg);
            nodes += m.graph.node_count();
            bytes += encode_model(&m).len();
        }
        rates.push(n as f64 / t.elapsed().as_secs_f64());
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "seedgen: {n} seeds/round, median {:.0} seeds/s on one thread (min {:.0}, max {:.0}); mean {:.1} nodes, {:.0} bytes per seed",
        rates[2],
        rates[0],
        rates[4],
        nodes as f64 / (5 * n) as f64,
        bytes as f64 / (5 * n) as f64
    );
}
