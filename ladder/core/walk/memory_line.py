"""The memory line: peak memory (a fraction of the card) against num_envs, a least-squares line through a profile's
measured points, which the model strategy jumps and skips by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryLine:
    """Peak memory (fraction of the card) = intercept + slope * num_envs, from measured points."""

    intercept: float
    slope: float

    def predict(self, rung: int) -> float:
        return self.intercept + self.slope * rung


def memory_line(points: Sequence[tuple[int, float]]) -> MemoryLine | None:
    """Least squares over (num_envs, memory fraction); None without two distinct rungs or with a negative slope."""
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return MemoryLine(my - slope * mx, slope) if slope >= 0 else None
