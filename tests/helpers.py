"""Small things the tests share."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path


def wait_for(predicate: Callable[[], object], timeout_s: float = 120.0, every_s: float = 0.05) -> None:
    """Poll a condition until it holds; fail the test if it does not within `timeout_s` (an upper bound only)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every_s)


def need_memory_cgroups() -> None:
    """Skip the calling test where no memory cgroup can be made here (not root, no writable controller)."""
    import os

    import pytest

    from ladder.runner.cgroup import MemCgroup

    probe = MemCgroup.create(f"ladder-probe-{os.getpid()}", None)
    if probe is None:
        pytest.skip("no writable memory cgroup on this machine: a trial is tracked by its process tree alone")
    probe.remove()


REPO = Path(__file__).resolve().parents[1]  # the repository's root
DATA = REPO / "tests" / "data"  # real captured outputs, trainers and configs the tests read
