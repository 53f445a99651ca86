"""oatest's semantic reference: onnx's own `onnx.reference.ReferenceEvaluator` (numpy, computing in the graph's
dtypes as the ONNX specification says), called from the worker process through pyo3 (src/compiler/onnxref.rs).
It is no compiler's optimizer and no compiler's kernels: triage asks it which side of an inconsistency is wrong.

Models from ONNX Runtime's optimizer tests carry a few `com.microsoft` ops; those whose meaning is simple and
documented (ORT's docs/ContribOperators.md) are defined here in numpy, in float32 as ORT's kernels compute:
QuantizeLinear/DequantizeLinear (the ONNX ops' meaning), Gelu, BiasGelu, FastGelu, FusedMatMul, QLinearAdd,
QuickGelu, FusedConv and FusedGemm (Conv and Gemm with ORT's fused activation), SkipLayerNormalization.
Any other unknown op makes the evaluator fail, and triage calls the inconsistency undecided. An ONNX op that
onnx.reference implements only from a later version (DequantizeLinear before 19) is evaluated by that version where
its meaning is the same on every input the older schema allows (OLDER_FORMS). Loop is evaluated as the ONNX
specification says where onnx.reference does not (an omitted condition, scan outputs of rank 2 and more).

`run(model_bytes, inputs, widen_half=False, approximate=(), in_float64=False)`: inputs and outputs are serialized
ONNX TensorProtos. With `in_float64`, every float tensor (float32, float16, bfloat16) is float64 instead, the
outputs too: the values rounding does not move, against which triage measures how far each side of a float
inconsistency is (a side no farther than the other is rounding, not a wrong rewrite).
`approximate` names approximations an optimizing configuration asks for by design, evaluated instead of the exact
op: "gelu" (com.microsoft Gelu and BiasGelu computed by FastGelu's tanh formula, what ONNX Runtime's opt-in
GeluApproximation makes of them), "erf" (the Erf of an Erf-built Gelu by the same tanh formula, for Gelu chains
that GeluFusion fuses first) and "weight_bias" (the float weights and biases that ORT's WeightBiasQuantization
quantizes, quantized the same way: oatest_weight_bias). Triage compares an optimized run with it to tell a
by-design approximation from a wrong result.
With `widen_half`, every
float16/bfloat16 tensor of the model (inputs, initializers, constants, value types, Cast targets, dtype
attributes, in subgraphs and functions too) is float32 instead, and the outputs are rounded to their declared
16-bit type only at the end: the model as a compiler computes it when it skips the intermediate 16-bit roundings
(ONNX Runtime's CPU provider runs 16-bit float ops in float32 through casts it inserts). Triage compares an
optimized run with it to tell a skipped rounding from a wrong result. Outputs are converted to the
element type the model declares for them when the evaluator returns another numpy type (it keeps Python scalars
and some ops' results in float64); an output whose type the model does not declare is returned as computed.
"""
from __future__ import annotations

import copy
import functools
import math
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_loop import Loop as _OnnxLoop
from onnx.reference.ops.op_conv_transpose import ConvTranspose as _OnnxConvTranspose
from onnx.reference.ops.op_max_pool import MaxPool as _OnnxMaxPool

_MS = "com.microsoft"
# the domain of ops that stand for an approximated op where only some of its nodes are approximated
_APPROX = "oatest.approximated"
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
    """In the scale's type, as the schema says (float64 when the model is evaluated in float64)."""
    scale = np.asarray(scale)
    wide = np.float64 if scale.dtype == np.float64 else np.float32
    zp = 0 if zero_point is None else _axis_shape(zero_point, x, axis).astype(wide)
    return ((x.astype(wide) - zp) * _axis_shape(scale, x, axis).astype(wide)).astype(scale.dtype)


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


class QuickGelu(OpRun):
    op_domain = _MS

    def _run(self, x, alpha=None):
        a = np.asarray(1.702 if alpha is None else alpha, dtype=x.dtype)
        return ((x / (1 + np.exp(-a * x))).astype(x.dtype),)


