"""The measurement window: it opens after warm-up, on steady step (and data) times (`Rule`), or ungated once the
warm-up timeout has passed since the first progress; it closes `window_s` later, holding enough points. `close_by`
projects when, at the trainer's pace.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ladder.core.measure.cadence import pace_s
from ladder.core.measure.steps import step_times
from ladder.core.records import Point


class Rule(NamedTuple):
    warmup_iters: int  # the window opens no earlier than this iteration
    stable_k: int  # ... and once the last k step times agree
    stable_tol: float  # relative spread (max-min)/median allowed among them
    data_time_max_s: float | None = None  # and each of the last k data times under this (None: no bound)


@dataclass(frozen=True)
class Window:
    start_t: float
    end_t: float
    gated: bool  # False: opened by warmup_timeout_s, not by a stable step time


@dataclass(frozen=True)
class Plan:
    """What a window needs (`measure.*`), for a projection of when it can close (`close_by`)."""

    warmup_iters: int
    stable_k: int
    warmup_timeout_s: float
    window_s: float
    min_window_iters: int


def stable_start(
    points: Sequence[Point], warmup_iters: int, stable_k: int, stable_tol: float, data_time_max_s: float | None = None
) -> float | None:
    """The time of the first point after which the step (and data) time is steady; None while warming up."""
    steps = step_times(points)
    for i, point in enumerate(points):
        if point.iter < warmup_iters or i + 1 < stable_k:
            continue
        last = slice(i + 1 - stable_k, i + 1)
        datas = [p.data_time_s for p in points[last]]
        if _steady(steps[last], datas, stable_tol, data_time_max_s):
            return point.t
    return None


def _steady(steps: Sequence[float | None], datas: Sequence[float | None], tol: float, data_max: float | None) -> bool:
    known = [s for s in steps if s is not None]
    if len(known) < len(steps) or _spread(known) > tol:
        return False
    reported = [d for d in datas if d is not None]
    if not reported:  # the trainer reports no data time: the step time decides alone
        return True
    if len(reported) < len(datas) or (data_max is not None and max(reported) > data_max):
        return False
    return max(reported) - min(reported) <= tol * statistics.median(known)


def _spread(values: list[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else float("inf")


def open_window(
    points: Sequence[Point], now: float, window_s: float, rule: Rule | tuple[Any, ...], timeout_s: float
) -> Window | None:
    """The window, once it can open: gated by the stable rule, or ungated `timeout_s` after the trainer's first
    progress point, once it has given its warm-up points (`warmup_iters` of them). Never before the first progress: a
    trainer's start-up (imports, env build, compiling) is not its warm-up."""
    rule = Rule(*rule)
    start = stable_start(points, *rule)
    if start is not None:
        return Window(start, start + window_s, gated=True)
    if points and len(points) >= max(1, rule.warmup_iters) and now - points[0].t >= timeout_s:
        return Window(now, now + window_s, gated=False)
    return None


def window_points(window: Window, points: Sequence[Point]) -> int:
    """How many progress points the window holds so far (from its start on)."""
    return sum(1 for p in points if p.t >= window.start_t)


def stable_since(points: Sequence[Point], window: Window, stable_k: int) -> float:
    """Where the steady steps behind a window begin: a window the stable rule opened follows the `stable_k` steps
    that agreed (`stable_start`), so they are steady too, and a cut may count them; an ungated window, its start."""
    if not window.gated:
        return window.start_t
    at = next((i for i, p in enumerate(points) if p.t >= window.start_t), None)
    return window.start_t if at is None else points[max(0, at - stable_k)].t


def close_by(points: Sequence[Point], window: Window | None, now: float, plan: Plan) -> float | None:
    """When the window can close at the trainer's pace so far (`pace_s`), as a unix time; None before two points.
    Not yet open, it opens (`open_window`) once its warm-up points and `stable_k` steady ones have come (a steady
    trainer), or at the latest once its warm-up points have come and `warmup_timeout_s` has passed since the first
    progress; then it runs `window_s` and holds `min_window_iters` points. Open, its missing points at that pace."""
    pace = pace_s(points)
    if pace is None:
        return None
    if window is None:

        def at(count: int) -> float:  # when the trainer will have printed `count` points
            return now + max(0, count - len(points)) * pace

        steady = at(plan.warmup_iters + plan.stable_k)
        anyway = max(at(plan.warmup_iters), points[0].t + plan.warmup_timeout_s)
        return max(now, min(steady, anyway)) + max(plan.window_s, plan.min_window_iters * pace)
    return max(window.end_t, now + max(0, plan.min_window_iters - window_points(window, points)) * pace)


def close_window(window: Window, points: Sequence[Point], min_points: int = 1) -> Window | None:
    """The window, closed at the newest point, once `window_s` has passed (the trainer reported past its end) and
    it holds at least `min_points` progress points; None while it goes on. It ends at that newest point, so every
    point that closed it is counted: a trainer that reports rarely is measured over the points it gave."""
    if not points or points[-1].t < window.end_t or window_points(window, points) < max(1, min_points):
        return None
    return replace(window, end_t=points[-1].t)


def window_closed(window: Window, points: Sequence[Point], min_points: int = 1) -> bool:
    """Closed once the trainer has reported past its end and the window holds `min_points` points."""
    return close_window(window, points, min_points) is not None
