"""oatest's semantic reference: onnx's own `onnx.reference.ReferenceEvaluator` (numpy, computing in the graph's
dtypes as the ONNX specification says), called from the worker process through pyo3 (src/compiler/onnxref.rs).
It is no compiler's optimizer and no compiler's kernels: triage asks it which side of an inconsistency is wrong.

`run(model_bytes, inputs)`: inputs and outputs are serialized ONNX TensorProtos. Outputs are converted to the
element type the model declares for them when the evaluator returns another numpy type (it keeps Python scalars
and some ops' results in float64); an output whose type the model does not declare is returned as computed.
"""
from __future__ import annotations

import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator


def version() -> str:
    return f"onnx {onnx.__version__} (onnx.reference), numpy {np.__version__}"


def _declared(model: onnx.ModelProto) -> dict:
    """Output name -> declared ONNX element type (0 when not declared)."""
    return {o.name: o.type.tensor_type.elem_type for o in model.graph.output}


def _as_declared(value, elem_type: int):
    array = np.asarray(value)
    if elem_type == 0:
        return array
    want = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    if array.dtype == want:
        return array
    return array.astype(want)


def run(model_bytes: bytes, inputs: list) -> dict:
    try:
        model = onnx.load_from_string(model_bytes)
        feeds = {}
        for raw in inputs:
            t = onnx.TensorProto()
            t.ParseFromString(raw)
            feeds[t.name] = numpy_helper.to_array(t)
        with warnings.catch_warnings():
            # numpy's overflow and invalid-value warnings are values (Inf, NaN), not failures
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                evaluator = ReferenceEvaluator(model)
                values = evaluator.run(None, feeds)
        declared = _declared(model)
        outputs = []
        for name, value in zip(evaluator.output_names, values):
            array = _as_declared(value, declared.get(name, 0))
            outputs.append(numpy_helper.from_array(array, name).SerializeToString())
        return {"status": "ok", "message": "", "outputs": outputs}
    except Exception as e:  # noqa: BLE001 - any failure of the evaluator is an answer ("cannot decide")
        return {"status": "error", "message": f"onnx.reference: {type(e).__name__}: {e}", "outputs": []}
