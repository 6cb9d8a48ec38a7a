"""The steps between progress points: each one's seconds, iterations and samples (`Step`), the unit every rate and
its spread is counted in, and each point's step time, as the trainer reports it or as the points imply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ladder.core.records import Point


class Step(NamedTuple):
    seconds: float
    iters: int
    samples: float


def steps_of(points: Sequence[Point]) -> list[Step]:
    """Consecutive points as (seconds, iterations, samples) steps; points that share a time join the next."""
    return [step for step, _ in timed_steps(points)]


def timed_steps(points: Sequence[Point]) -> list[tuple[Step, float]]:
    """`steps_of`, each with the time its step began."""
    out: list[tuple[Step, float]] = []
    start = points[0] if points else None
    for point in points[1:]:
        assert start is not None
        if point.t > start.t and point.iter > start.iter:
            out.append((Step(point.t - start.t, point.iter - start.iter, point.samples - start.samples), start.t))
            start = point
    return out


def step_times(points: Sequence[Point]) -> list[float | None]:
    """Each point's step time: as reported, else the seconds per iteration since the previous point."""
    out: list[float | None] = []
    for i, point in enumerate(points):
        derived, prev = None, points[i - 1] if i else None
        if prev is not None and point.iter > prev.iter and point.t > prev.t:
            derived = (point.t - prev.t) / (point.iter - prev.iter)
        out.append(point.step_time_s if point.step_time_s is not None else derived)
    return out
