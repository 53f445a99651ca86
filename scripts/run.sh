#!/usr/bin/env bash
# The main job: set up, generate 1000 seed graphs, and check that every one passes onnx's full checker and runs
# in onnxruntime at optimization levels "disable" and "all". (Becomes a short fuzz campaign once `oatest fuzz`
# exists.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
out="results/seeds-$(date +%Y%m%d-%H%M%S)"
./target/release/oatest seeds gen --count 1000 --seed 7 --out "$out"
.venv/bin/python python/ortcheck.py "$out"
echo "seed models are in $out"
