"""The trainer's cadence: the gaps between its progress points, the pauses among them that part bursts of progress
(a rollout's lines, then the silent update), its pace, and how long it may stay silent before it counts as stalled.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ladder.core.records import Point

BURST_RATIO = 4.0  # a gap this many times the median gap (and at least MIN_PAUSE_S) is a pause: it parts two bursts
MIN_PAUSE_S = 0.5
STALL_GAPS = 3.0  # a trainer silent this many times its longest gap so far (and stall_timeout_s) has stalled


def gaps_s(points: Sequence[Point]) -> list[float]:
    """The seconds between consecutive progress points."""
    return [b.t - a.t for a, b in zip(points, points[1:], strict=False) if b.t > a.t]


def pauses(points: Sequence[Point]) -> list[tuple[float, float]]:
    """The pauses between bursts of progress, as (start, length): silences of at least `MIN_PAUSE_S` and `BURST_RATIO`
    times the median gap between points; none before three gaps (too few to have a median)."""
    gaps = [(a.t, b.t - a.t) for a, b in zip(points, points[1:], strict=False) if b.t > a.t]
    if len(gaps) < 3:
        return []
    least = max(MIN_PAUSE_S, BURST_RATIO * statistics.median(g for _, g in gaps))
    return [(t, g) for t, g in gaps if g >= least]


def cycle_pause_s(points: Sequence[Point]) -> float | None:
    """Where points come in bursts (a rollout's lines, then silence while the update runs), the trainer's pause
    between bursts: the shorter of its two longest, since a cadence is a pause that recurs (one pause alone may be
    the machine stalling the trainer mid-rollout, which says nothing of its updates). None where no pause has
    recurred: points that come evenly (every point is then a whole iteration, update included), or too few yet."""
    found = sorted(g for _, g in pauses(points))
    return found[-2] if len(found) >= 2 else None


def even_s(points: Sequence[Point]) -> float:
    """How long the trainer has printed without a pause: since the end of its last pause, or its first point."""
    if not points:
        return 0.0
    found = pauses(points)
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
