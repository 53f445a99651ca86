#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: Rust unit and integration tests, then the Python tests
# that check oatest's output against onnx and onnxruntime.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --release --locked
.venv/bin/python -m pytest -q python/tests
