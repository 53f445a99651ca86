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
# an older build, installed apart from .venv (pip --target, no dependencies) and again only when its file changes
old_build() {
  local dir=$1 requirements=$2 want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ "$(cat "$dir/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
    rm -rf "$dir"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir" -r "$requirements"
    echo "$want" > "$dir/.requirements.sha256"
  fi
}
old_build .venv-ort-1.19.2 python/requirements-old-ort.txt
old_build .venv-tvm-0.26.0 python/requirements-old-tvm.txt
cargo build --release --locked
