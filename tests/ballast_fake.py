"""A stand-in for the GPUs a ballast holder reaches (`ladder.runner.ballast.Backend`), for machines without one: the
one hardware boundary faked. The "driver" is a JSON file (`LADDER_FAKE_GPUS`) that says each GPU's total and its
memory in use at rest, and what each holder process holds; as the real driver does, memory held by a process that
is gone counts no more (so a holder killed by any means gives its memory back).

    {"gpus": [{"total_mb": 81559, "used_mb": 530}], "context_mb": 500, "fail": "", "held": {"<pid>": {"0": 60000}}}

`fail`: "alloc" makes the allocation raise as torch does on out-of-memory; "hang" makes the holder never answer.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psutil
from filelock import FileLock

VAR = "LADDER_FAKE_GPUS"
SPEC = "tests.ballast_fake:FakeCuda"


def write(path: Path, totals: list[float], used_mb: float = 530.0, context_mb: float = 500.0, fail: str = "") -> Path:
    gpus = [{"total_mb": t, "used_mb": used_mb} for t in totals]
    path.write_text(json.dumps({"gpus": gpus, "context_mb": context_mb, "fail": fail, "held": {}}))
    return path


def used_mb(path: Path, index: int) -> float:
    """What NVML would say GPU `index` uses now: its memory at rest and what live holders hold on it."""
    state = json.loads(path.read_text())
    held = sum(float(mine.get(str(index), 0.0)) for pid, mine in state["held"].items() if _alive(int(pid)))
    return float(state["gpus"][index]["used_mb"]) + held


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class FakeCuda:
    """The holder's view: NVML indices for reading, CUDA ordinals (CUDA_VISIBLE_DEVICES) for the context and
    the allocation."""

    def __init__(self) -> None:
        self.path = Path(os.environ[VAR])
        self.visible = [int(i) for i in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]
        if self._state()["fail"] == "hang":
            time.sleep(3600)

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.path.read_text())
        return state

    def _add(self, index: int, mb: float) -> None:
        with FileLock(str(self.path) + ".lock"):
            state = self._state()
            mine = state["held"].setdefault(str(os.getpid()), {})
            mine[str(index)] = float(mine.get(str(index), 0.0)) + mb
            self.path.write_text(json.dumps(state))

    def read(self, index: int) -> tuple[float, float]:
        return float(self._state()["gpus"][index]["total_mb"]), used_mb(self.path, index)

    def free_mb(self, ordinal: int) -> float:
        index = self.visible[ordinal]
        mine = self._state()["held"].get(str(os.getpid()), {})
        if str(index) not in mine:  # the first touch makes this process's context on the GPU
            self._add(index, float(self._state()["context_mb"]))
        total, used = self.read(index)
        return total - used

    def hold(self, ordinal: int, mb: float) -> None:
        if self._state()["fail"] == "alloc":
            raise RuntimeError(f"CUDA out of memory. Tried to allocate {mb / 1024:.2f} GiB")
        self._add(self.visible[ordinal], mb)
