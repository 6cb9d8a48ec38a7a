"""The trainer's cadence: the gaps between its progress points, the pauses among them that part bursts of progress
(a rollout's lines, then the silent update), its pace, and how long it may stay silent before it counts as stalled.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ladder.core.measure.clock import CpuClock, busy
from ladder.core.records import Point

BURST_RATIO = 4.0  # a gap this many times the median gap (and at least MIN_PAUSE_S) is a pause: it parts two bursts
MIN_PAUSE_S = 0.5
STALL_GAPS = 3.0  # a trainer silent this many times its longest gap so far (and stall_timeout_s) has stalled


def gaps_s(points: Sequence[Point]) -> list[float]:
    """The seconds between consecutive progress points."""
    return [b.t - a.t for a, b in zip(points, points[1:], strict=False) if b.t > a.t]


def pauses(points: Sequence[Point], clock: CpuClock | None = None) -> list[tuple[float, float]]:
    """The pauses between bursts of progress, as (start, length): silences of at least `MIN_PAUSE_S` and `BURST_RATIO`
    times the median gap between points, that the trainer worked through (`worked`); none before three gaps (too few
    to have a median)."""
    gaps = _gaps(points)
    if len(gaps) < 3:
        return []
    least = max(MIN_PAUSE_S, BURST_RATIO * statistics.median(g for _, g in gaps))
    return [(t, g) for t, g in worked(gaps, clock) if g >= least]


def worked(gaps: Sequence[tuple[float, float]], clock: CpuClock | None) -> list[tuple[float, float]]:
    """The gaps, (start, length), the trainer may have spent on an update: every one where its CPU is not measured
    (`clock` None: a GPU trainer) or says nothing (it mostly waits); else those in which it used `BURST_RATIO` times
    the CPU of its median gap. A loaded machine makes a step slower, not costlier: a silence it imposed is no update."""
    if clock is None or len(gaps) < 3 or not busy(clock, gaps[0][0], gaps[-1][0] + gaps[-1][1]):
        return list(gaps)
    spent = [clock.spent(t, t + g) for t, g in gaps]
    least = BURST_RATIO * statistics.median(spent)
    return [gap for gap, cpu_s in zip(gaps, spent, strict=True) if cpu_s >= least]


def _gaps(points: Sequence[Point]) -> list[tuple[float, float]]:
    return [(a.t, b.t - a.t) for a, b in zip(points, points[1:], strict=False) if b.t > a.t]


def cycle_pause_s(points: Sequence[Point], clock: CpuClock | None = None) -> float | None:
    """Where points come in bursts (a rollout's lines, then silence while the update runs), the trainer's pause
    between bursts: the shorter of its two longest, since a cadence is a pause that recurs (one pause alone may be
    the machine stalling the trainer mid-rollout, which says nothing of its updates). None where no pause has
    recurred: points that come evenly (every point is then a whole iteration, update included), or too few yet."""
    found = sorted(g for _, g in pauses(points, clock))
    return found[-2] if len(found) >= 2 else None


def even_s(points: Sequence[Point], clock: CpuClock | None = None) -> float:
    """How long the trainer has printed without a pause: since the end of its last pause, or its first point."""
    if not points:
        return 0.0
    found = pauses(points, clock)
    since = found[-1][0] + found[-1][1] if found else points[0].t
    return points[-1].t - since


def pace_s(points: Sequence[Point]) -> float | None:
    """The trainer's seconds per progress point so far, over all its points (bursts and the updates between them
    included); None before two."""
    if len(points) < 2 or points[-1].t <= points[0].t:
        return None
    return (points[-1].t - points[0].t) / (len(points) - 1)


def stall_limit_s(points: Sequence[Point], stall_timeout_s: float) -> float:
    """How long a trainer that has printed may stay silent before it counts as stalled: `stall_timeout_s`, or
    `STALL_GAPS` times its longest gap so far where that is longer (a slow trainer's iteration is no hang)."""
    return max(stall_timeout_s, STALL_GAPS * max(gaps_s(points), default=0.0))
