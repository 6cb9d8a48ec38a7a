"""The measurement window and the figures over it. Pure: samples and progress points in, numbers out.

The window opens after warm-up (seed 003's rule, generalised): at the first progress point whose iteration is
at least `warmup_iters` and whose last `stable_k` step times agree within `stable_tol` (relative spread); if that
never happens by `warmup_timeout_s`, it opens anyway and is marked ungated. It closes `window_s` later.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ladder.monitor import Sample
from ladder.progress import Point

ACTIVE_UTIL = 5.0  # a tick counts as active when the mean util over devices exceeds this percent


@dataclass(frozen=True)
class Window:
    start_t: float
    end_t: float
    gated: bool  # False: opened by warmup_timeout_s, not by a stable step time


def stable_start(points: Sequence[Point], warmup_iters: int, stable_k: int, stable_tol: float) -> float | None:
    """The time of the first point after which the step time is steady; None while warming up."""
    for i, point in enumerate(points):
        if point.iter < warmup_iters or i + 1 < stable_k:
            continue
        steps = [p.step_time_s for p in points[i + 1 - stable_k : i + 1]]
        if all(s is not None for s in steps) and _spread([float(s) for s in steps if s is not None]) <= stable_tol:
            return point.t
    return None


def open_window(
    points: Sequence[Point], launch_t: float, now: float, window_s: float, rule: tuple[int, int, float], timeout_s: float
) -> Window | None:
    """The window, once it can open: gated by the stable rule, or ungated at the warm-up timeout."""
    start = stable_start(points, *rule)
    if start is not None:
        return Window(start, start + window_s, gated=True)
    if now - launch_t >= timeout_s:
        return Window(now, now + window_s, gated=False)
    return None


def window_closed(window: Window, points: Sequence[Point]) -> bool:
    """Closed once the trainer has reported past its end (so the rate is bracketed by real points)."""
    return bool(points) and points[-1].t >= window.end_t


def figures(samples: Sequence[Sample], points: Sequence[Point], window: Window | None, launch_t: float) -> dict[str, float]:
    """Every figure a trial records; util figures over the window (over the whole run when none opened)."""
    inside = [s for s in samples if window is None or window.start_t <= s.t <= window.end_t]
    out = _util_figures(inside)
    out.update(_memory_figures(samples))
    if window is not None:
        out.update(_rate_figures(points, window))
        out["window_start_s"] = round(window.start_t - launch_t, 2)
        out["gated"] = 1.0 if window.gated else 0.0
    return out


def _util_figures(samples: Sequence[Sample]) -> dict[str, float]:
    by_index = _by_index(samples, lambda s: s.util)
    if not by_index:
        return {}
    avgs = {i: statistics.fmean(v) for i, v in by_index.items()}
    ticks = _tick_means(samples)
    out = {f"avg_util{i}": round(a, 2) for i, a in sorted(avgs.items())}
    out["min_avg_util"] = round(min(avgs.values()), 2)
    out["p50_util"] = round(statistics.median(ticks), 2)
    out["n_samples"] = float(len(ticks))
    active = [u for u in ticks if u > ACTIVE_UTIL]
    out["active_frac"] = round(len(active) / len(ticks), 3)
    if active:
        out["avg_active_util"] = round(statistics.fmean(active), 2)
    return out


def _memory_figures(samples: Sequence[Sample]) -> dict[str, float]:
    return {f"max_mem{i}": round(max(v)) for i, v in sorted(_by_index(samples, lambda s: s.mem_mb).items())}


def _rate_figures(points: Sequence[Point], window: Window) -> dict[str, float]:
    inside = [p for p in points if window.start_t <= p.t <= window.end_t + _last_step(points)]
    if len(inside) < 2 or inside[-1].t <= inside[0].t:
        return {}
    span = inside[-1].t - inside[0].t
    steps = [p.step_time_s for p in inside[1:] if p.step_time_s is not None]
    out = {"samples_per_s": round((inside[-1].samples - inside[0].samples) / span, 1), "window_s": round(span, 2)}
    if steps:
        out["step_time_p50"] = round(statistics.median(steps), 4)
    return out


def _last_step(points: Sequence[Point]) -> float:
    """Slack so the point that closed the window counts."""
    return points[-1].step_time_s or 0.0 if points else 0.0


def _tick_means(samples: Sequence[Sample]) -> list[float]:
    ticks: dict[float, list[float]] = defaultdict(list)
    for s in samples:
        ticks[s.t].append(s.util)
    return [statistics.fmean(v) for _, v in sorted(ticks.items())]


def _by_index(samples: Sequence[Sample], value: object) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        out[s.index].append(value(s))  # type: ignore[operator]
    return out


def _spread(values: list[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else float("inf")
