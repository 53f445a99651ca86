"""pytest plugin: record every model an ONNX Runtime session is created with while tests run.

Load it with `-p oatest_capture` (python/ on PYTHONPATH) and set OATEST_CAPTURE_DIR. Each distinct model is
written once as <sha1>.onnx (temp file + rename); every session creation appends one JSON line to
captures.jsonl: the model file, the pytest node id, the session's optimization level, its session config
entries (add_session_config_entry) and the disabled_optimizers argument. Lines are flushed at once, so a run
that fails or is killed keeps what it captured.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import tempfile

_dir: pathlib.Path | None = None
_current = "<collection>"
_entries: dict[int, dict[str, str]] = {}


def _record(model, sess_options, kwargs) -> None:
    if isinstance(model, (bytes, bytearray)):
        data = bytes(model)
    else:
        data = pathlib.Path(os.fspath(model)).read_bytes()
    name = hashlib.sha1(data).hexdigest()[:20] + ".onnx"
    target = _dir / name
    if not target.exists():
        fd, tmp = tempfile.mkstemp(dir=_dir, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    line = {
        "model": name,
        "test": _current,
        "level": int(sess_options.graph_optimization_level) if sess_options is not None else None,
        "config": _entries.get(id(sess_options), {}) if sess_options is not None else {},
        "disabled_optimizers": list(kwargs.get("disabled_optimizers") or []),
    }
    with open(_dir / "captures.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def pytest_configure(config):
    global _dir
    d = os.environ.get("OATEST_CAPTURE_DIR")
    if not d:
        return
    _dir = pathlib.Path(d)
    _dir.mkdir(parents=True, exist_ok=True)
    import onnxruntime as ort

    original_init = ort.InferenceSession.__init__

    def init(self, path_or_bytes, sess_options=None, *args, **kwargs):
        try:
            _record(path_or_bytes, sess_options, kwargs)
        except Exception as e:  # noqa: BLE001 - capturing must never break the test under it
            print(f"oatest_capture: cannot record a model: {e}")
        return original_init(self, path_or_bytes, sess_options, *args, **kwargs)

    ort.InferenceSession.__init__ = init

    original_add = ort.SessionOptions.add_session_config_entry

    def add(self, key, value):
        _entries.setdefault(id(self), {})[key] = value
        return original_add(self, key, value)

    ort.SessionOptions.add_session_config_entry = add


def pytest_runtest_setup(item):
    global _current
    _current = item.nodeid
