"""Small things the tests share."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], object], timeout_s: float = 120.0, every_s: float = 0.05) -> None:
    """Poll a condition until it holds; fail the test if it does not within `timeout_s` (an upper bound only)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(every_s)
