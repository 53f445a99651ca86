"""Protobuf round trip through oatest's IR on models oatest did not write: ONNX's own node test models."""
from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx.numpy_helper as nh
import onnxruntime as ort
import pytest

ort.set_default_logger_severity(3)

NODE_TESTS = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"


@pytest.fixture(scope="module")
def converted(oatest, tmp_path_factory) -> pathlib.Path:
    assert NODE_TESTS.is_dir(), f"onnx node tests missing at {NODE_TESTS}"
    out = tmp_path_factory.mktemp("rt")
    oatest("convert", NODE_TESTS, out)
    return out


def cases() -> list[str]:
    return sorted(p.parent.name for p in NODE_TESTS.glob("*/model.onnx"))


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and (a.tobytes() == b.tobytes() or np.array_equal(a, b))


def assert_same_model(a: onnx.ModelProto, b: onnx.ModelProto, where: str) -> None:
    assert a.ir_version == b.ir_version, where
    assert {(o.domain, o.version) for o in a.opset_import} == {(o.domain, o.version) for o in b.opset_import}, where
    assert_same_graph(a.graph, b.graph, where)
    assert list(a.functions) == list(b.functions), where


def assert_same_graph(ga: onnx.GraphProto, gb: onnx.GraphProto, where: str) -> None:
    assert [(n.op_type, n.domain, list(n.input), list(n.output), n.name) for n in ga.node] == [
        (n.op_type, n.domain, list(n.input), list(n.output), n.name) for n in gb.node
    ], where
    for na, nb in zip(ga.node, gb.node):
        aa = {x.name: x for x in na.attribute}
        ab = {x.name: x for x in nb.attribute}
        assert aa.keys() == ab.keys(), f"{where}: {na.op_type} attributes"
        for k in aa:
            va, vb = onnx.helper.get_attribute_value(aa[k]), onnx.helper.get_attribute_value(ab[k])
            if isinstance(va, onnx.TensorProto):
                assert same_array(nh.to_array(va), nh.to_array(vb)), f"{where}: {na.op_type}.{k}"
            elif isinstance(va, onnx.GraphProto):
                # a subgraph (If, Loop, Scan bodies) is compared like the graph: oatest imports it as a graph
                assert va.name == vb.name, f"{where}: {na.op_type}.{k}"
                assert_same_graph(va, vb, f"{where}: {na.op_type}.{k}")
            else:
                assert va == vb, f"{where}: {na.op_type}.{k}"
    ia = {t.name: nh.to_array(t) for t in ga.initializer}
    ib = {t.name: nh.to_array(t) for t in gb.initializer}
    assert ia.keys() == ib.keys(), where
    for k in ia:
        assert same_array(ia[k], ib[k]), f"{where}: initializer {k}"
    for field in ("input", "output", "value_info"):
        va = [(v.name, v.type) for v in getattr(ga, field)]
        vb = [(v.name, v.type) for v in getattr(gb, field)]
        assert va == vb, f"{where}: graph {field}"


def test_every_node_test_model_round_trips_losslessly(converted):
    names = cases()
    assert len(names) > 1000, "expected ONNX's ~1700 node test models"
    for name in names:
        a = onnx.load(str(NODE_TESTS / name / "model.onnx"))
        b = onnx.load(str(converted / name / "model.onnx"))
        assert_same_model(a, b, name)


def run_case(path: pathlib.Path, case_dir: pathlib.Path):
    model = onnx.load(str(path))
    feeds = {}
    init = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in init]
    for k, name in enumerate(inputs):
        pb = case_dir / "test_data_set_0" / f"input_{k}.pb"
        t = onnx.TensorProto()
        t.ParseFromString(pb.read_bytes())
        feeds[name] = nh.to_array(t)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return f"error: {str(e).split(':', 1)[0]}"


def test_round_tripped_models_compute_what_the_originals_compute(converted):
    compared = 0
    for name in cases():
        case = NODE_TESTS / name
        if not (case / "test_data_set_0").is_dir():
            continue
        g = onnx.load(str(case / "model.onnx")).graph
        plain_tensors = all(v.type.HasField("tensor_type") for v in [*g.input, *g.output])
        if not plain_tensors:
            continue
        ra = run_case(case / "model.onnx", case)
        rb = run_case(converted / name / "model.onnx", case)
        if isinstance(ra, str):
            assert isinstance(rb, str), f"{name}: original fails ({ra}) but round trip runs"
            continue
        assert not isinstance(rb, str), f"{name}: round trip fails: {rb}"
        assert len(ra) == len(rb), name
        for x, y in zip(ra, rb):
            x, y = np.asarray(x), np.asarray(y)
            assert x.dtype == y.dtype and x.shape == y.shape, name
            if x.dtype.kind in "fc":
                assert np.array_equal(x, y, equal_nan=True), name
            else:
                assert np.array_equal(x, y), name
        compared += 1
    assert compared > 800, f"only {compared} node tests ran in onnxruntime"
