#!/usr/bin/env bash
# The main job: set up, then a one-minute fuzz campaign against ONNX Runtime (the onnxruntime wheel in .venv)
# on every core. Findings, stats.json and plots land in results/ort-<timestamp>/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out="results/ort-$(date +%Y%m%d-%H%M%S)"
./target/release/oatest doctor
./target/release/oatest fuzz --target ort --minutes "${OATEST_MINUTES:-1}" --seed "${OATEST_SEED:-1}" --out "$out"
echo "findings: $out/findings/ (one directory per finding: model.onnx, input_*.pb, outcome.json, meta.json)"
