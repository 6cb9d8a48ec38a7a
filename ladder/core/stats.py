"""The measurement window and the figures over it. Pure: samples and progress points in, numbers out.

The window opens after warm-up (the manual routine's rule, generalised): at the first progress point whose iteration is
at least `warmup_iters` and whose last `stable_k` step times agree within `stable_tol` (relative spread), with their
data times, where the trainer reports them, as steady (their spread within `stable_tol` of a step, and each under
`data_time_max_s` when that is set: e.g. "data_time < 0.02 s for 5 log points"). If that never happens within
`warmup_timeout_s` of the trainer's first progress point (never counted from its launch), it opens anyway once the
warm-up points are in, and is marked ungated. It closes `window_s` later, and not before the trial's memory has
outlived its peak (`outlived_peak`): a fit measured before its first update is no fit.

Util figures are over the window, per GPU and per second (as nvidia-smi dmon counts);
memory peaks are over the whole trial; samples/s is the ratio of samples to seconds between the progress points
in the window, with a 95% interval from the per-interval rates (ratio estimator, Student t).
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from ladder.core.figkeys import AVG_SM_UTIL, AVG_UTIL, MAX_MEM, key, values
from ladder.core.records import Point, Sample, Source

ACTIVE_UTIL = 5.0  # a second counts as active when the mean util over devices exceeds this percent
BIN_S = 1.0  # util per second first: p50, active and idle seconds are over seconds, as in the seeds
MAX_SPREAD = 0.05  # repeats whose samples/s differ by more than this fraction (of their mean) are unstable
MAX_CI_FRAC = 0.10  # ... as is a trial whose 95% interval is wider than this fraction of its samples/s (±5%)
# The early cut with the case's pooled step noise (`pooled_noise`): each look at the one-sided 0.5% quantile (z 2.576),
# since a cut looks again at every step; the pool only from MIN_POOLED_DF degrees of freedom on, and weighing at most
# POOL_WEIGHT_DF against a trial's own steps, so that a trial noisier than the case's others still widens its own
# interval (`scripts/sim_cut.py`: with a pool that counted in full, a trial twice as noisy was cut wrongly twice as
# often as on its own interval; weighed so, as often). Two degrees of freedom suffice, at t's exact quantile
# (`t_quantile`): a slow trainer's window holds three or four steps, and without the pool a trial is judged on its
# own interval, which cuts wrongly more often: `python scripts/sim_cut.py --steps 4 --pooled-df 2` at the value to
# beat 1.3% of trials against 5.4% on their own, a rate 0.75 x it cut after 2.5 steps against 2.7.
CUT_Z = 2.575829
Z95 = 1.959964  # the two-sided 95% interval's normal quantile
# An insurance probe (a short probe) ends on its steady steps once their rate's one-sided 95% top (this many
# standard errors up, `rate_top`) is below what it must beat, or when its short window closes with the rate itself
# below it (`trial._short_lost`). A clearly slower rung ends at its second or third step rather than at the short
# window's end (15 steps of a 60 s window on a GPU), and one that could win is missed hardly more often: `python
# scripts/sim_cut.py --short --short-steps 15 --cv 0.03` at 1.02 times the value to beat 1.5% against 0.5%, at 1.05
# none; `--short-steps 4 --cv 0.08` (the proxy on CPU) at 1.05 times 12.2% against 11.7%
SHORT_Z = 1.645
MIN_POOLED_DF = 2.0
EXACT_T_DF = 100  # `t_quantile` is exact below this many degrees of freedom
POOL_WEIGHT_DF = 6.0
# A whole window's 95% interval (`whole_window_noise`) pools the case's step noise only where the window's own step
# spread is at most this many times the pool's: a trial noisier than the case's others is judged on its own steps,
# as the pool would understate its spread. `python scripts/sim_cut.py --coverage --cv 0.03` (a pool of 6 df, 4000
# windows a row): windows of 3-10 steps as noisy as the pool miss the true rate in 3.4-4.7% of windows (5% promised)
# and are wide (over `MAX_CI_FRAC`) in 28% of 3-step windows and 17% of 4-step ones, against 62% and 34% on their own
# steps; twice as noisy (`--trial-cv 0.06`) they miss in 6.1-10.3%, where a pool without the gate missed in 10-18%.
# The steady steps that opened the window join without a gate (the same process): `--pooled-df 0 --settled-steps 3`
# (a case's first window) 4.5-5.1%, wide in 36% and 13%; a window twice as noisy as those steps 6.5-10.4%
POOL_GATE = 1.5
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)  # Student t, 97.5%, df 1-10


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


# ---------------------------------------------------------------- the window


def step_times(points: Sequence[Point]) -> list[float | None]:
    """Each point's step time: as reported, else the seconds per iteration since the previous point."""
    out: list[float | None] = []
    for i, point in enumerate(points):
        derived, prev = None, points[i - 1] if i else None
        if prev is not None and point.iter > prev.iter and point.t > prev.t:
            derived = (point.t - prev.t) / (point.iter - prev.iter)
        out.append(point.step_time_s if point.step_time_s is not None else derived)
    return out


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


