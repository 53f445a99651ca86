#!/usr/bin/env python3
"""Patterns for the ort-transformers target from ONNX Runtime's transformer optimizer tests
(onnxruntime/test/python/transformers/): each test file runs under pytest in its own process with the capture
plugin (python/oatest_ortx_capture.py), which records every model the tests hand to `optimize_model`; each
captured model is then run through oatest's runner (python/oatest_ortx.py, as the target runs it: `disable`
and `basic`, its model type) and kept when ONNX Runtime runs it unoptimized, once per fusion that fires on it, as
`<out>/<FusionName>/model-<sha>.onnx` (format 1, granularity `model`: the whole test model, with metadata
`oatest.pattern` and the model type it was captured with). `<out>/extraction.json` lists every file's pytest
outcome (tests that need torch fail on its import and are listed as such) and every captured model's fusions.

Usage: .venv/bin/python python/oatest_ortx_extract.py --tests <ort>/onnxruntime/test/python/transformers \
           --out patterns/ort-transformers [--include test_attention_fusion.py ...] [--max-bytes N]
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def load_runner():
    m = types.ModuleType("oatest_ortx_passes")
    with open(os.path.join(ROOT, "data", "ort-transformers-passes.json")) as f:
        m.PASSES = json.load(f)
    sys.modules["oatest_ortx_passes"] = m
    sys.path.insert(0, HERE)
    import oatest_ortx

    return oatest_ortx


def run_file(path: str, capture: str) -> dict:
    env = dict(os.environ, OATEST_ORTX_CAPTURE_DIR=capture, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "oatest_ortx_capture", "-p", "no:cacheprovider", os.path.basename(path)],
        cwd=os.path.dirname(path), env=env, capture_output=True, text=True, timeout=900,
    )
    tail = [l for l in p.stdout.splitlines() if l.strip()][-1:] or [""]
    out = p.stdout + p.stderr
    return {
        "file": os.path.basename(path),
        "exit": p.returncode,
        "summary": tail[0],
        "needs_torch": "No module named 'torch'" in out or "No module named 'transformers'" in out,
    }


def inputs_for(model):
    """Random inputs of the model's graph inputs (integer inputs small and non-negative: ids and masks)."""
    import numpy as np
    from onnx import helper

    rng = np.random.default_rng(0)
    inits = {t.name for t in model.graph.initializer}
    wire = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 2 for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        a = rng.integers(0, 2, dims).astype(dtype) if np.issubdtype(dtype, np.integer) else rng.standard_normal(dims).astype(dtype)
        wire.append((i.name, tt.elem_type, dims, a.tobytes()))
    return wire


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("--max-bytes", type=int, default=262144, help="skip captured models larger than this")
    a = ap.parse_args()
    import onnx

    R = load_runner()
    files = sorted(
        f for f in glob.glob(os.path.join(a.tests, "test_*.py"))
        if not a.include or os.path.basename(f) in a.include
    )
    report = {"runner_version": R.version(), "files": [], "models": []}
    with tempfile.TemporaryDirectory() as capture:
        for f in files:
            r = run_file(f, capture)
            report["files"].append(r)
            print(f"{r['file']}: {r['summary']}{' (needs torch)' if r['needs_torch'] else ''}", file=sys.stderr)
        for path in sorted(glob.glob(os.path.join(capture, "*.onnx"))):
            if os.path.getsize(path) > a.max_bytes:
                report["models"].append({"capture": os.path.basename(path), "status": "skipped: larger than --max-bytes"})
                continue
            model = onnx.load(path)
            meta = {p.key: p.value for p in model.metadata_props}
            options = [(k, meta[f"oatest.{k}"]) for k in ("model_type", "num_heads", "hidden_size") if f"oatest.{k}" in meta]
            ref = R.run(model.SerializeToString(), inputs_for(model), "disable", [], 1, options)
            r = R.run(model.SerializeToString(), inputs_for(model), "basic", [], 1, options)
            # a test model ORT itself refuses unoptimized (some tests only compare graph structure) is no test
            fusions = [p for p in r["fired"] if p in R.FUSIONS] if ref["status"] == "ok" else []
            report["models"].append({"test": meta.get("oatest.capture.test", ""), "model_type": meta.get("oatest.model_type"),
                                     "reference": ref["status"], "reference_message": ref["message"][:300],
                                     "status": r["status"], "fired": r["fired"], "message": r["message"][:300]})
            for fusion in fusions:
                key = hashlib.sha256(model.SerializeToString()).hexdigest()[:16]
                pattern = {
                    "format": 1, "compiler": "ort-transformers", "compiler_version": R.version(), "pass": fusion,
                    "granularity": "model", "model_type": meta.get("oatest.model_type"),
                    "provenance": [{"test": meta.get("oatest.capture.test", "")}], "key": key,
                }
                props = {k: v for k, v in meta.items() if k != "oatest.capture.test"}
                props["oatest.pattern"] = json.dumps(pattern, sort_keys=True)
                m = onnx.ModelProto.FromString(model.SerializeToString())
                del m.metadata_props[:]
                onnx.helper.set_model_props(m, props)
                d = os.path.join(a.out, fusion)
                os.makedirs(d, exist_ok=True)
                tmp = os.path.join(d, f".model-{key}.onnx.tmp")
                onnx.save(m, tmp)
                os.replace(tmp, os.path.join(d, f"model-{key}.onnx"))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "extraction.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    fired = sorted({p for m in report["models"] for p in m.get("fired", []) if p in R.FUSIONS})
    print(f"{len(report['models'])} models captured; fusions firing: {len(fired)} {fired}", file=sys.stderr)


if __name__ == "__main__":
    main()
