#!/usr/bin/env python3
"""Standalone reproducer of a compiler optimizer bug found by oatest (template: oatest fills in CASE; for TVM
it prepends its Relax runner's modules, python/oatest_tvm*.py, whose `oatest_tvm` defines `run`; for
ort-transformers the runner of onnxruntime.transformers' optimizer, python/oatest_ortx.py with its pass table).

Needs only onnx, numpy and the compiler's Python package (onnxruntime, or apache-tvm); a TVM bug reduced to a
Relax module (module.json, inputs input_K.npy) needs only numpy and apache-tvm. Runs model.onnx on
input_K.pb (beside this file) once unoptimized (the reference) and once under the configuration that shows the
bug, each in a child process so that a crash or hang is observed rather than suffered.

Exit status: 1 while the bug reproduces (same symptom), 0 when it does not (fixed), 3 when something else
went wrong (a different symptom), 2 when this script cannot run. Outputs are compared by oatest's rule
(CASE["tolerance"]: per-dtype atol/rtol, ULPs for 16-bit floats, quantization steps for the outputs listed in
CASE["quantized"]), embedded below from python/oatest_compare.py.
"""
import json
import os
import subprocess
import sys
import tempfile

CASE = json.loads(r"""__OATEST_CASE__""")
HERE = os.path.dirname(os.path.abspath(__file__))
ORT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}


def load_inputs():
    if CASE.get("npy_inputs"):
        # a Relax module test (module.json): input_K.npy, named after main's parameters
        import numpy as np

        return {name: np.load(os.path.join(HERE, f"input_{k}.npy")) for k, name in enumerate(CASE["input_names"])}
    import onnx
    from onnx import numpy_helper

    feeds = {}
    for k in range(CASE["n_inputs"]):
        t = onnx.TensorProto()
        with open(os.path.join(HERE, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feeds[t.name] = numpy_helper.to_array(t)
    return feeds


def run_tvm(level, disabled):
    """Outputs of oatest's TVM runner, whose modules are defined at the top of this script."""
    from oatest_tvm import _from_numpy, _to_numpy, run

    with open(os.path.join(HERE, CASE.get("test_file", "model.onnx")), "rb") as f:
        model = f.read()
    wire = [_from_numpy(name, a) for name, a in load_inputs().items()]
    r = run(model, wire, level, disabled)
    if r["status"] != "ok":
        raise RuntimeError(r["message"])
    return [_to_numpy(t)[1] for t in r["outputs"]]


class OptimizerCrash(Exception):
    """An exception inside onnxruntime.transformers' optimize_model (the runner's `crash`)."""


def run_ortx(level, disabled):
    """Outputs of oatest's ort-transformers runner (defined at the top of this script): optimize_model with the
    fusions in `disabled` skipped, then the model in onnxruntime."""
    from oatest_ortx import _from_numpy, _to_numpy, run

    with open(os.path.join(HERE, CASE.get("test_file", "model.onnx")), "rb") as f:
        model = f.read()
    wire = [_from_numpy(name, a) for name, a in load_inputs().items()]
    r = run(model, wire, level, disabled, CASE.get("threads", 1), CASE.get("options", []))
    if r["status"] == "crash":
        raise OptimizerCrash(r["message"])
    if r["status"] != "ok":
        raise RuntimeError(r["message"])
    return [_to_numpy(t)[1] for t in r["outputs"]]


def run_ort(level, disabled):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[level])
    so.intra_op_num_threads = CASE.get("threads", 1)
    so.inter_op_num_threads = 1
    if level == CASE["level"] and level != "disable":
        # the optimized configuration's session entries (e.g. a named configuration such as all+gelu_approx)
        for key, value in CASE.get("entries", []):
            so.add_session_config_entry(key, value)
        # free-dimension overrides (all+free_dims): the model's symbolic input dims fixed by name
        for name, size in CASE.get("free_dims", []):
            so.add_free_dimension_override_by_name(name, size)
    if disabled:
        so.add_session_config_entry("optimization.disable_specified_optimizers", ";".join(disabled))
    sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), so, providers=["CPUExecutionProvider"])
    return sess.run(None, load_inputs())


def child(level, disabled, out_path):
    """Runs the model once and saves its outputs (or the error message)."""
    import numpy as np

    runner = {"tvm": run_tvm, "ort-transformers": run_ortx}.get(CASE.get("target"), run_ort)
    try:
        outs = runner(level, disabled)
    except Exception as e:  # noqa: BLE001 - the message is the finding
        with open(out_path + ".err", "w") as f:
            f.write(str(e))
        sys.exit(5 if isinstance(e, OptimizerCrash) else 4)
    np.savez(out_path, *outs)
    sys.exit(0)


