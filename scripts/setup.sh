#!/usr/bin/env bash
# Installs everything oatest needs from the project's own files: a local .venv with the pinned Python packages
# (python/requirements.txt), an older ONNX Runtime build in .venv-ort-1.19.2 (python/requirements-old-ort.txt: only
# its library, for affected-version checks and their test), an older apache-tvm in .venv-tvm-0.26.0
# (python/requirements-old-tvm.txt, the same for TVM) and the release build of the oatest binary. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust from rustup.rs)" >&2; exit 1; }
command -v "$PY" >/dev/null || { echo "setup: $PY not found (install Python 3.10+)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(sha256sum python/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r python/requirements.txt
  echo "$want" > "$stamp"
fi
old=.venv-ort-1.19.2
want=$(sha256sum python/requirements-old-ort.txt | cut -d' ' -f1)
if [ "$(cat "$old/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$old"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --target "$old" \
    -r python/requirements-old-ort.txt
  echo "$want" > "$old/.requirements.sha256"
fi
old=.venv-tvm-0.26.0
want=$(sha256sum python/requirements-old-tvm.txt | cut -d' ' -f1)
if [ "$(cat "$old/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$old"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --target "$old" \
    -r python/requirements-old-tvm.txt
  echo "$want" > "$old/.requirements.sha256"
fi
cargo build --release --locked