def _activation(y, name, params):
    """ORT's fused activations (FusedConv, FusedGemm: `activation` with its parameters)."""
    name = name.decode() if isinstance(name, bytes) else name
    p = [np.asarray(v, dtype=y.dtype) for v in params]
    if not name:
        return y
    if name == "Relu":
        return np.maximum(y, 0).astype(y.dtype)
    if name == "LeakyRelu":
        return np.where(y >= 0, y, y * (p[0] if p else np.asarray(0.01, y.dtype))).astype(y.dtype)
    if name == "Sigmoid":
        return (1 / (1 + np.exp(-y))).astype(y.dtype)
    if name == "Tanh":
        return np.tanh(y)
    if name == "Clip":
        return np.clip(y, p[0], p[1]).astype(y.dtype)
    if name == "HardSigmoid":
        return np.clip(y * p[0] + p[1], 0, 1).astype(y.dtype)
    raise NotImplementedError(f"fused activation {name}")


def _evaluate(op: str, inputs: list, **attrs):
    """The ONNX op `op` on `inputs` (None: omitted) with `attrs` (None: absent), by onnx.reference."""
    names = ["" if v is None else f"i{k}" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    node = onnx.helper.make_node(op, names, ["y"], **{k: v for k, v in attrs.items() if v is not None})
    feeds = {n: v for n, v in zip(names, inputs) if n}
    return ReferenceEvaluator(node).run(None, feeds)[0]


class FusedConv(OpRun):
    op_domain = _MS

    def _run(self, x, w, b=None, z=None, activation=None, activation_params=None, **conv):
        attrs = {k: conv.get(k) for k in ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")}
        y = _evaluate("Conv", [x, w, b], **attrs).astype(x.dtype)
        if z is not None:
            y = (y + z).astype(x.dtype)
        return (_activation(y, activation or "", list(activation_params or [])),)


class FusedGemm(OpRun):
    op_domain = _MS

    def _run(self, a, b, c=None, alpha=None, beta=None, transA=None, transB=None, activation=None,
             activation_alpha=None, activation_beta=None, activation_gamma=None, **_):
        y = _evaluate("Gemm", [a, b, c], alpha=alpha, beta=beta, transA=transA, transB=transB).astype(a.dtype)
        name = activation.decode() if isinstance(activation, bytes) else (activation or "")
        params = {"LeakyRelu": [activation_alpha], "HardSigmoid": [activation_alpha, activation_beta]}.get(name, [])
        if name == "LeakyRelu" and activation_alpha is None:
            params = []
        return (_activation(y, name, [v for v in params if v is not None]),)


class SkipLayerNormalization(OpRun):
    op_domain = _MS

    def _run(self, x, skip, gamma, beta=None, bias=None, epsilon=None):
        s = x + skip if bias is None else x + skip + bias
        s = s.astype(x.dtype)
        mean = s.mean(axis=-1, keepdims=True)
        var = ((s - mean) ** 2).mean(axis=-1, keepdims=True)
        inv = 1 / np.sqrt(var + np.asarray(1e-12 if epsilon is None else epsilon, dtype=x.dtype))
        y = (s - mean) * inv * gamma
        if beta is not None:
            y = y + beta
        return (y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32), s)


class MatMulNBits(OpRun):
    """com.microsoft MatMulNBits: A times the block-quantized B (N rows of K, `bits` per value packed low nibble
    first, blocks of `block_size` with a scale each and a uint8 zero point, 2^(bits-1) when omitted), transposed."""
    op_domain = _MS

    def _run(self, a, b, scales, zero_points=None, g_idx=None, bias=None, K=None, N=None, bits=None,
             block_size=None, **_):
        bits = bits or 4
        if bits not in (4, 8) or g_idx is not None or (zero_points is not None and zero_points.dtype != np.uint8):
            raise NotImplementedError("MatMulNBits: only 4 or 8 bits, no g_idx, uint8 or no zero points")
        blocks = (K + block_size - 1) // block_size

        def unpack(raw):
            raw = raw.reshape(N, -1).astype(np.uint8)
            return np.stack([raw & 0x0F, raw >> 4], axis=-1).reshape(N, -1) if bits == 4 else raw

        q = unpack(b)[:, : blocks * block_size].reshape(N, blocks, block_size).astype(np.float64)
        zp = 2.0 ** (bits - 1) if zero_points is None else unpack(zero_points)[:, :blocks].reshape(N, blocks, 1)
        w = ((q - zp) * scales.reshape(N, blocks, 1).astype(np.float64)).reshape(N, -1)[:, :K]
        y = a.astype(np.float64) @ w.T.astype(a.dtype).astype(np.float64)
        if bias is not None:
            y = y + bias.astype(np.float64)
        return (y.astype(a.dtype),)


CONTRIB_OPS = [DequantizeLinear, QuantizeLinear, Gelu, BiasGelu, FastGelu, FusedMatMul, QLinearAdd, QuickGelu,
               FusedConv, FusedGemm, SkipLayerNormalization, MatMulNBits]

class Sum(OpRun):
    # onnx.reference's Sum is Python's sum(), which starts from the integer 0: -0 + -0 came out +0 (a review found
    # GemmSumFusion's correct -inf judged wrong against it); the elements are added to one another only
    def _run(self, *args):
        return (functools.reduce(np.add, args).astype(args[0].dtype),)


# ONNX ops that onnx.reference implements only from a later version than a model may import, each with the first
# version it has and the earliest one whose meaning that implementation keeps on every input the older schema
# allows: DequantizeLinear-10 and -13 (per-tensor, and per-axis from 13) are DequantizeLinear-19 without float8.
class Loop(_OnnxLoop):
    """ONNX Loop as the specification says where onnx.reference (1.19) does not: an omitted `cond` input means
    true (onnx.reference ran no iteration and then failed, "need at least one array to concatenate"), and each
    scan output stacks its per-iteration values along a new first axis (np.vstack merged the first axes of values
    of rank 2 and more, and gave [n, 1] for scalars)."""

    def _run(self, M, cond, *args, context=None, body=None, attributes=None):
        body = self.body
        names = body.input_names
        inputs = dict.fromkeys(names)
        if context is not None:
            inputs.update(context)
        for name, value in zip(names[2:], args):
            inputs[name] = value
        cond = np.array(True) if cond is None else cond
        stacked = [[] for _ in range(self.K)]
        outputs, it = None, 0
        while bool(cond) and (M is None or it < M):
            if names and names[0]:
                inputs[names[0]] = np.array(it, dtype=None if M is None else M.dtype)
            if len(names) > 1 and names[1]:
                inputs[names[1]] = cond
            outputs = self._run_body(inputs, attributes=attributes)
            for k in range(self.K):
                stacked[k].append(outputs[-self.K + k])
            cond = outputs[self.output_index[body.output_names[0]]]
            for i, o in zip(names[2:], body.output_names[1:]):
                inputs[i] = outputs[self.output_index[o]]
            it += 1
        carried = [inputs[i] for i in names[2:]] if outputs is None else list(outputs[1 : 1 + self.N])
        scans = [np.stack(values) if values else np.empty((0,)) for values in stacked]
        return self._check_and_fix_outputs(tuple(carried + scans))


class GlobalMaxPool(OpRun):
    """ONNX GlobalMaxPool over every spatial axis: onnx.reference (1.19) takes the max over axes n-2 and n-1 and
    appends n-2 unit axes, right for 4-D inputs only (a 5-D input gave rank 6, a 3-D one a max over channels; a
    review found a NoopElimination finding left in contract/ for it)."""

    def _run(self, x):
        return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)


