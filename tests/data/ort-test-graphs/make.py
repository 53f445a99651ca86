"""Writes ONNX models transcribed from ONNX Runtime's C++ optimizer tests (MIT, see NOTICE), which build their
graphs in code with ModelTestBuilder: one small builder per test, the model named `<test file>/<TEST name>.onnx`
so that a pattern extracted from it names its test. Initializers the test draws at random (`MakeInitializer<float>
(shape, -1, 1)`) are drawn here with a fixed seed. Run: .venv/bin/python tests/data/ort-test-graphs/make.py
(rewrites the .onnx files beside it, or below the directory given as its argument); `oatest extract ort --models
tests/data/ort-test-graphs` extracts them.
Also (ONNX Runtime, MIT, see NOTICE): qdq_transformer_test.cc/WhereDummyDqTest_*.onnx, from
onnxruntime/test/optimizer/qdq_transformer_test.cc, TEST(QDQTransformerTests, WhereDummyDqTest),
TestWhereWithDqInput<float, uint8_t, uint8_t>(true, false, ...) and (false, true, ...): cond, DQ(xq), scalar ->
Where -> Q, the cases where WhereDummyDq modifies the graph; written at opset 20 with their own generator (seed 0)
and the values the test's ModelTestBuilder ranges allow."""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
RNG = np.random.default_rng(0)


def init(name, values, dtype=np.float32, shape=None):
    a = np.asarray(values, dtype=dtype)
    if shape is not None:
        a = a.reshape(shape)
    return onnx.numpy_helper.from_array(a, name)


