"""Load, check and run ONNX models with onnx's checker and ONNX Runtime (CPU).

Used by the main job (to show generated seeds load and run) and by the tests. Standalone:
    python python/ortcheck.py DIR_OR_FILES...   -> one line per failing model, a summary, exit 1 on failure
"""
from __future__ import annotations

import collections
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort

NP_OF_ONNX = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64, onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT8: np.int8, onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BOOL: np.bool_,
}
LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic random values for every graph input that is not an initializer."""
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        dt = NP_OF_ONNX[tt.elem_type]
        if dt == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(dt, np.integer):
            lo = 0 if np.issubdtype(dt, np.unsignedinteger) else -8
            feeds[vi.name] = rng.integers(lo, 8, size=shape).astype(dt)
        else:
            feeds[vi.name] = rng.uniform(-3, 3, size=shape).astype(dt)
    return feeds


def session(path: str | pathlib.Path, level: str = "all") -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def run(path: str | pathlib.Path, level: str = "all", seed: int = 0) -> list[np.ndarray]:
    model = onnx.load(str(path))
    return session(path, level).run(None, random_inputs(model, seed))


def check_one(path: pathlib.Path, levels=("disable", "all")) -> str | None:
    """None if the model passes the full checker and runs at every level, else the problem."""
    try:
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    except Exception as e:  # noqa: BLE001 - report whatever the checker says
        return f"checker: {str(e).splitlines()[0]}"
    for level in levels:
        try:
            run(path, level)
        except Exception as e:  # noqa: BLE001
            return f"onnxruntime ({level}): {str(e).splitlines()[0]}"
    return None


def model_files(args: list[str]) -> list[pathlib.Path]:
    files: list[pathlib.Path] = []
    for a in args:
        p = pathlib.Path(a)
        files.extend(sorted(p.rglob("*.onnx")) if p.is_dir() else [p])
    return files


def main(argv: list[str]) -> int:
    files = model_files(argv)
    failures = collections.Counter()
    for f in files:
        problem = check_one(f)
        if problem:
            failures[problem.split(":")[0]] += 1
            print(f"FAIL {f}: {problem}")
    ok = len(files) - sum(failures.values())
    print(f"{ok} of {len(files)} models pass onnx.checker(full_check=True) and run in onnxruntime {ort.__version__}")
    return 0 if files and not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