class MaxPool(_OnnxMaxPool):
    """ONNX MaxPool with explicit pads computed as the spec says (window positions over the padded input, the last
    starting inside it with ceil_mode); onnx.reference (1.22) sizes the output wrongly for uneven pads (pads [1, 0]
    over 2 elements with a kernel of 3: "output shape cannot be null", a real QDQ propagation bug left undecided).
    Indices (a second output) and auto_pad other than NOTSET stay onnx.reference's."""

    def _run(self, x, auto_pad=None, ceil_mode=None, dilations=None, kernel_shape=None, pads=None, **rest):
        if len(self.onnx_node.output) > 1 or auto_pad not in (None, "NOTSET") or not kernel_shape:
            return super()._run(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, **rest)
        n = x.ndim - 2
        strides = list(rest.get("strides") or [1] * n)
        dilations = list(dilations or [1] * n)
        pads = list(pads or [0] * (2 * n))
        low = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
        outs, ends = [], []
        for i in range(n):
            size, k, d, st = x.shape[2 + i], kernel_shape[i], dilations[i], strides[i]
            span = size + pads[i] + pads[n + i] - ((k - 1) * d + 1)
            out = (-(-span // st) if ceil_mode else span // st) + 1
            if ceil_mode and (out - 1) * st >= size + pads[i]:
                out -= 1
            # a window wholly in the padding has no value ONNX specifies: onnx.reference's own answer stays
            if any(all(not pads[i] <= o * st + j * d < pads[i] + size for j in range(k)) for o in range(out)):
                return super()._run(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, **rest)
            outs.append(out)
            ends.append(max(pads[n + i], (out - 1) * st + (k - 1) * d + 1 - size - pads[i]))
        padded = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], ends[i]) for i in range(n)], constant_values=low)
        y = np.full(x.shape[:2] + tuple(outs), low, dtype=x.dtype)
        for offset in np.ndindex(*kernel_shape):
            window = tuple(
                slice(o * dilations[i], o * dilations[i] + (outs[i] - 1) * strides[i] + 1, strides[i])
                for i, o in enumerate(offset)
            )
            y = np.maximum(y, padded[(slice(None), slice(None)) + window])
        return (y.astype(x.dtype),)


