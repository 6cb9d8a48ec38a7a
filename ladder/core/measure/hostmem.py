"""A host-sampled trial's memory as its cap counts it: what `max_memN` holds, and the name the console shows it by.

Each rank's figure is its process tree's PSS (`ladder.runner.host`: a page shared between processes counts once).
Under a memory cgroup with a cap (`workload.host_mem_limit_gb`), what the cap counts is the cgroup's own charge,
every process of the trial together: a one-rank trial's `max_mem0` is the cgroup's peak (`cgroup_peak_mb`), its
sampled figure kept as `pss_max0`; with several ranks each `max_memN` stays that rank's PSS, and the cgroup's peak,
their total, stands alongside. On a GPU (`nvml`), `max_memN` is the card's and none of this applies. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from ladder.core.figkeys import MAX_MEM, keys
from ladder.core.records import Source

SAMPLED = "pss_max"  # the stem the sampled figure keeps where `max_mem0` became the cgroup's peak


def as_capped(figures: Mapping[str, float], source: str) -> dict[str, float]:
    """`figures` with a one-rank host trial's `max_mem0` the cgroup's peak, where a cap applied."""
    out = dict(figures)
    if cgroup_counts(figures, source):
        out[f"{SAMPLED}0"] = out["max_mem0"]
        out["max_mem0"] = round(figures["cgroup_peak_mb"])
    return out


def cgroup_counts(figures: Mapping[str, float], source: str) -> bool:
    """Whether `max_mem0` is (or becomes) the cgroup's peak: a host trial of one rank under a capped cgroup."""
    capped = bool(figures.get("cgroup_limit_mb")) and bool(figures.get("cgroup_peak_mb"))
    return source == Source.HOST and capped and keys(figures, MAX_MEM) == ["max_mem0"]


def label(figures: Mapping[str, float], source: str) -> str:
    """What the console calls `max_memN`: `cgroup` (the cgroup's peak), `pss` (each rank's), `mem` (NVML's)."""
    if source != Source.HOST:
        return "mem"
    return "cgroup" if f"{SAMPLED}0" in figures else "pss"
