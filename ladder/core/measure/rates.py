"""A window's samples/s and its 95% interval: the ratio estimator over its steps with Student t, on the steps' own
spread or with step noise pooled in (`whole_window_noise` says which), and the interval's width as a share of the
rate (`ci_frac`, which `measure.max_ci_frac` bounds).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ladder.core.measure.noise import CUT_Z, Noise, joined, residual_sd, step_noise
from ladder.core.measure.steps import step_times, steps_of
from ladder.core.measure.tdist import Z95, t975, t_quantile
from ladder.core.measure.window import Window, stable_since
from ladder.core.records import Point

# A whole window's interval pools the case's step noise only where the window's own step spread is at most this
# many times the pool's: the pool would understate a noisier configuration's spread, so that one is judged on its
# own steps (`python scripts/sim_cut.py --coverage` measures how often either misses)
POOL_GATE = 1.5


def ratio_interval(
    ys: Sequence[float], xs: Sequence[float], noise: Noise | None = None, z: float | None = None
) -> tuple[float, float, float]:
    """Σy/Σx with its 95% interval: the ratio estimator's standard error and Student t with n-1 degrees of
    freedom (an unbounded interval for a single step: one step says nothing of its spread). With `noise`
    (the case's pooled step noise, `pooled_noise`) and at least two steps, the spread is the pooled one and the
    quantile `z` (None: `CUT_Z`, the cut's) at the pooled degrees of freedom (`Noise.half`)."""
    n, rate = len(xs), sum(ys) / sum(xs)
    if n < 2:
        return rate, -math.inf, math.inf
    half = half_width(ys, xs, rate, noise, z)
    return rate, rate - half, rate + half


def half_width(
    ys: Sequence[float], xs: Sequence[float], rate: float, noise: Noise | None, z: float | None = None
) -> float:
    """The half-width, in samples/s, of `rate` = Σy/Σx over n >= 2 steps: the ratio estimator's standard error
    times t's quantile at `z` (None: the two-sided 95% one with the steps' own spread, `CUT_Z` with `noise`). With
    `noise` the spread is pooled with the case's (`Noise.half`)."""
    n, sd, mean_x = len(xs), residual_sd(ys, xs, rate), statistics.fmean(xs)
    if noise is not None:
        return rate * noise.half(sd / (rate * mean_x) if rate > 0 else math.inf, n, CUT_Z if z is None else z)
    return (t975(n - 1) if z is None else t_quantile(n - 1, z)) * sd / math.sqrt(n) / mean_x


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The mean of `values` with its 95% interval (Student t; unbounded for a single value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, -math.inf, math.inf
    half = t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def rate_figures(
    points: Sequence[Point], window: Window, noise: Noise | None = None, z: float | None = None
) -> dict[str, float]:
    """The figures of the rate over `window`: its seconds and iterations, samples/s with its interval (on `noise`
    at `z` where given, as `ratio_interval`), its step noise, and the median step and data times."""
    inside = [p for p in points if window.start_t <= p.t <= window.end_t]
    steps = steps_of(inside)
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


def _median_of(name: str, values: list[float]) -> dict[str, float]:
    return {name: round(statistics.median(values), 4)} if values else {}


def window_ci_frac(points: Sequence[Point], window: Window, noise: Noise | None = None) -> float | None:
    """The samples/s interval's width over `window`, as a fraction of the rate; None without a rate. With `noise`
    (`whole_window_noise`) the two-sided 95% interval with that spread pooled in (`Noise.half` at `Z95`), as the
    trial's figures then say it (`figures` with `z=Z95`)."""
    return ci_frac(rate_figures(points, window, noise, Z95 if noise is not None else None))


def steady_noise(points: Sequence[Point], window: Window, stable_k: int) -> Noise | None:
    """The step noise of the steady steps that opened `window` (the stable rule's last `stable_k`, `stable_since`):
    the same trainer, configuration and process as the window, steps it does not count in its rate. None for a
    window the stable rule did not open, under two such steps, or where they were alike to the clock's resolution."""
    since = stable_since(points, window, stable_k)
    steps = steps_of([p for p in points if since <= p.t <= window.start_t])
    found = step_noise([s.samples for s in steps], [s.seconds for s in steps]) if steps else {}
    sd, df = found.get("step_sd_frac"), found.get("step_df")
    return Noise(sd, df) if sd and df else None


def whole_window_noise(points: Sequence[Point], window: Window, case: Noise | None, stable_k: int = 0) -> Noise | None:
    """The step noise a whole window's 95% interval pools (`window_ci_frac`, a trial's figures): the case's pooled
    step noise `case`, unless the window's own steps spread more than `POOL_GATE` times it (a configuration noisier
    than the case's others), joined with that of the steady steps that opened the window (`steady_noise`: the same
    process, so no gate). None where neither is there."""
    own = rate_figures(points, window).get("step_sd_frac") if case is not None else None
    gated = case if case is not None and own is not None and own <= POOL_GATE * case.sd_frac else None
    return joined(gated, steady_noise(points, window, stable_k) if stable_k > 1 else None)


def projected_ci_frac(
    points: Sequence[Point], window: Window, until_t: float, noise: Noise | None = None
) -> float | None:
    """The width of the samples/s interval over `window` (as `window_ci_frac`) that running on to `until_t` would
    leave if its steps went on as they have: as many more as its mean step fits in the time left, spread as the steps
    so far (one step's relative sd, `step_noise`, or the reported rates' spread), with `noise` pooled in as
    `window_ci_frac` pools it. The width falls as t/sqrt(n) does: a window whose spread is a drift, not step
    noise, is projected to stay wide. None under two steps."""
    inside = [p for p in points if window.start_t <= p.t <= window.end_t]
    steps = steps_of(inside)
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


class Rate(NamedTuple):
    """A window's samples/s and its 95% interval, as its figures carry them."""

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
