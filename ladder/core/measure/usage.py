"""A trial's figures: its devices' usage (util per second as nvidia-smi dmon counts it, over the window; memory peaks
over the whole trial; the trial's own GPU memory, SM util, host CPU and RSS), with its rate's figures over the window
(`rates.rate_figures`) and its GPUs' energy (`energy.energy_figures`); and whether a silent trainer still visibly
works (`busy`).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from ladder.core.figkeys import AVG_SM_UTIL, AVG_UTIL, MAX_MEM, key
from ladder.core.measure.energy import energy_figures
from ladder.core.measure.noise import Noise
from ladder.core.measure.rates import rate_figures
from ladder.core.measure.tdist import t975
from ladder.core.measure.window import Window
from ladder.core.records import Point, Sample, Source

ACTIVE_UTIL = 5.0  # a second counts as active when the mean util over devices exceeds this percent
BIN_S = 1.0  # util per second first: p50, active and idle seconds are over seconds


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
        out.update(rate_figures(points, window, noise, z))
        out["window_start_s"] = round(window.start_t - launch_t, 2)
        out["gated"] = 1.0 if window.gated else 0.0
        if source == Source.NVML:  # the joules over the span its rate was measured on: samples per joule
            out.update(energy_figures(inside, out.get("window_s", window.end_t - window.start_t), out))
    return out


def util_summary(samples: Sequence[Sample]) -> dict[str, float]:
    """The util figures of a series as it is (the scripts' window summaries)."""
    return _util_figures(samples)


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
    """The uncertainty of `min_avg_util`: the half-width of the 95% interval (Student t) of the mean util of the
    device whose mean is lowest, from that device's per-second means (seconds are not independent under a steady
    load, so this is a floor on the uncertainty, not a bound); None under two seconds of samples."""
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
