"""How high a window's samples/s can still go, which the cuts judge a trial on: its interval's top (`rate_upper`),
narrowed as the window runs out (`final_upper`), one-sided at a quantile (`rate_top`, an insurance probe's), or with
the step in progress counted as ending now (`open_step_upper`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ladder.core.measure.noise import Noise
from ladder.core.measure.rates import half_width, rate_figures, ratio_interval
from ladder.core.measure.steps import steps_of
from ladder.core.measure.tdist import Z95
from ladder.core.measure.window import Window
from ladder.core.records import Point

# An insurance probe ends once its steady steps' one-sided 95% top (this many standard errors up, `rate_top`) is
# below what it must beat: a clearly slower rung ends at its second or third step rather than at its short window's
# end, and one that could win is missed hardly more often (`python scripts/sim_cut.py --short` measures it)
SHORT_Z = 1.645


def rate_upper(points: Sequence[Point], start_t: float, noise: Noise | None = None) -> float | None:
    """The top of the samples/s interval over the points since `start_t` (None until there is a rate); with
    `noise`, the case's pooled step noise sets its spread (`Noise.half`)."""
    if not points:
        return None
    hi = rate_figures(points, Window(start_t, points[-1].t, gated=True), noise).get("samples_per_s_hi")
    return hi if hi is not None and math.isfinite(hi) else None


def final_upper(
    points: Sequence[Point], start_t: float, end_t: float, band: float, noise: Noise | None = None
) -> float | None:
    """How high, at most, the window's samples/s can still take it in a tie once the window ends at `end_t`, from its
    steps since `start_t`: `rate_upper`, or lower as the window runs out (None until there is a rate). Only the steps
    still to come can move the final rate: it lies within sqrt(1 - n/N) of the rate's own interval (`1 - n/N` the
    share of the window's time left). A tie reaches a value's interval top less the run-to-run `band` (`pick.reach`),
    so the 95% half-width the whole window would end with counts where it is wider than `band`. Never above
    `rate_upper`; a window past `end_t` counts one step short of its end (it may be held open, or short of points).
    `python scripts/sim_cut.py --predict` measures how often it cuts wrongly."""
    upper = rate_upper(points, start_t, noise)
    steps = steps_of([p for p in points if p.t >= start_t])
    ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
    if upper is None or len(steps) < 2 or sum(ys) <= 0:
        return upper
    rate, span = sum(ys) / sum(xs), sum(xs)
    left = max(end_t - points[-1].t, span / len(steps))  # one step more at least: a window may be held open
    top = rate + half_width(ys, xs, rate, noise) * math.sqrt(left / (span + left))
    wide = half_width(ys, xs, rate, noise, Z95) * math.sqrt(span / (span + left))
    return min(upper, max(top, (top + wide) / (1.0 + band)))


def rate_top(points: Sequence[Point], start_t: float, z: float, noise: Noise | None = None) -> float | None:
    """The samples/s over the steps since `start_t`, `z` standard errors up (the one-sided `z` quantile of t: with
    `noise`, the case's pooled step noise as `Noise.half` pools it, else the steps' own spread); None under two
    steps, whose spread says nothing."""
    steps = steps_of([p for p in points if p.t >= start_t])
    ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
    if len(steps) < 2 or sum(ys) <= 0:
        return None
    rate = sum(ys) / sum(xs)
    return rate + half_width(ys, xs, rate, noise, z)


def open_step_upper(points: Sequence[Point], start_t: float, now: float, noise: Noise | None = None) -> float | None:
    """`rate_upper` counting the step in progress as if it ended at `now`: it ends no sooner, so its samples/s is
    at most that. None until it has lasted longer than every step since `start_t` (at least two): only then can it
    lower the rate. The interval's width is the wider of the completed steps' and theirs with this one, so that a
    step still running never narrows it. The step brings as many iterations and samples as the last one did."""
    inside = [p for p in points if p.t >= start_t]
    steps = steps_of(inside)
    if len(steps) < 2 or sum(s.samples for s in steps) <= 0 or now - inside[-1].t <= max(s.seconds for s in steps):
        return None
    ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
    rate, _, hi = ratio_interval(ys, xs, noise)
    open_rate, _, open_hi = ratio_interval([*ys, steps[-1].samples], [*xs, now - inside[-1].t], noise)
    if rate <= 0 or open_rate <= 0:
        return None
    return open_rate * (1.0 + max(hi / rate - 1.0, open_hi / open_rate - 1.0))
