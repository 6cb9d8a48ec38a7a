"""Repeats of one configuration: whether its samples/s is reproducible (`repeat_verdict`), by the repeats' pooled
95% interval (`pooled_ci_frac`) and their spread, with windows that ran whole and wide set aside where one was narrow.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ladder.core.measure.rates import Rate

MAX_SPREAD = 0.05  # repeats whose samples/s differ by more than this fraction (of their mean) are unstable
MAX_CI_FRAC = 0.10  # ... as is a trial whose 95% interval is wider than this fraction of its samples/s (±5%)


def pooled_ci_frac(rates: Sequence[Rate]) -> float:
    """The 95% interval of several windows' samples/s pooled (each weighted by its inverse variance, its half-width
    squared), as a fraction of the pooled rate; one window's own interval where there is one. A window without an
    interval (too few points) adds nothing; inf where none has one."""
    halves = [((r.hi - r.lo) / 2, r.value) for r in rates if math.isfinite(r.hi - r.lo) and r.value > 0]
    if not halves:
        return math.inf
    if any(h <= 0 for h, _ in halves):
        return 0.0
    weights = [1 / h**2 for h, _ in halves]
    rate = sum(w * v for w, (_, v) in zip(weights, halves, strict=True)) / sum(weights)
    return 2 / math.sqrt(sum(weights)) / rate if rate > 0 else math.inf


@dataclass(frozen=True)
class Repeatability:
    stable: bool
    spread: float  # (max - min) / mean of the repeats' samples/s; 0 for one
    ci_frac: float  # the repeats' pooled 95% interval (`pooled_ci_frac`), as a fraction of their samples/s
    why: str  # "" when stable

    def figures(self) -> dict[str, float]:
        return {
            "unstable": 0.0 if self.stable else 1.0,
            "repeat_spread": round(self.spread, 4),
            "ci_frac": round(self.ci_frac, 4),
        }


def repeat_verdict(
    rates: Sequence[Rate], max_spread: float = MAX_SPREAD, max_ci_frac: float = MAX_CI_FRAC
) -> Repeatability:
    """Is one configuration's samples/s reproducible? Unstable when the repeats' pooled interval
    (`pooled_ci_frac`) is wider than max_ci_frac of their rate, or the repeats differ by more than max_spread of
    their mean: one wide window is unstable. Windows that ran whole and wide (`window_wide`) count only where none was
    narrow, as for the configuration's figure: a narrow second window stands for the configuration, and the console
    says how many were set aside (`pick.WIDE_WINDOWS`)."""
    if not rates:
        return Repeatability(False, math.inf, math.inf, "no repeat measured a rate")
    rates = [r for r in rates if not r.wide] or list(rates)
    values = [r.value for r in rates]
    mean = statistics.fmean(values)
    spread = (max(values) - min(values)) / mean if mean > 0 else math.inf
    ci = pooled_ci_frac(rates)
    why = []
    if ci > max_ci_frac:
        why.append(f"95% interval {ci:.1%} of samples/s (over {max_ci_frac:.0%})")
    if spread > max_spread:
        why.append(f"repeats differ by {spread:.1%} (over {max_spread:.0%})")
    return Repeatability(not why, spread, ci, "; ".join(why))