def open_window(
    points: Sequence[Point], now: float, window_s: float, rule: Rule | tuple, timeout_s: float
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


GROWTH_TOL = 0.02  # memory within 2% (and MIN_GROWTH_MB) of the peak before is no new peak
MIN_GROWTH_MB = 8.0
SETTLE_FRAC = 0.25  # memory must have set no new peak over this share of the window at least ...
SETTLE_GAPS = 2.0  # ... and over this many times the longest pause between progress points (an update's length)
BURST_RATIO = 4.0  # a pause this many times the median interval (and at least MIN_GAP_S) parts two bursts
MIN_GAP_S = 0.5


def intervals_s(points: Sequence[Point]) -> list[float]:
    """The seconds between consecutive progress points."""
    return [b.t - a.t for a, b in zip(points, points[1:], strict=False) if b.t > a.t]


def pauses(points: Sequence[Point]) -> list[tuple[float, float]]:
    """The pauses between bursts of progress, as (start, length): silences of at least `MIN_GAP_S` and `BURST_RATIO`
    times the median interval between points; none before three intervals (too few to have a median)."""
    gaps = [(a.t, b.t - a.t) for a, b in zip(points, points[1:], strict=False) if b.t > a.t]
    if len(gaps) < 3:
        return []
    least = max(MIN_GAP_S, BURST_RATIO * statistics.median(g for _, g in gaps))
    return [(t, g) for t, g in gaps if g >= least]


def cycle_gap_s(points: Sequence[Point]) -> float | None:
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


def settle_s(points: Sequence[Point], window_s: float) -> float:
    """How long memory must have set no new peak before a window may close: a share of the window, and at least
    twice the longest pause between progress points seen (the trainer's update, where it has one)."""
    gaps = intervals_s(points)
    return max(SETTLE_FRAC * window_s, SETTLE_GAPS * max(gaps, default=0.0))


def still_rising(samples: Sequence[Sample], end_t: float, span_s: float) -> bool:
    """Whether any device's memory set a new peak (more than GROWTH_TOL and MIN_GROWTH_MB above its peak before)
    in the `span_s` before `end_t`; also where nothing was sampled before that span (too young to tell)."""
    rising = False
    for index in {s.index for s in samples}:
        mine = [s for s in samples if s.index == index and s.t <= end_t]
        before = [s.mem_mb for s in mine if s.t <= end_t - span_s]
        recent = [s.mem_mb for s in mine if s.t > end_t - span_s]
        if not before:
            return True
        peak, last = max(before), max(recent, default=0.0)
        rising = rising or (last > peak * (1 + GROWTH_TOL) and last - peak > MIN_GROWTH_MB)
    return rising


LEARN_WINDOWS = 3.0  # a cadence of unknown kind shows itself within this many windows: a pause, or none at all


def outlived_peak(
    samples: Sequence[Sample], points: Sequence[Point], window: Window, window_s: float, per_iteration: bool = True
) -> str:
    """Why the window, closed, still cannot stand for a fit ("" when it can). A fit measured only inside a rollout
    has not met the memory its first update needs, so, where the trainer's lines may come from inside a rollout (a
    trainer's own regex or JSON lines: `per_iteration` False): where progress comes in bursts (a rollout's lines,
    then the silent update, a pause that recurs: `cycle_gap_s`), the window must hold a pause between two; where no
    pause has recurred yet, the trial must have printed evenly, with no pause, for `LEARN_WINDOWS` windows first (a
    rollout longer than that is taken for no rollout; a single pause, which may be the machine stalling the trainer
    mid-rollout, starts that count again). A trainer that prints once a whole iteration (`per_iteration`: MimicKit,
    the proxy, the presets that do) has an update between any two of its lines, so its pauses are the machine's
    stalls, not its cadence: a window that holds none is no less a fit. For every trainer, the trial's memory must
    have set no new peak in the window's last `settle_s`."""
    gap = cycle_gap_s(points)
    inside = intervals_s([p for p in points if window.start_t <= p.t <= window.end_t])
    if gap is not None and not per_iteration and not any(g >= gap / 2 for g in inside):
        return f"its progress comes in bursts (pauses of {gap:.1f} s) and the window held no pause: no update yet"
    steady_s = even_s(points)
    if gap is None and not per_iteration and steady_s < LEARN_WINDOWS * window_s:
        return (
            f"its cadence is unknown (a regex of its own): no pause has recurred in its progress and it has printed "
            f"evenly for {steady_s:.1f} s only, and an update comes only after a whole rollout"
        )
    span = settle_s(points, window_s)
    if samples and still_rising(samples, window.end_t, span):
        return f"its memory was still rising in the last {span:.1f} s of the window"
    return ""


def near_cap(figures: Mapping[str, float], card_mb: float | None, headroom: float) -> str:
    """The cap a trial's memory peak came within `headroom` (a share) of, as a person reads it ("" when none did):
    its memory cgroup (the peak of all its processes against `workload.host_mem_limit_gb`), the emulated card (what
    the trainer's allocator held against its size) or, on a GPU, the card itself (`card_mb`, NVML's device memory)."""
    caps = [
        ("memory cgroup", figures.get("cgroup_peak_mb"), figures.get("cgroup_limit_mb")),
        ("emulated card", figures.get("cap_used_mb"), figures.get("cap_mb")),
        ("GPU memory", max(values(figures, MAX_MEM), default=None), card_mb),
    ]
    for name, peak, cap in caps:
        if peak is not None and cap and peak >= (1.0 - headroom) * cap:
            return f"{peak:.0f}/{cap:.0f} MiB of its {name} ({peak / cap:.0%}, within {headroom:.0%} of it)"
    return ""


def window_points(window: Window, points: Sequence[Point]) -> int:
    """How many progress points the window holds so far (from its start on)."""
    return sum(1 for p in points if p.t >= window.start_t)


STALL_GAPS = 3.0  # a trainer silent this many times its longest pause so far (and stall_timeout_s) has stalled


def pace_s(points: Sequence[Point]) -> float | None:
    """The trainer's seconds per progress point so far, over all its points (bursts and the updates between them
    included); None before two."""
    if len(points) < 2 or points[-1].t <= points[0].t:
        return None
    return (points[-1].t - points[0].t) / (len(points) - 1)


def stall_limit_s(points: Sequence[Point], stall_timeout_s: float) -> float:
    """How long a trainer that has printed may stay silent before it counts as stalled: `stall_timeout_s`, or
    `STALL_GAPS` times its longest pause so far where that is longer (a slow trainer's iteration is no hang)."""
    return max(stall_timeout_s, STALL_GAPS * max(intervals_s(points), default=0.0))


@dataclass(frozen=True)
class Plan:
    """What a window needs (`measure.*`), for a projection of when it can close (`close_by`)."""

    warmup_iters: int
    stable_k: int
    warmup_timeout_s: float
    window_s: float
    min_window_iters: int


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


def busy(samples: Sequence[Sample], since_t: float) -> bool:
    """The trainer visibly works since `since_t` (no progress line is proof of a hang): a second of util over
    ACTIVE_UTIL on its devices (or CPUs), or its memory still growing (by more than 2%)."""
    recent = [s for s in samples if s.t >= since_t]
    for source in {s.source for s in recent}:  # GPU util and host CPU apart: either one working is enough
        mine = [s for s in recent if s.source == source]
        if any(u > ACTIVE_UTIL for u in per_second(mine)):
            return True
        mems = [s.mem_mb for s in sorted(mine, key=lambda s: s.t)]
        if len(mems) >= 2 and max(mems[len(mems) // 2 :]) > 1.02 * max(mems[: len(mems) // 2]) > 0:
            return True
    return False


# ---------------------------------------------------------------- figures


def source_of(samples: Iterable[Sample]) -> str:
    """nvml where any GPU was sampled, else host ("" with no samples at all)."""
    sources = {s.source for s in samples}
    return str(Source.NVML) if Source.NVML in sources else str(Source.HOST) if sources else ""


def figures(
    samples: Sequence[Sample],
    points: Sequence[Point],
    window: Window | None,
    launch_t: float,
    noise: Noise | None = None,
    z: float | None = None,
) -> dict[str, float]:
    """Every figure a trial records; util figures over the window (over the whole run when none opened). `noise`:
    the step noise its samples/s interval was judged on (a cut's, the case's pool; a whole window's,
    `whole_window_noise`), which that interval then says (`noise_pooled_df`), at `z` (None: `CUT_Z`, a cut's; `Z95`,
    a whole window's two-sided 95%)."""
    source = source_of(samples)
    main = [s for s in samples if s.source == source]
    inside = _within(main, window)
    out = _util_figures(inside)
    out.update(_memory_figures(main))
    out.update(_gpu_extras(inside, main))
    if source == Source.NVML:
        out.update(_host_alongside([s for s in samples if s.source == Source.HOST], window))
    if points:  # start-up: launcher, imports, the trainer's build and its first iteration
        out["first_step_s"] = round(min(p.t for p in points) - launch_t, 2)
    if window is not None:
        out.update(_rate_figures(points, window, noise, z))
        out["window_start_s"] = round(window.start_t - launch_t, 2)
        out["gated"] = 1.0 if window.gated else 0.0
    return out


def util_summary(samples: Sequence[Sample]) -> dict[str, float]:
    """The util figures of a series as it is (the scripts' window summaries)."""
    return _util_figures(samples)


def _within(samples: Sequence[Sample], window: Window | None) -> list[Sample]:
    return [s for s in samples if window is None or window.start_t <= s.t <= window.end_t]


def _util_figures(samples: Sequence[Sample]) -> dict[str, float]:
    by_index = _by_index(samples, lambda s: s.util)
    if not by_index:
        return {}
    avgs = {i: statistics.fmean(v) for i, v in by_index.items()}
    seconds = per_second(samples)
    active = [u for u in seconds if u > ACTIVE_UTIL]
    out = {key(AVG_UTIL, i): round(a, 2) for i, a in sorted(avgs.items())}
    out["min_avg_util"] = round(min(avgs.values()), 2)
    out["p50_util"] = round(statistics.median(seconds), 2)
    out["n_samples"] = float(len({s.t for s in samples}))
    out["active_s"] = len(active) * BIN_S
    out["idle_s"] = (len(seconds) - len(active)) * BIN_S
    out["active_frac"] = round(len(active) / len(seconds), 3)
    if active:
        out["avg_active_util"] = round(statistics.fmean(active), 2)  # both devices' mean over their active seconds
    if (spread := util_spread(samples)) is not None:
        out["util_spread"] = round(spread, 2)
    return out


def util_spread(samples: Sequence[Sample]) -> float | None:
    """The noise of `min_avg_util`: the half-width of the 95% interval (Student t) of the mean util of the device
    whose mean is lowest, from that device's per-second means (seconds are not independent under a steady load,
    so this is a floor on the noise, not a bound); None under two seconds of samples."""
    by_index = _by_index(samples, lambda s: s.util)
    if not by_index:
        return None
    low = min(by_index, key=lambda i: statistics.fmean(by_index[i]))
    seconds = per_second([s for s in samples if s.index == low])
    if len(seconds) < 2:
        return None
    return t975(len(seconds) - 1) * statistics.stdev(seconds) / math.sqrt(len(seconds))


def per_second(samples: Sequence[Sample]) -> list[float]:
    """The util of each second: each device's mean within it, averaged over the devices."""
    if not samples:
        return []
    t0 = min(s.t for s in samples)
    bins: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        bins[int((s.t - t0) // BIN_S)][s.index].append(s.util)
    return [statistics.fmean(statistics.fmean(v) for v in devs.values()) for _, devs in sorted(bins.items())]


def _memory_figures(samples: Sequence[Sample]) -> dict[str, float]:
    return {key(MAX_MEM, i): round(max(v)) for i, v in sorted(_by_index(samples, lambda s: s.mem_mb).items())}


def _gpu_extras(inside: Sequence[Sample], trial: Sequence[Sample]) -> dict[str, float]:
    """The trial's own peak per GPU (its processes, not the driver's or other users') and GPM SM util."""
    out: dict[str, float] = {
        f"proc_mem_max{i}": round(max(v)) for i, v in sorted(_by_index(trial, lambda s: s.proc_mem_mb).items())
    }
    sm = _by_index(inside, lambda s: s.sm_util)
    out.update({key(AVG_SM_UTIL, i): round(statistics.fmean(v), 2) for i, v in sorted(sm.items())})
    if sm:
        out["min_avg_sm_util"] = round(min(statistics.fmean(v) for v in sm.values()), 2)
    return out


def _host_alongside(host: Sequence[Sample], window: Window | None) -> dict[str, float]:
    cpu = _by_index(_within(host, window), lambda s: s.util)
    out: dict[str, float] = {f"host_cpu_avg{i}": round(statistics.fmean(v), 1) for i, v in sorted(cpu.items())}
    out.update({f"host_rss_max{i}": round(max(v)) for i, v in sorted(_by_index(host, lambda s: s.mem_mb).items())})
    return out


def _by_index(samples: Iterable[Sample], value: Callable[[Sample], float | None]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = defaultdict(list)
    for s in samples:
        v = value(s)
        if v is not None:
            out[s.index].append(v)
    return out


# ---------------------------------------------------------------- rates


class Interval(NamedTuple):
    seconds: float
    iters: int
    samples: float


def intervals(points: Sequence[Point]) -> list[Interval]:
    """Consecutive points as (seconds, iterations, samples) steps; points that share a time join the next."""
    return [step for step, _ in timed_intervals(points)]


def timed_intervals(points: Sequence[Point]) -> list[tuple[Interval, float]]:
    """`intervals`, each with the time its step began."""
    out: list[tuple[Interval, float]] = []
    start = points[0] if points else None
    for point in points[1:]:
        assert start is not None
        if point.t > start.t and point.iter > start.iter:
            out.append((Interval(point.t - start.t, point.iter - start.iter, point.samples - start.samples), start.t))
            start = point
    return out


def _rate_figures(
    points: Sequence[Point], window: Window, noise: Noise | None = None, z: float | None = None
) -> dict[str, float]:
    inside = [p for p in points if window.start_t <= p.t <= window.end_t]
    steps = intervals(inside)
    if not steps:
        return {}
    span = sum(s.seconds for s in steps)
    out = {
        "window_s": round(span, 2),
        "n_iters": float(sum(s.iters for s in steps)),
        "iters_per_s": round(sum(s.iters for s in steps) / span, 4),
    }
    reported = [p.sps for p in inside if p.sps is not None]
    if sum(s.samples for s in steps) > 0:
        ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
        rate, lo, hi = ratio_interval(ys, xs, noise, z)
        out.update(_rate(rate, lo, hi, reported=False) | step_noise(ys, xs))
        if noise is not None and len(steps) >= 2:
            out["noise_pooled_df"] = noise.df
    elif reported:  # the trainer prints a rate and no count: its rate stands for samples/s (`rate_reported` 1)
        out.update(_rate(*mean_interval(reported), reported=True))
    out.update(_median_of("step_time_p50", [t for t in step_times(inside)[1:] if t is not None]))
    out.update(_median_of("data_time_p50", [p.data_time_s for p in inside[1:] if p.data_time_s is not None]))
    if reported:
        out["sps_reported"] = reported[-1]
    return out


def _rate(rate: float, lo: float, hi: float, reported: bool) -> dict[str, float]:
    """A rate's figures; its interval never below zero (a rate is not negative, whatever the t-interval says)."""
    return {
        "samples_per_s": round(rate, 1),
        "samples_per_s_lo": round(max(0.0, lo), 1),
        "samples_per_s_hi": round(hi, 1),
        "rate_reported": 1.0 if reported else 0.0,
    }


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean of `values` with its 95% interval (Student t; unbounded for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, -math.inf, math.inf
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def window_ci_frac(points: Sequence[Point], window: Window, noise: Noise | None = None) -> float | None:
    """The samples/s interval's width over `window`, as a fraction of the rate; None without a rate. With `noise`
    (`whole_window_noise`) the two-sided 95% interval with that spread pooled in (`Noise.half` at `Z95`), as the
    trial's figures then say it (`figures` with `z=Z95`)."""
    return ci_frac(_rate_figures(points, window, noise, Z95 if noise is not None else None))


def settled_noise(points: Sequence[Point], window: Window, stable_k: int) -> Noise | None:
    """The step noise of the steady steps that opened `window` (the stable rule's last `stable_k`, `stable_since`):
    the same trainer, configuration and process as the window, steps it does not count in its rate. None for a
    window the stable rule did not open, under two such steps, or where they were alike to the clock's resolution."""
    since = stable_since(points, window, stable_k)
    steps = intervals([p for p in points if since <= p.t <= window.start_t])
    found = step_noise([s.samples for s in steps], [s.seconds for s in steps]) if steps else {}
    sd, df = found.get("step_sd_frac"), found.get("step_df")
    return Noise(sd, df) if sd and df else None


def joined(*noises: Noise | None) -> Noise | None:
    """Step noises pooled by their degrees of freedom (None where none is given)."""
    known = [n for n in noises if n is not None]
    df = sum(n.df for n in known)
    return Noise(math.sqrt(sum(n.df * n.sd_frac**2 for n in known) / df), df) if df > 0 else None


def whole_window_noise(points: Sequence[Point], window: Window, case: Noise | None, stable_k: int = 0) -> Noise | None:
    """The step noise a whole window's 95% interval pools (`window_ci_frac`, a trial's figures): the case's pooled
    step noise `case`, unless the window's own steps spread more than `POOL_GATE` times it (a configuration noisier
    than the case's others), joined with that of the steady steps that opened the window (`settled_noise`: the same
    process, so no gate). None where neither is there."""
    own = _rate_figures(points, window).get("step_sd_frac") if case is not None else None
    gated = case if case is not None and own is not None and own <= POOL_GATE * case.sd_frac else None
    return joined(gated, settled_noise(points, window, stable_k) if stable_k > 1 else None)


def projected_ci_frac(
    points: Sequence[Point], window: Window, until_t: float, noise: Noise | None = None
) -> float | None:
    """The width of the samples/s interval over `window` (as `window_ci_frac`) that running on to `until_t` would
    leave if its steps went on as they have: as many more as its mean step fits in the time left, spread as the steps
    so far (one step's relative sd, `step_noise`, or the reported rates' spread), with `noise` pooled in as
    `window_ci_frac` pools it. The width falls as t/sqrt(n) does: a window whose spread is a drift, not step
    noise, is projected to stay wide. None under two steps."""
    inside = [p for p in points if window.start_t <= p.t <= window.end_t]
    steps = intervals(inside)
    reported = [p.sps for p in inside if p.sps is not None]
    if len(steps) >= 2 and sum(s.samples for s in steps) > 0:
        sd_frac, n = step_noise([s.samples for s in steps], [s.seconds for s in steps]).get("step_sd_frac"), len(steps)
    elif len(reported) >= 2 and statistics.fmean(reported) > 0:
        sd_frac, n = statistics.stdev(reported) / statistics.fmean(reported), len(reported)
    else:
        return None
    if sd_frac is None:
        return None
    more = int(max(0.0, until_t - inside[-1].t) // (sum(s.seconds for s in steps) / len(steps))) if steps else 0
    if noise is not None and steps:  # the reported rates' spread is no step noise: only steps pool
        return 2 * noise.half(sd_frac, n + more, Z95)
    return 2 * t975(n + more - 1) * sd_frac / math.sqrt(n + more)


def ci_frac(figures: Mapping[str, float]) -> float | None:
    """The width of the samples/s interval as a fraction of the rate (what `max_ci_frac` bounds); None without."""
    rate = Rate.of(figures)
    if rate is None:
        return None
    return (rate.hi - rate.lo) / rate.value if rate.value > 0 else math.inf


def stable_since(points: Sequence[Point], window: Window, stable_k: int) -> float:
    """Where the steady steps behind a window begin: a window the stable rule opened follows the `stable_k` steps
    that agreed (`stable_start`), so they are steady too, and a cut may count them; an ungated window, its start."""
    if not window.gated:
        return window.start_t
    at = next((i for i, p in enumerate(points) if p.t >= window.start_t), None)
    return window.start_t if at is None else points[max(0, at - stable_k)].t


def rate_upper(points: Sequence[Point], start_t: float, noise: Noise | None = None) -> float | None:
    """The top of the samples/s interval over the points since `start_t` (None until there is a rate); with
    `noise`, the case's pooled step noise sets its spread (`Noise.half`)."""
    if not points:
        return None
    hi = _rate_figures(points, Window(start_t, points[-1].t, gated=True), noise).get("samples_per_s_hi")
    return hi if hi is not None and math.isfinite(hi) else None


def final_upper(
    points: Sequence[Point], start_t: float, end_t: float, band: float, noise: Noise | None = None
) -> float | None:
    """How high, at most, the window's samples/s can still take it in a tie once the window ends at `end_t`, from
    its steps since `start_t`: `rate_upper`, or lower as the window runs out (None until there is a rate).

    The steps already run are fixed; only the rest can move the final rate. Of a mean over N steps known for n, the
    final value lies within sqrt(1 - n/N) of the rate's own interval around its current one, `1 - n/N` being the
    share of the window's time still to come. A tie reaches the higher of a value and its interval's top less the
    run-to-run `band` (a fraction: `pick.reach`), so the interval the window would end with (its 95% half-width over
    the whole window) counts where it is wider than `band`. Never above `rate_upper`: the cut on the rate's own top
    holds as it was. A window past `end_t` is counted one step short of its end (it may be held open, or be short of
    its points). `python scripts/sim_cut.py --predict --steps 15`: at the case's step noise, a trial whose whole window
    would have reached the value to beat is cut so in 0.5% of trials at a true rate equal to it (0.27% on the rate's
    own top), and one 5% below it in 96% of trials (48%), after about half of its window."""
    upper = rate_upper(points, start_t, noise)
    steps = intervals([p for p in points if p.t >= start_t])
    ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
    if upper is None or len(steps) < 2 or sum(ys) <= 0:
        return upper
    rate, span = sum(ys) / sum(xs), sum(xs)
    left = max(end_t - points[-1].t, span / len(steps))  # one step more at least: a window may be held open
    top = rate + _half(ys, xs, rate, noise) * math.sqrt(left / (span + left))
    wide = _half(ys, xs, rate, noise, Z95) * math.sqrt(span / (span + left))
    return min(upper, max(top, (top + wide) / (1.0 + band)))


def rate_top(points: Sequence[Point], start_t: float, z: float, noise: Noise | None = None) -> float | None:
    """The samples/s over the steps since `start_t`, `z` standard errors up (the one-sided `z` quantile of t: with
    `noise`, the case's pooled step noise as `Noise.half` pools it, else the steps' own spread); None under two
    steps, whose spread says nothing."""
    steps = intervals([p for p in points if p.t >= start_t])
    ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
    if len(steps) < 2 or sum(ys) <= 0:
        return None
    rate = sum(ys) / sum(xs)
    return rate + _half(ys, xs, rate, noise, z)


def open_step_upper(points: Sequence[Point], start_t: float, now: float, noise: Noise | None = None) -> float | None:
    """`rate_upper` counting the step in progress as if it ended at `now`: it ends no sooner, so its samples/s is
    at most that. None until it has lasted longer than every step since `start_t` (at least two): only then can it
    lower the rate. The interval's width is the wider of the completed steps' and theirs with this one, so that a
    step still running never narrows it. The step brings as many iterations and samples as the last one did."""
    inside = [p for p in points if p.t >= start_t]
    steps = intervals(inside)
    if len(steps) < 2 or sum(s.samples for s in steps) <= 0 or now - inside[-1].t <= max(s.seconds for s in steps):
        return None
    ys, xs = [s.samples for s in steps], [s.seconds for s in steps]
    rate, _, hi = ratio_interval(ys, xs, noise)
    open_rate, _, open_hi = ratio_interval([*ys, steps[-1].samples], [*xs, now - inside[-1].t], noise)
    if rate <= 0 or open_rate <= 0:
        return None
    return open_rate * (1.0 + max(hi / rate - 1.0, open_hi / open_rate - 1.0))


def _median_of(name: str, values: list[float]) -> dict[str, float]:
    return {name: round(statistics.median(values), 4)} if values else {}


def ratio_interval(
    ys: Sequence[float], xs: Sequence[float], noise: Noise | None = None, z: float | None = None
) -> tuple[float, float, float]:
    """Σy/Σx with its 95% interval: the ratio estimator's standard error and Student t with n-1 degrees of
    freedom (an unbounded interval for a single step: one interval says nothing about its spread). With `noise`
    (the case's pooled step noise, `pooled_noise`) and at least two steps, the spread is the pooled one and the
    quantile `z` (None: `CUT_Z`, the cut's) at the pooled degrees of freedom (`Noise.half`)."""
    n, rate = len(xs), sum(ys) / sum(xs)
    if n < 2:
        return rate, -math.inf, math.inf
    half = _half(ys, xs, rate, noise, z)
    return rate, rate - half, rate + half


def _half(ys: Sequence[float], xs: Sequence[float], rate: float, noise: Noise | None, z: float | None = None) -> float:
    """The half-width, in samples/s, of `rate` = Σy/Σx over n >= 2 steps: the ratio estimator's standard error
    times t's quantile at `z` (None: the two-sided 95% one with the steps' own spread, `CUT_Z` with `noise`). With
    `noise` the spread is pooled with the case's (`Noise.half`)."""
    n, sd, mean_x = len(xs), _residual_sd(ys, xs, rate), statistics.fmean(xs)
    if noise is not None:
        return rate * noise.half(sd / (rate * mean_x) if rate > 0 else math.inf, n, CUT_Z if z is None else z)
    return (t975(n - 1) if z is None else t_quantile(n - 1, z)) * sd / math.sqrt(n) / mean_x


def _residual_sd(ys: Sequence[float], xs: Sequence[float], rate: float) -> float:
    """The ratio estimator's residual sd: how far each step's samples lie from `rate` times its seconds."""
    return math.sqrt(sum((y - rate * x) ** 2 for x, y in zip(xs, ys, strict=True)) / (len(xs) - 1))


def step_noise(ys: Sequence[float], xs: Sequence[float]) -> dict[str, float]:
    """One window step's relative spread around the window's rate (`step_sd_frac`: the ratio estimator's residual
    sd over a mean step's samples) and its degrees of freedom (`step_df`, steps less one); {} under two steps."""
    n, rate = len(xs), sum(ys) / sum(xs)
    if n < 2 or rate <= 0:
        return {}
    return {"step_sd_frac": round(_residual_sd(ys, xs, rate) / (rate * statistics.fmean(xs)), 5), "step_df": n - 1.0}


class Noise(NamedTuple):
    """A case's step noise on one machine, pooled over the windows its trials measured (`pooled_noise`): the
    relative sd of one step's samples/s and its degrees of freedom."""

    sd_frac: float
    df: float

    def half(self, own_sd_frac: float, n: int, z: float = CUT_Z) -> float:
        """The half-width, as a fraction of the rate, of an interval over `n` steps whose own spread is
        `own_sd_frac`: the two spreads pooled by their degrees of freedom, at the one-sided `z` quantile of t
        with the pooled degrees of freedom (`CUT_Z` for the cut, which looks at every step: each look at 0.5%, not
        2.5%)."""
        df = self.df + n - 1
        var = (self.df * self.sd_frac**2 + (n - 1) * own_sd_frac**2) / df
        return t_quantile(df, z) * math.sqrt(var / n)


def pooled_noise(
    figures: Iterable[Mapping[str, float]],
    min_df: float = MIN_POOLED_DF,
    earlier: Iterable[Mapping[str, float]] = (),
) -> Noise | None:
    """The step noise pooled over the windows of `figures` (each trial's `step_sd_frac` weighted by its
    `step_df`), counted as at most `POOL_WEIGHT_DF` degrees of freedom; None below `min_df`, or where every window's
    steps were alike to the clock's resolution (a spread of 0 would make any interval a point). `earlier`: windows
    of the case measured before this sweep on this machine, newest first (`ladder.storage.reuse.noise_windows`);
    they only fill what `figures` leave short of `POOL_WEIGHT_DF` (`_topped_up`)."""
    windows, _ = _topped_up(figures, earlier)
    pooled = joined(*windows)
    if pooled is None or pooled.df < min_df or pooled.sd_frac <= 0:
        return None
    return pooled._replace(df=min(pooled.df, POOL_WEIGHT_DF))


def carried_df(figures: Iterable[Mapping[str, float]], earlier: Iterable[Mapping[str, float]]) -> float:
    """How many of `pooled_noise(figures, earlier=earlier)`'s degrees of freedom came from `earlier`: 0 where this
    sweep's own windows fill the pool."""
    return _topped_up(figures, earlier)[1]


def _topped_up(
    figures: Iterable[Mapping[str, float]], earlier: Iterable[Mapping[str, float]]
) -> tuple[list[Noise], float]:
    """The windows of `figures`, then those of `earlier` in order while the pool is short of `POOL_WEIGHT_DF`
    degrees of freedom, each weighted by no more than the room left (a long earlier window does not outweigh this
    sweep's own); and how many degrees of freedom `earlier` gave."""
    windows = _windows(figures)
    room, took = POOL_WEIGHT_DF - sum(n.df for n in windows), 0.0
    for window in _windows(earlier):
        if room <= 0:
            break
        part = window._replace(df=min(window.df, room))
        windows.append(part)
        took += part.df
        room -= part.df
    return windows, took


def _windows(figures: Iterable[Mapping[str, float]]) -> list[Noise]:
    """Each window's step noise among `figures` (`step_noise`'s figures), where it has any."""
    windows = [(f.get("step_sd_frac"), f.get("step_df")) for f in figures]
    return [Noise(sd, k) for sd, k in windows if sd is not None and k and math.isfinite(sd)]


def t975(df: int) -> float:
    """Student t's 97.5% quantile; a table to 10 degrees of freedom, the Cornish-Fisher expansion beyond."""
    if df <= len(T975):
        return T975[df - 1]
    return t_quantile(df, 1.959964)


def t_quantile(df: float, z: float) -> float:
    """Student t's quantile at the normal quantile `z`: exact to `EXACT_T_DF` degrees of freedom (a fractional count
    taken down to the whole one below, the wider quantile), by bisection on t's distribution function
    (`_t_within`); the Cornish-Fisher expansion beyond (within 0.1% there). The expansion alone falls short at a
    few degrees of freedom (5.19 for 5.84 at 3, the one-sided 0.5% quantile), where a pool of a few steps is all a
    slow trainer's case holds."""
    if df >= EXACT_T_DF:
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    return _t_exact(max(1, math.floor(df)), z)


@functools.lru_cache(maxsize=1024)
def _t_exact(nu: int, z: float) -> float:
    target = math.erf(abs(z) / math.sqrt(2.0))  # P(|N| < |z|)
    lo, hi = 0.0, 1.0
    while _t_within(hi, nu) < target:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if _t_within(mid, nu) < target else (lo, mid)
    return math.copysign((lo + hi) / 2.0, z)


def _t_within(t: float, nu: int) -> float:
    """P(|T| < t) for Student t with `nu` (whole) degrees of freedom, in closed form (a finite series in
    cos(theta), theta = atan(t / sqrt(nu)))."""
    theta = math.atan(t / math.sqrt(nu))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if nu % 2 == 0:  # 1 + c2/2 + (1*3)/(2*4) c2^2 + ... up to c2^((nu-2)/2)
        term = total = 1.0
        for i in range(1, nu // 2):
            term *= (2 * i - 1) / (2 * i) * c2
            total += term
        return s * total
    term = total = 0.0  # odd: (2/pi)(theta + s (c + (2/3) c^3 + ... up to c^(nu-2)))
    if nu > 1:
        term = total = math.cos(theta)
        for i in range(1, (nu - 1) // 2):
            term *= (2 * i) / (2 * i + 1) * c2
            total += term
    return 2.0 / math.pi * (theta + s * total)


def _spread(values: list[float]) -> float:
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else float("inf")


# ---------------------------------------------------------------- repeats


def window_wide(figures: Mapping[str, float]) -> bool:
    """A window that ran whole (not cut short, not a short probe) and whose samples/s interval was still wider than
    `measure.max_ci_frac` (`window_unstable`: its own, where `unstable` becomes the verdict over every repeat; a first
    window's `unstable` in records written before that figure). Its rate is as likely a slow stretch of the machine
    as the configuration's: a trainer slowed part of the time spreads its steps wide, and their mean falls. Where a
    repeat of the same configuration measured a narrow window, a wide one does not count (`repeat_verdict`,
    `pick.median_repeats`). A cut window stays evidence however wide: its whole interval was below what it had to
    reach."""
    if "samples_per_s" not in figures or figures.get("cut") or figures.get("short"):
        return False
    own = figures.get("window_unstable", figures.get("unstable") if figures.get("repeats", 1) <= 1 else None)
    return bool(own)


class Rate(NamedTuple):
    value: float  # samples/s
    lo: float  # its 95% interval
    hi: float
    wide: bool = False  # its window ran whole and was still wide (`window_wide`)

    @staticmethod
    def of(figures: Mapping[str, float]) -> Rate | None:
        """The rate a trial's figures carry, if it measured one."""
        if "samples_per_s" not in figures:
            return None
        value = figures["samples_per_s"]
        lo, hi = figures.get("samples_per_s_lo", -math.inf), figures.get("samples_per_s_hi", math.inf)
        return Rate(value, lo, hi, window_wide(figures))


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
