"""Per-device figure keys: `max_mem0`, `avg_util1`, `energy_j2`... (a stem, then the device's index). Pure.

A trial's figures, its TSV columns and the rows read back all name a device's figure this way; this module is the
one place that builds such a key, tells whether a key is one, and orders them by device (0, 1, ..., 10, not by text).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

MAX_MEM = "max_mem"  # MiB: the device's peak memory (NVML), its rank's peak PSS or cgroup's (host, `hostmem`)
AVG_UTIL = "avg_util"  # percent: the device's mean util in the window
AVG_SM_UTIL = "avg_sm_util"  # percent: the device's mean SM activity (Hopper GPM)
ENERGY_J = "energy_j"  # J: what the GPU used over the window (NVML's energy counter, or its power integrated)
AVG_POWER_W = "avg_power_w"  # W: the GPU's mean power over the window

V = TypeVar("V")


def key(stem: str, index: int) -> str:
    """The key of device `index`'s figure `stem`: key(MAX_MEM, 1) == "max_mem1"."""
    return f"{stem}{index}"


def index_of(name: str, stem: str) -> int | None:
    """The device index `name` carries for `stem` ("max_mem12" → 12); None when it is not such a key."""
    rest = name[len(stem) :] if name.startswith(stem) else ""
    return int(rest) if rest.isascii() and rest.isdigit() else None


def keys(names: Iterable[str], stem: str) -> list[str]:
    """The names that are `stem` keys, in device order."""
    found = {n: i for n in names if (i := index_of(n, stem)) is not None}
    return sorted(found, key=found.__getitem__)


def values(row: Mapping[str, V], stem: str) -> list[V]:
    """The values of `row`'s `stem` keys, in device order."""
    return [row[k] for k in keys(row, stem)]
