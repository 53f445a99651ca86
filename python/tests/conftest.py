"""Shared fixtures: the oatest binary (built by scripts/test.sh) and a runner for it."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))


@pytest.fixture(scope="session")
def oatest_bin() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("OATEST_BIN", ROOT / "target" / "release" / "oatest"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build it first (scripts/test.sh does: cargo build --release)")
    return path


@pytest.fixture(scope="session")
def oatest(oatest_bin):
    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([str(oatest_bin), *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"oatest {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
        return p

    return run
