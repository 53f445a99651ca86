#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: Rust unit and integration tests, then the Python tests
# that check oatest's output against onnx and onnxruntime.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the campaign page's browser test (python/tests/test_page.py) needs chromium and its driver: installed here when
# missing and this runs as root on Debian (CI); elsewhere the test says what to install
if ! command -v chromedriver >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
cargo test --release --locked
.venv/bin/python -m pytest -q python/tests
