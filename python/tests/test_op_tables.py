"""The op tables the Rust side compiles in (data/onnx-op-since.tsv, data/onnx-op-forms.tsv) are what their scripts
write from the pinned onnx's schemas."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def written(script):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / script)], check=True, capture_output=True,
                          text=True).stdout


def test_the_op_since_table_is_the_scripts_output():
    assert written("onnx-op-since.py") == (ROOT / "data" / "onnx-op-since.tsv").read_text()


def test_the_op_forms_table_is_the_scripts_output():
    table = (ROOT / "data" / "onnx-op-forms.tsv").read_text()
    assert written("onnx-op-forms.py") == table
    # Add on float32 (code 1) is Add-7's form; Softmax's older schemas are left out
    assert any(l.startswith("Add\t7\t") and "1" in l.split("\t")[2].split("|")[0].split(",") for l in table.splitlines())
    assert not any(l.startswith("Softmax\t") for l in table.splitlines())