def run_child(level, disabled):
    """('ok', outputs) | ('error', message) | ('crash', description) | ('hang', seconds)."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        cmd = [sys.executable, os.path.abspath(__file__), "--child", level, ";".join(disabled), out]
        try:
            p = subprocess.run(cmd, timeout=CASE["timeout_s"], capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return "hang", CASE["timeout_s"]
        if p.returncode in (4, 5):
            with open(out + ".err") as f:
                return "error" if p.returncode == 4 else "crash", f.read()
        if p.returncode != 0:
            tail = (p.stderr or "").strip().splitlines()[-3:]
            how = f"signal {-p.returncode}" if p.returncode < 0 else f"exit status {p.returncode}"
            return "crash", how + (": " + " | ".join(tail) if tail else "")
        # string outputs are object arrays, which np.savez pickles: our own file, read back as written
        with np.load(out + ".npz", allow_pickle=True) as z:
            return "ok", [z[f"arr_{i}"] for i in range(len(z.files))]


# __OATEST_COMPARE__


def compare(expected, actual):
    """oatest's measurement of `actual` against the reference `expected` (None: structurally different)."""
    dequantized = {int(k): step for k, step in CASE.get("dequantized", {}).items()}
    return measure(expected, actual, CASE["tolerance"], set(CASE.get("quantized", [])), dequantized)


def show(kind, value):
    if kind == "ok":
        return "ran: " + ", ".join(f"{v.dtype}{list(v.shape)}" for v in value)
    return f"{kind}: {str(value)[:400]}"


def main():
    try:
        import numpy  # noqa: F401

        if not CASE.get("npy_inputs"):
            import onnx  # noqa: F401
        if CASE.get("target") == "tvm":
            import tvm as compiler
        else:
            import onnxruntime as compiler
    except ImportError as e:
        onnx = "" if CASE.get("npy_inputs") else "onnx "
        print(f"cannot run: {e} (pip install {onnx}numpy {'apache-tvm' if CASE.get('target') == 'tvm' else 'onnxruntime'})")
        return 2
    print(f"{compiler.__name__} {compiler.__version__}; expecting {CASE['symptom']} under {CASE['config']}")
    ref_kind, ref = run_child("disable", [])
    print("reference (unoptimized):", show(ref_kind, ref))
    if CASE["level"] == "disable" and not CASE["disabled"]:
        # the bug is in the unoptimized build itself (e.g. a crash of the reference)
        if ref_kind == CASE["symptom"]:
            print(f"REPRODUCED: {ref_kind}")
            return 1
        print("not reproduced" if ref_kind == "ok" else f"a different symptom: {ref_kind}")
        return 0 if ref_kind == "ok" else 3
    if ref_kind != "ok":
        print("the unoptimized reference does not run: cannot judge")
        return 3
    kind, got = run_child(CASE["level"], CASE["disabled"])
    print(f"optimized ({CASE['level']}, disabled: {';'.join(CASE['disabled']) or '-'}):", show(kind, got))
    symptom = kind
    if kind == "ok":
        m = compare(ref, got)
        print(f"{describe(m)} (tolerance {CASE['tolerance']})")
        symptom = "inconsistency" if inconsistent(m) else "clean"
    if CASE["culprits"]:
        wk, wg = run_child(CASE["level"], CASE["disabled"] + CASE["culprits"])
        extra = ""
        if wk == "ok":
            extra = f", {describe(compare(ref, wg))}"
        print(f"with the culprits ({';'.join(CASE['culprits'])}) also disabled:", show(wk, wg) + extra)
    if symptom == CASE["symptom"]:
        print(f"REPRODUCED: {symptom}")
        return 1
    if symptom == "clean":
        print("not reproduced: the optimized run matches the reference")
        return 0
    print(f"a different symptom: {symptom} (expected {CASE['symptom']})")
    return 3


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], [p for p in sys.argv[3].split(";") if p], sys.argv[4])
    try:
        status = main()
    except Exception:  # noqa: BLE001 - this script's own failure is not the bug's verdict (1) nor a fix (0)
        import traceback

        traceback.print_exc()
        print("cannot run: repro.py itself failed (above)")
        status = 2
    sys.exit(status)