class ConvTranspose(_OnnxConvTranspose):
    """ONNX ConvTranspose of several groups, each group evaluated by onnx.reference on its own: onnx.reference (1.22)
    fails on any group > 1 ("cannot reshape array", a LayerNormFusionL2 bug fed by one was left undecided)."""

    def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, **rest):
        if not group or group == 1:
            return super()._run(X, W, B, auto_pad, dilations, group, **rest)
        c, m = X.shape[1] // group, W.shape[1]
        parts = [
            super(ConvTranspose, self)._run(
                X[:, g * c : (g + 1) * c],
                W[g * c : (g + 1) * c],
                None if B is None else B[g * m : (g + 1) * m],
                auto_pad,
                dilations,
                1,
                **rest,
            )[0]
            for g in range(group)
        ]
        return (np.concatenate(parts, axis=1),)


OLDER_FORMS = {"DequantizeLinear": (19, 10)}


def _older_forms(model: onnx.ModelProto) -> list:
    """Op classes for the ONNX ops `model` uses at an opset below onnx.reference's first implementation of them
    (see OLDER_FORMS), evaluated by that implementation; an op older than the versions listed stays unknown."""
    from onnx.reference.ops import load_op  # noqa: PLC0415

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    used = {n.op_type for n in _all_nodes(model) if n.domain in ("", "ai.onnx")}
    forms = []
    for op, (first, earliest) in sorted(OLDER_FORMS.items()):
        if op in used and earliest <= opset < first:
            impl = load_op("", op, first)
            # named like the op, the class reads the newest schema's attributes: the older ones are passed on
            names = impl._run.__code__.co_varnames[1 : impl._run.__code__.co_argcount]

            def _run(self, *args, _impl=impl, _names=names, **attrs):
                return _impl._run(self, *args, **{k: v for k, v in attrs.items() if k in _names})

            forms.append(type(op, (impl,), {"op_domain": "", "_run": _run}))
    return forms


def _all_nodes(model: onnx.ModelProto):
    """Every node of the model: its graph's, its subgraphs' (control-flow bodies) and its functions'."""

    def walk(nodes):
        for n in nodes:
            yield n
            for a in n.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    yield from walk(g.node)

    yield from walk(model.graph.node)
    for f in model.functions:
        yield from walk(f.node)

_SQRT_2_PI = math.sqrt(2.0 / math.pi)


# ULPs the approximations' tanh moves toward +-1 (positive) or away from it: ORT's tanh kernel is exact to a few ULPs
# (at 8.6 it gives 1 where tanh rounds to 1 - 6e-8; elsewhere 1 - 1.8e-7 for 1 - 6e-8), which decides a Gelu of
# -5 (-0 or -1.5e-7) and what a Reciprocal makes of it; "tanh_up" and "tanh_down" evaluate both ends
_TANH_NUDGE = {"tanh_up": 4, "tanh_down": -4}
_tanh_nudge = 0


def _tanh32(x32):
    """tanh of float32 values, correctly rounded to float32: ORT's kernel saturates to exactly +-1 where the rounded
    value is +-1, while numpy's float32 tanh stops one ULP short (a Gelu of -5.3 then -1.6e-7 instead of -0); moved
    by `_tanh_nudge` ULPs toward +-1 (or away), within [-1, 1]."""
    t = np.tanh(x32.astype(np.float64)).astype(np.float32)
    step = np.float32(1.0) if _tanh_nudge > 0 else np.float32(0.0)
    for _ in range(abs(_tanh_nudge)):
        t = np.where(t >= 0, np.nextafter(t, step), np.nextafter(t, -step)).astype(np.float32)
    return np.clip(t, np.float32(-1.0), np.float32(1.0))


