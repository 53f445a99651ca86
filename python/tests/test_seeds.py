"""Seeds from `oatest seeds gen`: valid for onnx's full checker, runnable in onnxruntime, varied, deterministic."""
from __future__ import annotations

import collections
import pathlib

import onnx
import pytest

import ortcheck

EXPECTED_DTYPES = {"float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool"}


@pytest.fixture(scope="module")
def seeds(oatest, tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("seeds")
    oatest("seeds", "gen", "--count", 1000, "--seed", 7, "--out", out)
    return out


def value_types(g: onnx.GraphProto):
    for v in [*g.input, *g.output, *g.value_info]:
        tt = v.type.tensor_type
        yield onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name, len(tt.shape.dim)
    for t in g.initializer:
        yield onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name, len(t.dims)


def test_every_seed_passes_the_full_checker_and_runs_in_onnxruntime(seeds):
    files = sorted(seeds.glob("*.onnx"))
    assert len(files) == 1000
    problems = {f.name: p for f in files if (p := ortcheck.check_one(f))}
    assert not problems, f"{len(problems)} seeds fail, e.g. {list(problems.items())[:5]}"


def test_seeds_cover_ops_dtypes_ranks_and_structure(seeds):
    ops = collections.Counter()
    dtypes = set()
    rank0 = multi_output = with_init = qdq = 0
    for f in sorted(seeds.glob("*.onnx")):
        m = onnx.load(str(f))
        g = m.graph
        ops.update(n.op_type for n in g.node)
        types = list(value_types(g))
        dtypes.update(d for d, _ in types)
        rank0 += any(r == 0 for _, r in types)
        multi_output += len(g.output) > 1
        with_init += len(g.initializer) > 0
        producers = {o: n.op_type for n in g.node for o in n.output}
        qdq += any(n.op_type == "DequantizeLinear" and producers.get(n.input[0]) == "QuantizeLinear" for n in g.node)
        assert m.ir_version == 9 and m.opset_import[0].version == 20
    assert len(ops) >= 30, f"only {len(ops)} op types: {sorted(ops)}"
    assert EXPECTED_DTYPES <= dtypes, f"missing dtypes {EXPECTED_DTYPES - dtypes}"
    assert rank0 > 0 and multi_output > 0 and with_init > 0
    assert qdq > 0, "no QuantizeLinear -> DequantizeLinear chain in 1000 seeds"


def test_same_seed_gives_identical_bytes_and_other_seeds_differ(oatest, tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        oatest("seeds", "gen", "--count", 20, "--seed", seed, "--out", tmp_path / name)
    a, b, c = ([p.read_bytes() for p in sorted((tmp_path / n).glob("*.onnx"))] for n in "abc")
    assert a == b
    assert sum(x != y for x, y in zip(a, c)) > 15


def test_opset_and_ir_version_are_configurable(oatest, tmp_path):
    oatest("seeds", "gen", "--count", 5, "--seed", 1, "--opset", 21, "--ir-version", 10, "--out", tmp_path)
    for f in tmp_path.glob("*.onnx"):
        m = onnx.load(str(f))
        assert m.ir_version == 10 and m.opset_import[0].version == 21
        assert ortcheck.check_one(f) is None
    bad = oatest("seeds", "gen", "--count", 1, "--opset", 12, "--out", tmp_path / "x", check=False)
    assert bad.returncode == 2 and "--opset 12" in bad.stderr
