"""oatest's semantic reference: onnx's own `onnx.reference.ReferenceEvaluator` (numpy, computing in the graph's
dtypes as the ONNX specification says), called from the worker process through pyo3 (src/compiler/onnxref.rs).
It is no compiler's optimizer and no compiler's kernels: triage asks it which side of an inconsistency is wrong.

Models from ONNX Runtime's optimizer tests carry a few `com.microsoft` ops; those whose meaning is simple and
documented (ORT's docs/ContribOperators.md) are defined here in numpy, in float32 as ORT's kernels compute:
QuantizeLinear/DequantizeLinear (the ONNX ops' meaning), Gelu, BiasGelu, FastGelu, FusedMatMul, QLinearAdd.
Any other unknown op makes the evaluator fail, and triage calls the inconsistency undecided.

`run(model_bytes, inputs)`: inputs and outputs are serialized ONNX TensorProtos. Outputs are converted to the
element type the model declares for them when the evaluator returns another numpy type (it keeps Python scalars
and some ops' results in float64); an output whose type the model does not declare is returned as computed.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

_MS = "com.microsoft"
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def _axis_shape(scale, x, axis):
    """`scale` (or a zero point) shaped to broadcast along `axis` of `x` (per-tensor when it has one element)."""
    scale = np.asarray(scale)
    if scale.size <= 1:
        return scale.reshape(())
    shape = [1] * x.ndim
    shape[axis % x.ndim] = scale.size
    return scale.reshape(shape)


def _dequantize(x, scale, zero_point=None, axis=1):
    zp = 0 if zero_point is None else _axis_shape(zero_point, x, axis).astype(np.float32)
    return ((x.astype(np.float32) - zp) * _axis_shape(scale, x, axis).astype(np.float32)).astype(np.float32)


def _quantize(x, scale, zero_point=None, axis=1):
    dtype = np.uint8 if zero_point is None else np.asarray(zero_point).dtype
    zp = 0 if zero_point is None else _axis_shape(zero_point, x, axis).astype(np.float32)
    q = np.rint(x.astype(np.float32) / _axis_shape(scale, x, axis).astype(np.float32)) + zp
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def _gelu(x):
    return (0.5 * x * (1.0 + _ERF(x.astype(np.float64) / math.sqrt(2.0)))).astype(x.dtype)


class DequantizeLinear(OpRun):
    op_domain = _MS

    def _run(self, x, scale, zero_point=None, axis=None, **_):
        return (_dequantize(x, scale, zero_point, 1 if axis is None else axis),)


class QuantizeLinear(OpRun):
    op_domain = _MS

    def _run(self, x, scale, zero_point=None, axis=None, **_):
        return (_quantize(x, scale, zero_point, 1 if axis is None else axis),)


class Gelu(OpRun):
    op_domain = _MS

    # the ONNX Gelu's schema lends its attributes (`approximate`) to this one: ignored, ORT's has none
    def _run(self, x, **_):
        return (_gelu(x),)


class BiasGelu(OpRun):
    op_domain = _MS

    def _run(self, a, b):
        return (_gelu(a + b),)


class FastGelu(OpRun):
    op_domain = _MS

    def _run(self, x, bias=None):
        if bias is not None:
            x = x + bias
        x32 = x.astype(np.float32)
        y = 0.5 * x32 * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) * (x32 + np.float32(0.044715) * x32**3)))
        return (y.astype(x.dtype),)


class FusedMatMul(OpRun):
    op_domain = _MS

    def _run(self, a, b, alpha=None, transA=None, transB=None, transBatchA=None, transBatchB=None):
        if transBatchA or transBatchB:
            raise NotImplementedError("FusedMatMul with transBatchA/transBatchB")
        if transA and a.ndim >= 2:
            a = np.swapaxes(a, -1, -2)
        if transB and b.ndim >= 2:
            b = np.swapaxes(b, -1, -2)
        y = np.matmul(a, b) * np.asarray(1.0 if alpha is None else alpha, dtype=a.dtype)
        return (y.astype(a.dtype),)


class QLinearAdd(OpRun):
    op_domain = _MS

    def _run(self, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
        total = _dequantize(a, a_scale, a_zp) + _dequantize(b, b_scale, b_zp)
        return (_quantize(total, c_scale, c_zp if c_zp is not None else a_zp),)


CONTRIB_OPS = [DequantizeLinear, QuantizeLinear, Gelu, BiasGelu, FastGelu, FusedMatMul, QLinearAdd]


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
                evaluator = ReferenceEvaluator(model, new_ops=CONTRIB_OPS)
                values = evaluator.run(None, feeds)
        declared = _declared(model)
        outputs = []
        for name, value in zip(evaluator.output_names, values):
            array = _as_declared(value, declared.get(name, 0))
            outputs.append(numpy_helper.from_array(array, name).SerializeToString())
        return {"status": "ok", "message": "", "outputs": outputs}
    except Exception as e:  # noqa: BLE001 - any failure of the evaluator is an answer ("cannot decide")
        return {"status": "error", "message": f"onnx.reference: {type(e).__name__}: {e}", "outputs": []}
