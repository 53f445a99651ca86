"""pytest plugin: records every model ONNX Runtime's transformer optimizer tests hand to `optimize_model` or
`optimize_by_fusion` (python/oatest_ortx_extract.py runs each test file with it, `-p oatest_ortx_capture`).

Each call's input model is written to $OATEST_ORTX_CAPTURE_DIR as <sha>.onnx with metadata `oatest.model_type`,
`oatest.num_heads`, `oatest.hidden_size` (the call's arguments) and `oatest.capture.test` (the pytest node id);
the optimizer then runs as the test asked.

ORT's tests import `find_transformers_source` from their `parity_utilities`, which imports torch at the top
only for its other helpers. When torch is absent this plugin registers a `parity_utilities` holding only
`find_transformers_source` (answering False: use the installed onnxruntime.transformers), so those tests run;
a test that needs torch itself still fails on its import and is reported so.
"""
from __future__ import annotations

import hashlib
import os
import sys
import types

import onnx

_CURRENT = {"test": ""}


def _shim_parity_utilities():
    try:
        import torch  # noqa: F401

        return
    except ImportError:
        pass
    m = types.ModuleType("parity_utilities")
    m.find_transformers_source = lambda sub_dir_paths=None: False  # noqa: ARG005
    sys.modules["parity_utilities"] = m


def _record(model, model_type, num_heads, hidden_size):
    out = os.environ.get("OATEST_ORTX_CAPTURE_DIR")
    if not out:
        return
    try:
        m = onnx.load(model, load_external_data=False) if isinstance(model, str) else onnx.ModelProto.FromString(model.SerializeToString())
    except Exception:  # noqa: BLE001 - a model we cannot read is not captured
        return
    props = {p.key: p.value for p in m.metadata_props}
    props.update({
        "oatest.model_type": str(model_type),
        "oatest.num_heads": str(int(num_heads or 0)),
        "oatest.hidden_size": str(int(hidden_size or 0)),
        "oatest.capture.test": _CURRENT["test"],
    })
    del m.metadata_props[:]
    onnx.helper.set_model_props(m, props)
    data = m.SerializeToString()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, hashlib.sha256(data).hexdigest()[:16] + ".onnx")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _wrap(fn):
    def wrapped(model, model_type="bert", num_heads=0, hidden_size=0, *args, **kwargs):
        _record(model, model_type, num_heads, hidden_size)
        return fn(model, model_type, num_heads, hidden_size, *args, **kwargs)

    wrapped.__wrapped__ = fn
    return wrapped


def pytest_configure(config):  # noqa: ARG001
    _shim_parity_utilities()
    import onnxruntime.transformers.optimizer as opt

    for module in {opt, sys.modules.get("optimizer")} - {None}:
        for name in ("optimize_model", "optimize_by_fusion"):
            if hasattr(module, name) and not hasattr(getattr(module, name), "__wrapped__"):
                setattr(module, name, _wrap(getattr(module, name)))


def pytest_runtest_setup(item):
    _CURRENT["test"] = item.nodeid
