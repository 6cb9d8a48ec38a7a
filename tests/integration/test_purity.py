"""The pure core is pure by import: importing each of its modules in a fresh interpreter loads no subprocess,
process table, NVML, file lock, thread or storage module (the static floor plan is tests/unit/test_layers.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.test_layers import modules

EFFECTS = ("subprocess", "psutil", "pynvml", "filelock", "threading", "optuna", "sqlalchemy")  # none in the core


# what importing a module adds to what the interpreter loaded at start-up (site's .pth files may load threading)
PROBE = (
    "import importlib, json, sys; before = set(sys.modules); importlib.import_module(sys.argv[1]); "
    "print(json.dumps(sorted(set(sys.modules) - before)))"
)


# the pure core, and the failure classifier's (its file loading and command line live beside it)
PURE = sorted(m for m in modules() if m.startswith("ladder.core.")) + [
    "ladder.failures.patterns",
    "ladder.failures.rules",
    "ladder.failures.scoring",
]


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_imports_no_effects(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, module], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert module in loaded
    assert sorted(m for m in loaded if m.split(".")[0] in EFFECTS) == []


def test_the_probe_sees_an_effect_where_there_is_one() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "ladder.storage.tsv"], capture_output=True, text=True, check=True
    )
    assert {"filelock"} <= set(json.loads(done.stdout))
