"""The trainer's own clock: the CPU seconds its processes used (the integral of their host CPU% samples, every rank
summed). A silence it worked through (its update) advances this clock; one a loaded machine imposed on it (the
trainer starved, or just slower) does not, beyond what an ordinary step costs.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from ladder.core.records import Sample, Source

BUSY_CORES = 0.05  # a trainer using less of a core than this while it prints mostly waits: its CPU says nothing


@dataclass(frozen=True)
class CpuClock:
    """Cumulative CPU seconds of the trial at sample times (`at` interpolates between them)."""

    times: tuple[float, ...]
    cpu_s: tuple[float, ...]

    def at(self, t: float) -> float:
        """The CPU seconds used by time `t`: interpolated between samples, held flat outside them."""
        i = bisect.bisect_left(self.times, t)
        if i <= 0:
            return self.cpu_s[0]
        if i >= len(self.times):
            return self.cpu_s[-1]
        t0, t1, c0, c1 = self.times[i - 1], self.times[i], self.cpu_s[i - 1], self.cpu_s[i]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1

    def spent(self, start_t: float, end_t: float) -> float:
        """The CPU seconds used between two times."""
        return self.at(end_t) - self.at(start_t)


def cpu_clock(samples: Sequence[Sample]) -> CpuClock | None:
    """The trial's CPU clock, where every sample is the host's (a CPU trainer: its work is CPU time). None on a GPU
    (an update there may leave the host idle) and before two samples."""
    if not samples or any(s.source is not Source.HOST for s in samples):
        return None
    times = sorted({s.t for s in samples})
    if len(times) < 2:
        return None
    total = [0.0] * len(times)
    for index in {s.index for s in samples}:
        _add(total, times, sorted((s.t, s.util) for s in samples if s.index == index))
    return CpuClock(tuple(times), tuple(total))


def _add(total: list[float], times: list[float], series: list[tuple[float, float]]) -> None:
    """Add one rank's cumulative CPU seconds (each sample's CPU% covers the time since the one before) to `total`,
    held at its last value between and after its own samples."""
    done, prev_t, k = 0.0, None, 0
    for i, t in enumerate(times):
        while k < len(series) and series[k][0] <= t:
            sample_t, util = series[k]
            done += 0.0 if prev_t is None else util / 100.0 * (sample_t - prev_t)
            prev_t, k = sample_t, k + 1
        total[i] += done


def busy(clock: CpuClock, start_t: float, end_t: float) -> bool:
    """Whether the trainer worked between two times (its mean CPU rate at least `BUSY_CORES`): only then does its CPU
    tell a silence it worked through from one it waited through."""
    return end_t > start_t and clock.spent(start_t, end_t) >= BUSY_CORES * (end_t - start_t)
