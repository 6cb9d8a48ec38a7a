"""The pure core is pure by import: importing each of its modules in a fresh interpreter loads no subprocess,
process table, NVML, file lock, thread or storage module (the static floor plan is tests/unit/test_layers.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.test_layers import EFFECTS, PROBE, PURE


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
