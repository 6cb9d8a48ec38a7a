"""The pure core is pure by import: importing it brings no subprocess, process table, NVML, file lock or thread.

Each module is imported in a fresh interpreter, so what another test imported first cannot hide what it pulls in.
`ladder.failures` is not in the list yet: its classifier is pure, but the module also holds its file loading and its
command line, whose `logging` imports `threading`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PURE = ("ladder.policy", "ladder.stats", "ladder.decide", "ladder.results", "ladder.records")
EFFECTS = ("subprocess", "psutil", "pynvml", "filelock", "threading")
PROBE = "import importlib, json, sys; importlib.import_module(sys.argv[1]); print(json.dumps(sorted(sys.modules)))"


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_imports_no_effects(module: str) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, module], capture_output=True, text=True, check=True)
    loaded = set(json.loads(done.stdout))
    assert module in loaded
    assert sorted(loaded & set(EFFECTS)) == []


def test_the_probe_sees_an_effect_where_there_is_one() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, "ladder.outputs"], capture_output=True, text=True, check=True)
    assert {"subprocess", "filelock"} <= set(json.loads(done.stdout))


def test_results_still_reaches_its_writers_by_name() -> None:
    from ladder import outputs, results

    assert results.write_best is outputs.write_best and results.code_version is outputs.code_version
    with pytest.raises(AttributeError):
        _ = results.no_such_name  # type: ignore[attr-defined]
