"""ONNX Runtime's WeightBiasQuantization, as a model rewrite: what the model computes once the pass has quantized the
float weights and biases of a Conv, ConvTranspose or Gemm between quantized values (the "weight_bias" approximation
of oatest_onnxref). The pass does this by design: a partly quantized model gets its weights quantized to int8
(per tensor, ORT's GetQuantizationParameter: the range widened to hold 0, (max - min) / 255, the zero point rounded
half to even) and its biases to int32 at the input scale times the weight scale. Evaluating the rewritten model
tells a deviation the quantization makes from one the rest of the optimizer makes.

Mirrors onnxruntime/core/optimizer/qdq_transformer/weight_bias_quantization.cc (MIT, Microsoft Corporation).
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _round_half_even(x: np.float32) -> np.float32:
    return np.float32(np.round(np.float32(x)))


def _int8_parameters(w: np.ndarray) -> tuple[np.float32, np.int8]:
    lo = np.float32(min(float(w.min()), 0.0)) if w.size else np.float32(0)
    hi = np.float32(max(float(w.max()), 0.0)) if w.size else np.float32(0)
    scale = np.float32(1.0) if hi == lo else np.float32((hi - lo) / np.float32(255.0))
    zp = _round_half_even(np.clip(np.float32(-128.0) - lo / scale, -128.0, 127.0))
    return scale, np.int8(zp)


def _path_to_quantize(graph, node) -> bool:
    """Whether `node`'s only output leads, through Relu or Clip, each the only reader, to a QuantizeLinear."""
    current = node
    while True:
        if len(current.output) != 1:
            return False
        readers = [n for n in graph.node if current.output[0] in n.input]
        if len(readers) != 1:
            return False
        if readers[0].op_type == "QuantizeLinear":
            return True
        if readers[0].op_type not in ("Relu", "Clip"):
            return False
        current = readers[0]


# What QDQPropagationTransformer moves a DequantizeLinear past (its CanNodePropagate, ORT 1.32): when it fired too,
# the pass sees a DequantizeLinear reached through them as the node's own input.
_PROPAGATED = ("MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice")


def _dequantized(graph, producer, value):
    """The DequantizeLinear that gives `value`, directly or through ops QDQ propagation moves it past (each read
    once), else None."""
    node = producer.get(value)
    while node is not None and node.op_type in _PROPAGATED and node.domain in ("", "ai.onnx"):
        if sum(node.output[0] in n.input for n in graph.node) != 1:
            return None
        node = producer.get(node.input[0])
    return node if node is not None and node.op_type == "DequantizeLinear" else None


def _rewrite(graph) -> None:
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    scalar = lambda v: v in inits and numpy_helper.to_array(inits[v]).size == 1  # noqa: E731
    added_nodes, added_inits = [], []
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _rewrite(a.g)
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("Conv", "ConvTranspose", "Gemm"):
            continue
        if len(node.input) < 2:
            continue
        dq0 = _dequantized(graph, producer, node.input[0])
        if dq0 is None or not scalar(dq0.input[1]):
            continue
        if not _path_to_quantize(graph, node):
            continue
        dq1 = producer.get(node.input[1])
        if dq1 is not None and dq1.op_type != "DequantizeLinear":
            dq1 = None
            if node.input[1] not in inits:
                continue
        if dq1 is None and (node.input[1] not in inits or inits[node.input[1]].data_type != onnx.TensorProto.FLOAT):
            continue
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if bias is not None and (bias not in inits or len(inits[bias].dims) != 1):
            continue
        if dq1 is not None and (bias is None or not scalar(dq1.input[1])):
            # a per-channel weight scale: left as the pass's own axis checks would (rare; not modelled)
            continue
        name = node.name or node.output[0]
        if dq1 is None:
            w = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
            scale, zp = _int8_parameters(w)
            q = np.clip(np.round(w / scale) + np.float32(zp), -128, 127).astype(np.int8)
            wq, ws, wz = f"{name}__wb_wq", f"{name}__wb_ws", f"{name}__wb_wz"
            added_inits += [numpy_helper.from_array(q, wq), numpy_helper.from_array(np.array(scale, np.float32), ws),
                            numpy_helper.from_array(np.array(zp, np.int8), wz)]
            added_nodes.append(helper.make_node("DequantizeLinear", [wq, ws, wz], [f"{name}__wb_w"]))
            node.input[1] = f"{name}__wb_w"
            weight_scale = np.array(scale, np.float32)
        else:
            weight_scale = numpy_helper.to_array(inits[dq1.input[1]]).astype(np.float32)
        if bias is not None:
            input_scale = numpy_helper.to_array(inits[dq0.input[1]]).astype(np.float32)
            bias_scale = (input_scale * weight_scale).astype(np.float32).reshape(())
            b = numpy_helper.to_array(inits[bias]).astype(np.float32)
            bq = np.round(b / bias_scale).astype(np.int32)
            bn, bs = f"{name}__wb_bq", f"{name}__wb_bs"
            added_inits += [numpy_helper.from_array(bq, bn), numpy_helper.from_array(bias_scale, bs)]
            added_nodes.append(helper.make_node("DequantizeLinear", [bn, bs], [f"{name}__wb_b"]))
            node.input[2] = f"{name}__wb_b"
    if added_nodes:
        graph.initializer.extend(added_inits)
        nodes = list(added_nodes) + list(graph.node)
        del graph.node[:]
        graph.node.extend(nodes)


def quantized_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with the weights and biases ORT's WeightBiasQuantization quantizes quantized the same way."""
    model = copy.deepcopy(model)
    _rewrite(model.graph)
    return model
