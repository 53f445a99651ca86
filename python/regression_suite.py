"""Regression suite exported by oatest (`oatest export`): every case directory holds model.onnx and
test_data_set_0/{input_K,output_K}.pb in the ONNX backend-test layout, the outputs from the unoptimized
reference. Run with pytest; OATEST_LEVEL=disable|basic|extended|layout|all picks the ONNX Runtime optimization
level (default: disable). Optimized levels run each case in a child process, so a crash fails one test.

cases.json says what each case is: a bug (symptom and culprit passes) or a passing test that fires a pass, which
outputs come from quantized ops, and the tolerance: outputs are judged by oatest's rule (embedded below from
python/oatest_compare.py: per-dtype atol/rtol, ULPs for 16-bit floats, quantization steps).
"""
import glob
import json
import os
import subprocess
import sys

import onnx
import pytest
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
LEVEL = os.environ.get("OATEST_LEVEL", "disable")
LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
with open(os.path.join(HERE, "cases.json")) as f:
    MANIFEST = json.load(f)
CASES = sorted(MANIFEST["cases"])

# __OATEST_COMPARE__


def tensors(case, prefix):
    files = glob.glob(os.path.join(HERE, case, "test_data_set_0", f"{prefix}_*.pb"))
    files.sort(key=lambda p: int(os.path.basename(p)[len(prefix) + 1 : -3]))
    out = []
    for p in files:
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        out.append((t.name, numpy_helper.to_array(t)))
    return out


def run_case(case, level):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(HERE, case, "model.onnx"), so, providers=["CPUExecutionProvider"])
    return sess.run(None, dict(tensors(case, "input")))


def check(case, got):
    expected = tensors(case, "output")
    assert len(got) == len(expected), f"{case}: {len(got)} outputs, expected {len(expected)}"
    info = MANIFEST["cases"][case]
    quantized = {k for k, (name, _) in enumerate(expected) if name in info.get("quantized", [])}
    steps = info.get("dequantized", {})
    dequantized = {k: steps[name] for k, (name, _) in enumerate(expected) if name in steps}
    m = measure([e for _, e in expected], got, MANIFEST["tolerance"], quantized, dequantized)
    assert not inconsistent(m), f"{case}: {describe(m)}"


@pytest.mark.parametrize("case", CASES)
def test_case(case):
    if LEVEL == "disable":
        check(case, run_case(case, LEVEL))
        return
    p = subprocess.run([sys.executable, os.path.abspath(__file__), case, LEVEL], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, f"{case} under {LEVEL}: exit {p.returncode}: {p.stdout[-2000:]} {p.stderr[-2000:]}"


if __name__ == "__main__":
    try:
        check(sys.argv[1], run_case(sys.argv[1], sys.argv[2]))
    except AssertionError as e:
        print(e)
        sys.exit(1)