def uniform(name, shape):
    return init(name, RNG.uniform(-1.0, 1.0, size=shape))


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def save(path, nodes, inputs, outputs, inits, opset, ms=False, config=None):
    g = helper.make_graph(nodes, os.path.splitext(os.path.basename(path))[0], inputs, outputs, inits)
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if ms else [])
    m = helper.make_model(g, opset_imports=opsets, producer_name="oatest ort-test-graphs")
    m.ir_version = 10 if opset >= 21 else 8  # 4-bit types need IR 10
    if config is not None:
        helper.set_model_props(m, {"oatest.config": config})
    onnx.checker.check_model(m)
    full = os.path.join(OUT, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    onnx.save(m, full)


def slice_concat_to_space_to_depth():
    # graph_transform_test.cc, TEST_F(GraphTransformationTests, SliceConcatToSpaceToDepthFusionTest), opset 13
    inits = [init("axes_hw", [2, 3], np.int64), init("steps2", [2, 2], np.int64)]
    nodes = []
    for k, (h, w) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        inits += [init(f"starts{h}{w}", [h, w], np.int64), init(f"ends{h}{w}", [8, 8], np.int64)]
        nodes.append(helper.make_node("Slice", ["input", f"starts{h}{w}", f"ends{h}{w}", "axes_hw", "steps2"],
                                      [f"slice{h}{w}_out"]))
    nodes.append(helper.make_node("Concat", [f"slice{h}{w}_out" for h, w in [(0, 0), (0, 1), (1, 0), (1, 1)]],
                                  ["concat_out"], axis=1))
    nodes.append(helper.make_node("Identity", ["concat_out"], ["output"]))
    save("graph_transform_test.cc/SliceConcatToSpaceToDepthFusionTest.onnx", nodes,
         [tensor("input", TensorProto.FLOAT, [1, 3, 8, 8])], [tensor("output", TensorProto.FLOAT, [1, 12, 4, 4])],
         inits, 13)


def gather_to_slice():
    # graph_transform_test.cc, TEST_F(GraphTransformationTests, GatherToSliceFusion): opset 12 with int32
    # indices, opset 14 with int64
    for opset, dtype, tag in [(12, np.int32, "int32"), (14, np.int64, "int64")]:
        inits = [init("range_input_1", 0, dtype), init("range_input_2", 8, dtype), init("range_input_3", 1, dtype)]
        nodes = [helper.make_node("Range", ["range_input_1", "range_input_2", "range_input_3"], ["range_output"]),
                 helper.make_node("Gather", ["data_arg", "range_output"], ["gather_output"], axis=2)]
        save(f"graph_transform_test.cc/GatherToSliceFusion.opset{opset}_{tag}.onnx", nodes,
             [tensor("data_arg", TensorProto.FLOAT, [8, 8, 8, 8])],
             [tensor("gather_output", TensorProto.FLOAT, [8, 8, 8, 8])], inits, opset)


def bias_skip_layer_norm():
    # graph_transform_test_layernorm.cc, TEST_F(GraphTransformationTests, BiasSkipLayerNormFusion_AddAtInput0),
    # opset 17
    inits = [uniform("matmul_b", [8, 4]), init("gamma", [1.0] * 4), init("beta", [0.0] * 4),
             init("bias", [0.1, 0.2, 0.3, 0.4])]
    nodes = [helper.make_node("MatMul", ["matmul_a", "matmul_b"], ["matmul_out"]),
             helper.make_node("Add", ["matmul_out", "bias"], ["add_out"]),
             helper.make_node("SkipLayerNormalization", ["add_out", "skip", "gamma", "beta"], ["sln_out"],
                              domain="com.microsoft")]
    save("graph_transform_test_layernorm.cc/BiasSkipLayerNormFusion_AddAtInput0.onnx", nodes,
         [tensor("matmul_a", TensorProto.FLOAT, [2, 4, 8]), tensor("skip", TensorProto.FLOAT, [2, 4, 4])],
         [tensor("sln_out", TensorProto.FLOAT, [2, 4, 4])], inits, 17, ms=True)


def bias_skip_layer_norm_with_cast():
    # graph_transform_test_layernorm.cc, TEST_F(GraphTransformationTests, BiasSkipLayerNormFusion_WithCast), opset 17
    inits = [init("matmul_b", RNG.uniform(-1.0, 1.0, size=[8, 4]), np.float16), init("gamma", [1.0] * 4),
             init("beta", [0.0] * 4), init("bias", [0.1, 0.2, 0.3, 0.4])]
    nodes = [helper.make_node("MatMul", ["matmul_a", "matmul_b"], ["matmul_out"]),
             helper.make_node("Cast", ["matmul_out"], ["cast_out"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["cast_out", "bias"], ["add_out"]),
             helper.make_node("SkipLayerNormalization", ["add_out", "skip", "gamma", "beta"], ["sln_out"],
                              domain="com.microsoft")]
    save("graph_transform_test_layernorm.cc/BiasSkipLayerNormFusion_WithCast.onnx", nodes,
         [tensor("matmul_a", TensorProto.FLOAT16, [2, 4, 8]), tensor("skip", TensorProto.FLOAT, [2, 4, 4])],
         [tensor("sln_out", TensorProto.FLOAT, [2, 4, 4])], inits, 17, ms=True)


def relu_quant():
    # qdq_transformer_test.cc, TEST(QDQTransformerTests, ReluQuantFusion_Level2Only), opset 18, its fusing case
    # (zero point -128; AddDequantizeLinearNode/AddQuantizeLinearNode take scalar scale and zero point initializers)
    inits = [init("scale", 1.0), init("zp", -128, np.int8)]
    nodes = [helper.make_node("DequantizeLinear", ["input", "scale", "zp"], ["dq_output"]),
             helper.make_node("Relu", ["dq_output"], ["relu_output"]),
             helper.make_node("QuantizeLinear", ["relu_output", "scale", "zp"], ["q_output"]),
             helper.make_node("DequantizeLinear", ["q_output", "scale", "zp"], ["output"])]
    save("qdq_transformer_test.cc/ReluQuantFusion_Level2Only.onnx", nodes,
         [tensor("input", TensorProto.INT8, [1, 2, 2, 2])], [tensor("output", TensorProto.FLOAT, [1, 2, 2, 2])],
         inits, 18)


def where_dummy_dq(is_dq_1: bool, is_dq_2: bool) -> onnx.ModelProto:
    """TestWhereWithDqInput<float, uint8_t, uint8_t>(is_dq_1, is_dq_2, ...)."""
    rng = np.random.default_rng(0)
    inits, nodes, inputs = [], [], []

    def scalar(name, dtype, value):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def branch(k: int, is_dq: bool) -> str:
        if not is_dq:
            # builder.MakeInitializer<float>({}, 0.0, 1.0)
            return scalar(f"where_in{k}", np.float32, rng.uniform(0.0, 1.0))
        # builder.MakeInput<uint8_t>({4, 3, 32}, 0, 1); MakeInitializer<float>({}, 0, 1); <uint8_t>({}, 0, 1)
        inputs.append(helper.make_tensor_value_info(f"dq_input{k}", TensorProto.UINT8, [4, 3, 32]))
        s = scalar(f"dq_scale{k}", np.float32, rng.uniform(0.0, 1.0))
        z = scalar(f"dq_zp{k}", np.uint8, rng.integers(0, 2))
        nodes.append(helper.make_node("DequantizeLinear", [f"dq_input{k}", s, z], [f"where_in{k}"], name=f"dq{k}"))
        return f"where_in{k}"

    x, y = branch(1, is_dq_1), branch(2, is_dq_2)
    inputs.append(helper.make_tensor_value_info("where_cond", TensorProto.BOOL, [4, 3, 32]))
    nodes.append(helper.make_node("Where", ["where_cond", x, y], ["where_out"], name="where"))
    qs = scalar("q_scale", np.float32, rng.uniform(0.0, 1.0))
    qz = scalar("q_zp", np.uint8, rng.integers(0, 2))
    nodes.append(helper.make_node("QuantizeLinear", ["where_out", qs, qz], ["q_out"], name="q"))
    out = helper.make_tensor_value_info("q_out", TensorProto.UINT8, [4, 3, 32])
    graph = helper.make_graph(nodes, "WhereDummyDqTester", inputs, [out], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    m.doc_string = (
        "onnxruntime/test/optimizer/qdq_transformer_test.cc TEST(QDQTransformerTests, WhereDummyDqTest): "
        f"TestWhereWithDqInput<float, uint8_t, uint8_t>({str(is_dq_1).lower()}, {str(is_dq_2).lower()}, ...)"
    )
    onnx.checker.check_model(m, full_check=True)
    return m


def where_dummy_dq_models():
    out = os.path.join(OUT, "qdq_transformer_test.cc")
    os.makedirs(out, exist_ok=True)
    for name, dq1, dq2 in [("WhereDummyDqTest_dq_scalar", True, False), ("WhereDummyDqTest_scalar_dq", False, True)]:
        onnx.save(where_dummy_dq(dq1, dq2), os.path.join(out, f"{name}.onnx"))


def dq_matmulnbits(name, with_zp=False, zp=8, with_cast=False, m=4, n=8, k=32, block=16):
    """dq_matmulnbits_fusion_test.cc (microsoft/onnxruntime main), TEST_F(DQMatMulNBitsFusionTest, <name>), opset
    21: BuildPattern1Graph: DQ(uint4 [N, K/block, block], axis 2, block_size) -> Reshape([N, K]) ->
    Transpose([1, 0]) -> [Cast to float] -> MatMul, with the test's values (weights i % 16, scales 0.1 + 0.01 (i %
    10)). Its Gemm cases do not fuse in ONNX Runtime 1.32.0 and are left out. The pass is opt-in: the model says
    so in metadata `oatest.config` (a named configuration of data/ort-configs.toml), which extraction and the
    tests spliced from its patterns run."""
    blocks = k // block
    inits = [helper.make_tensor("weight", TensorProto.UINT4, [n, blocks, block], [i % 16 for i in range(n * k)]),
             init("scale", [0.1 + 0.01 * (i % 10) for i in range(n * blocks)], shape=[n, blocks, 1]),
             init("shape", [n, k], np.int64)]
    dq_in = ["weight", "scale"]
    if with_zp:
        inits.append(helper.make_tensor("zp", TensorProto.UINT4, [n, blocks, 1], [zp] * (n * blocks)))
        dq_in.append("zp")
    nodes = [helper.make_node("DequantizeLinear", dq_in, ["dq_out"], axis=2, block_size=block),
             helper.make_node("Reshape", ["dq_out", "shape"], ["reshape_out"]),
             helper.make_node("Transpose", ["reshape_out"], ["transpose_out"], perm=[1, 0])]
    b = "transpose_out"
    if with_cast:
        nodes.append(helper.make_node("Cast", [b], ["cast_out"], to=TensorProto.FLOAT))
        b = "cast_out"
    nodes.append(helper.make_node("MatMul", ["input_a", b], ["output"]))
    path = f"dq_matmulnbits_fusion_test.cc/DQMatMulNBitsFusionTest_{name}.onnx"
    save(path, nodes, [tensor("input_a", TensorProto.FLOAT, [m, k])], [tensor("output", TensorProto.FLOAT, [m, n])],
         inits, 21, config="dq_matmulnbits")


def dq_matmulnbits_models():
    dq_matmulnbits("Pattern1_MatMul_NoZP")
    dq_matmulnbits("Pattern1_MatMul_WithNonDefaultZP", with_zp=True, zp=3)
    dq_matmulnbits("Pattern1_MatMul_WithCast", with_cast=True)
    dq_matmulnbits("Pattern1_BlockSize32", m=2, n=4, k=64, block=32)


if __name__ == "__main__":
    where_dummy_dq_models()
    slice_concat_to_space_to_depth()
    gather_to_slice()
    bias_skip_layer_norm()
    bias_skip_layer_norm_with_cast()
    relu_quant()
    dq_matmulnbits_models()