def _tanh_gelu(x):
    """FastGelu's formula (ORT's kernel computes it in float32)."""
    x32 = x.astype(np.float32)
    inner = np.float32(_SQRT_2_PI) * (x32 + np.float32(0.044715) * x32**3)
    return (0.5 * x32 * (1.0 + _tanh32(inner))).astype(x.dtype)


def _approximating(name: str, domain: str, run):
    """An op class named like the exact op it replaces (the evaluator keys new ops by class name)."""
    return type(name, (OpRun,), {"op_domain": domain, "_run": run})


def _tanh_erf(self, z):
    """erf(z) as the tanh formula gives it for the Gelu x * 0.5 * (1 + erf(x / sqrt 2)), with x = z * sqrt 2."""
    x = z.astype(np.float32) * np.float32(math.sqrt(2.0))
    return (_tanh32(np.float32(_SQRT_2_PI) * (x + np.float32(0.044715) * x**3)).astype(z.dtype),)


# the ops each approximation evaluates instead of the exact ones
APPROXIMATIONS = {
    "gelu": [
        _approximating("Gelu", _MS, lambda self, x, **_: (_tanh_gelu(x),)),
        _approximating("BiasGelu", _MS, lambda self, a, b: (_tanh_gelu(a + b),)),
    ],
    # ORT approximates an Erf only inside the Gelu it fuses (x / sqrt 2 into Erf): `_mark_gelu_erfs` renames those
    "erf": [_approximating("GeluErf", _APPROX, _tanh_erf)],
    # WeightBiasQuantization's int8 weights and int32 biases: a model rewrite (oatest_weight_bias), no op of its own
    "weight_bias": [],
    # the approximations' tanh at either end of its kernel's accuracy (`_TANH_NUDGE`), with "gelu" or "erf"
    "tanh_up": [],
    "tanh_down": [],
}


def _constants(graph) -> dict:
    """The values of `graph`'s initializers and Constant nodes (with a `value`), by name, as arrays."""
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
    return consts


def _sqrt2_scaled(graph, value):
    """Whether `value` is produced by a Div by sqrt(2) or a Mul by 1/sqrt(2) of `graph` (a constant operand)."""
    producer = next((n for n in graph.node if value in n.output), None)
    if producer is None or producer.op_type not in ("Div", "Mul") or len(producer.input) != 2:
        return False
    c = _constants(graph).get(producer.input[1])
    if c is None:
        return False
    v = c.astype(np.float64).ravel()
    want = math.sqrt(2.0) if producer.op_type == "Div" else 1.0 / math.sqrt(2.0)
    return v.size == 1 and abs(v[0] - want) < 1e-5


def _gelu_erf(graph, erf) -> bool:
    """Whether Erf node `erf` of `graph` is a Gelu's as GeluFusion matches it: erf(x / sqrt 2), plus 1, times x (x
    * 0.5 * (1 + erf), or x * (1 + erf) * 0.5), each inner value read once."""
    if not _sqrt2_scaled(graph, erf.input[0]):
        return False
    producer = {o: n for n in graph.node for o in n.output}
    x = producer[erf.input[0]].input[0]
    consts = _constants(graph)

    def one(v):
        c = consts.get(v)
        return c is not None and c.size == 1 and float(c.ravel()[0]) == 1.0

    outputs = {o.name for o in graph.output}

    def alone(v):
        # GeluFusion fuses a chain whose inner values each have one reader and are no graph output
        return v not in outputs and sum(v in n.input for n in graph.node) == 1

    if not alone(erf.input[0]) or not alone(erf.output[0]):
        return False
    adds = [n.output[0] for n in graph.node if n.op_type == "Add" and erf.output[0] in n.input
            and any(one(v) for v in n.input if v != erf.output[0]) and alone(n.output[0])]
    for n in graph.node:
        if n.op_type != "Mul" or not any(a in n.input for a in adds):
            continue
        other = [v for v in n.input if v not in adds]
        by = producer.get(other[0]) if other else None
        if other and (other[0] == x or (by is not None and by.op_type == "Mul" and x in by.input)):
            return True
    return False


