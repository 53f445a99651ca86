"""The comparison embedded in repro.py and exported suites (python/oatest_compare.py) applies the oracle's rule
(src/oracle) with the tolerance table oatest writes: the cases of the Rust oracle's tests get the same verdicts."""
from __future__ import annotations

import json
import runpy

import numpy as np
import pytest


@pytest.fixture(scope="module")
def suite(oatest, tmp_path_factory):
    """An exported (empty) suite: cases.json with oatest's resolved tolerance, the pytest file with the comparison."""
    tmp = tmp_path_factory.mktemp("suite")
    (tmp / "run").mkdir()
    oatest("export", tmp / "run", "--out", tmp / "suite")
    manifest = json.loads((tmp / "suite" / "cases.json").read_text())
    code = runpy.run_path(str(tmp / "suite" / "test_oatest_regression.py"))
    return manifest["tolerance"], code


def verdict(suite, expected, actual, quantized=(), dequantized=None):
    table, code = suite
    m = code["measure"](expected, actual, table, set(quantized), dequantized)
    return code["inconsistent"](m), m


def f32(*v):
    return np.array(v, dtype=np.float32)


def test_the_table_has_every_float_dtype_and_the_flags_override_it(oatest, suite, tmp_path):
    table, _ = suite
    assert set(table) == {"float32", "float64", "float16", "bfloat16", "ulps", "steps"}
    (tmp_path / "run").mkdir()
    oatest("export", tmp_path / "run", "--out", tmp_path / "s", "--tolerance", "0.5", "--steps", "3")
    lax = json.loads((tmp_path / "s" / "cases.json").read_text())["tolerance"]
    assert lax["float32"][0] == lax["float16"][0] == 0.5 and lax["steps"] == 3
    assert lax["float32"][1] == table["float32"][1]


def test_float32_small_and_large_magnitudes(suite):
    bad, m = verdict(suite, [f32(1e-3, 2e-3, -3e-3)], [f32(1e-3, 2.1e-3, -3e-3)])
    assert bad and m["exceeding"] == 1 and m["elements"] == 3, m
    big = np.float32(1e5)
    ulps_away = np.array([big, -big], dtype=np.float32).view(np.uint32) + np.array([4, 1], dtype=np.uint32)
    bad, m = verdict(suite, [f32(1e5, -1e5)], [ulps_away.view(np.float32)])
    assert not bad and m["max_abs"] > 1e-3, m
    assert verdict(suite, [f32(1e5, -1e5)], [f32(1e5 + 50, -1e5)])[0]


def test_float16_ulps(suite):
    table, _ = suite
    ref = np.array([64.0, 96.0], dtype=np.float16)
    for k, bad in [(table["ulps"], False), (table["ulps"] + 1, True)]:
        other = (ref.view(np.uint16) + np.array([k, 0], dtype=np.uint16)).view(np.float16)
        got, m = verdict(suite, [ref], [other])
        assert got == bad and m["ulps"] == k, (k, m)


def test_uint8_quantization_steps(suite):
    ref = np.array([100, 0], dtype=np.uint8)
    one = np.array([101, 0], dtype=np.uint8)
    assert not verdict(suite, [ref], [one], quantized=[0])[0]
    assert verdict(suite, [ref], [one])[0], "a plain uint8 output is exact"
    bad, m = verdict(suite, [ref], [np.array([100, 255], dtype=np.uint8)], quantized=[0])
    assert bad and m["steps"] == 255, m
    # a dequantized output (step 0.5) may be one step off, not two
    assert not verdict(suite, [f32(100.0)], [f32(100.5)], dequantized={0: 0.5})[0]
    assert verdict(suite, [f32(100.0)], [f32(101.0)], dequantized={0: 0.5})[0]


def test_int64_near_two_to_the_62_and_complex(suite):
    big = np.array([2**62, -(2**62)], dtype=np.int64)
    bad, m = verdict(suite, [big], [big + np.array([1, 0], dtype=np.int64)])
    assert bad and m["max_abs"] == 1.0, m
    c = np.array([1 + 2j], dtype=np.complex64)
    assert verdict(suite, [c], [np.array([1 + 3j], dtype=np.complex64)])[0], "the imaginary part alone"
    assert not verdict(suite, [c], [np.array([1 + (2 + 1e-5) * 1j], dtype=np.complex64)])[0]


def test_nan_inf_policy_and_structure(suite):
    nan, inf = np.nan, np.inf
    assert not verdict(suite, [f32(nan, inf, -inf)], [f32(nan, inf, -inf)])[0]
    for other in [f32(1, inf, -inf), f32(nan, -inf, -inf), f32(nan, inf, 0)]:
        bad, m = verdict(suite, [f32(nan, inf, -inf)], [other])
        assert bad and m["max_abs"] == inf, (other, m)
    assert verdict(suite, [f32(1.0)], [f32(nan)])[0]
    bad, m = verdict(suite, [f32(1.0, 2.0)], [f32(1.0)])
    assert bad and m is None

