"""The models of tests/data/ort-test-graphs are what its make.py writes (each a transcription of one of ONNX
Runtime's C++ optimizer tests), and each names its test."""

import os
import subprocess
import sys

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "ort-test-graphs")


def models(top):
    out = []
    for d, _, files in os.walk(top):
        out += [os.path.relpath(os.path.join(d, f), top) for f in files if f.endswith(".onnx")]
    return sorted(out)


def test_committed_models_are_what_make_py_writes(tmp_path):
    subprocess.run([sys.executable, os.path.join(DATA, "make.py"), str(tmp_path)], check=True)
    assert models(str(tmp_path)) == models(DATA)
    for rel in models(DATA):
        made = onnx.load(os.path.join(str(tmp_path), rel))
        kept = onnx.load(os.path.join(DATA, rel))
        assert made.SerializeToString() == kept.SerializeToString(), rel


def test_every_model_names_its_test_file_and_is_listed_with_its_pass():
    pairs = {}
    with open(os.path.join(DATA, "PAIRS-from-test-sources.tsv")) as f:
        for line in f:
            model, passname = line.rstrip("\n").split("\t")
            pairs[model] = passname
    assert sorted(pairs) == models(DATA)
    for rel in models(DATA):
        assert rel.split("/")[0].endswith(".cc"), rel