def _mark_gelu_erfs(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every Erf of a Gelu ([`_gelu_erf`]) renamed to `GeluErf`, which the "erf" approximation
    evaluates: ORT's GeluApproximation approximates those only, an Erf elsewhere stays exact (an Erf of a value
    divided by sqrt 2, plus 1, that is no Gelu's)."""
    model = copy.deepcopy(model)

    def mark(graph):
        for n in graph.node:
            if n.op_type == "Erf" and n.domain in ("", "ai.onnx") and _gelu_erf(graph, n):
                n.op_type, n.domain = "GeluErf", _APPROX
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    mark(a.g)

    mark(model.graph)
    if not any(o.domain == _APPROX for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(_APPROX, 1))
    return model



def _ops(approximate) -> list:
    unknown = [a for a in approximate if a not in APPROXIMATIONS]
    if unknown:
        raise ValueError(f"unknown approximation {unknown} (known: {sorted(APPROXIMATIONS)})")
    # the evaluator takes the first class of a name: the approximations come first
    own = [Loop, Sum, GlobalMaxPool, MaxPool, ConvTranspose]
    return [cls for a in approximate for cls in APPROXIMATIONS[a]] + CONTRIB_OPS + own


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


_HALF = (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
# attributes that name an element type
_DTYPE_ATTRS = ("to", "dtype")


_FLOATS = (onnx.TensorProto.FLOAT,) + _HALF


def _widen_tensor(t: onnx.TensorProto, kinds=_HALF, to=onnx.TensorProto.FLOAT) -> None:
    if t.data_type in kinds:
        np_to = onnx.helper.tensor_dtype_to_np_dtype(to)
        wide = numpy_helper.from_array(numpy_helper.to_array(t).astype(np_to), t.name)
        t.CopyFrom(wide)


def _widen_type(tp: onnx.TypeProto, kinds=_HALF, to=onnx.TensorProto.FLOAT) -> None:
    kind = tp.WhichOneof("value")
    if kind == "tensor_type" and tp.tensor_type.elem_type in kinds:
        tp.tensor_type.elem_type = to
    elif kind == "sequence_type":
        _widen_type(tp.sequence_type.elem_type, kinds, to)
    elif kind == "optional_type":
        _widen_type(tp.optional_type.elem_type, kinds, to)


def _widen_nodes(nodes, kinds=_HALF, to=onnx.TensorProto.FLOAT) -> None:
    for node in nodes:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in _DTYPE_ATTRS and a.i in kinds:
                a.i = to
            elif a.type == onnx.AttributeProto.TENSOR:
                _widen_tensor(a.t, kinds, to)
            elif a.type == onnx.AttributeProto.GRAPH:
                _widen_graph(a.g, kinds, to)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    _widen_graph(g, kinds, to)


def _widen_graph(g: onnx.GraphProto, kinds=_HALF, to=onnx.TensorProto.FLOAT) -> None:
    for v in list(g.input) + list(g.output) + list(g.value_info):
        _widen_type(v.type, kinds, to)
    for t in g.initializer:
        _widen_tensor(t, kinds, to)
    _widen_nodes(g.node, kinds, to)


def widen(model: onnx.ModelProto, kinds=_HALF, to=onnx.TensorProto.FLOAT) -> onnx.ModelProto:
    """A copy of `model` with every tensor of the element types `kinds` of type `to` instead (by default every
    float16/bfloat16 tensor float32; see the module's docstring)."""
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    _widen_graph(wide.graph, kinds, to)
    for f in wide.functions:
        _widen_nodes(f.node, kinds, to)
    return wide


def _dims(tp: onnx.TypeProto):
    """A tensor type's dimensions as (value or None, symbol or None) pairs; None when it has no shape."""
    if not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    return [
        (d.dim_value if d.HasField("dim_value") else None, d.dim_param if d.HasField("dim_param") else None)
        for d in tp.tensor_type.shape.dim
    ]


def shape_contradiction(model: onnx.ModelProto, values: dict) -> str:
    """Where the shapes ONNX shape inference gives the main graph's values (with the types the model declares)
    contradict the values an evaluation computed: a rank or size that differs, or one symbolic dimension that holds
    two sizes (Slice-10 copies its input's symbol to a shorter result). A compiler plans memory and fuses by
    those shapes. Empty when none does."""
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    bound = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        dims, value = _dims(vi.type), values.get(vi.name)
        if dims is None or value is None or not hasattr(value, "shape"):
            continue
        shape = tuple(np.shape(value))
        if len(dims) != len(shape):
            return f"'{vi.name}' is typed with rank {len(dims)} but holds shape {list(shape)}"
        for (size, symbol), n in zip(dims, shape):
            if size is not None and size != n:
                return f"'{vi.name}' is typed {[d[0] or d[1] for d in dims]} but holds shape {list(shape)}"
            if symbol:
                m, other = bound.setdefault(symbol, (n, vi.name))
                if m != n:
                    return (
                        f"ONNX shape inference gives '{other}' and '{vi.name}' the same dimension '{symbol}', but "
                        f"they hold {m} and {n} elements there"
                    )
    return ""


def _drop_unknown_attributes(model: onnx.ModelProto) -> None:
    """Removes from ONNX-domain nodes (in bodies too) the attributes their schema does not define, as ONNX Runtime
    ignores them (ORT's LayerNormFusion tests misspell `epsilon` as `epsion`); onnx.reference refuses them."""
    opsets = {o.domain: o.version for o in model.opset_import}
    version = opsets.get("", opsets.get("ai.onnx", 1))

    def visit(graph):
        for node in graph.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g)
                for g in a.graphs:
                    visit(g)
            if node.domain not in ("", "ai.onnx"):
                continue
            try:
                known = onnx.defs.get_schema(node.op_type, version, "").attributes
            except Exception:  # noqa: BLE001 - not at this opset: ORT's own form (LayerNormalization before 17)
                try:
                    known = onnx.defs.get_schema(node.op_type, "").attributes
                except Exception:  # noqa: BLE001 - an op without a schema is left to the evaluator
                    continue
            keep = [a for a in node.attribute if a.name in known]
            if len(keep) != len(node.attribute):
                del node.attribute[:]
                node.attribute.extend(keep)

    visit(model.graph)


def run(
    model_bytes: bytes,
    inputs: list,
    widen_half: bool = False,
    approximate=(),
    in_float64: bool = False,
    check_shapes: bool = False,
) -> dict:
    try:
        model = onnx.load_from_string(model_bytes)
        _drop_unknown_attributes(model)
        declared = _declared(model)
        feeds = {}
        for raw in inputs:
            t = onnx.TensorProto()
            t.ParseFromString(raw)
            feeds[t.name] = numpy_helper.to_array(t)
            if in_float64 and t.data_type in _FLOATS:
                feeds[t.name] = feeds[t.name].astype(np.float64)
            elif widen_half and t.data_type in _HALF:
                feeds[t.name] = feeds[t.name].astype(np.float32)
        if in_float64:
            model = widen(model, _FLOATS, onnx.TensorProto.DOUBLE)
            # the outputs stay float64: the exact values the float runs are measured against
            declared = {k: (onnx.TensorProto.DOUBLE if v in _FLOATS else v) for k, v in declared.items()}
        elif widen_half:
            model = widen(model)
        with warnings.catch_warnings():
            # numpy's overflow and invalid-value warnings are values (Inf, NaN), not failures
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                if "erf" in approximate:
                    model = _mark_gelu_erfs(model)
                if "weight_bias" in approximate:
                    import oatest_weight_bias

                    model = oatest_weight_bias.quantized_weights(model)
                global _tanh_nudge
                _tanh_nudge = sum(_TANH_NUDGE.get(a, 0) for a in approximate)
                evaluator = ReferenceEvaluator(model, new_ops=_ops(approximate) + _older_forms(model))
                if check_shapes:
                    every = evaluator.run(None, feeds, intermediate=True)
                    values = [every[name] for name in evaluator.output_names]
                    why = shape_contradiction(model, {**feeds, **every})
                    if why:
                        return {"status": "error", "message": f"inferred shapes: {why}", "outputs": []}
                else:
                    values = evaluator.run(None, feeds)
        outputs = []
        for name, value in zip(evaluator.output_names, values):
            array = _as_declared(value, declared.get(name, 0))
            outputs.append(numpy_helper.from_array(array, name).SerializeToString())
        return {"status": "ok", "message": "", "outputs": outputs}
    except Exception as e:  # noqa: BLE001 - any failure of the evaluator is an answer ("cannot decide")
        return {"status": "error", "message": f"onnx.reference: {type(e).__name__}: {e}", "outputs": []}
