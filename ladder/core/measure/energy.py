"""A window's energy: the joules its GPUs used, from NVML's energy counter (its rise between the window's first and
last readings) or, on a GPU without one, its power readings integrated (trapezoids, however unevenly spaced); their
mean power, and samples per joule (the window's samples over all its GPUs' joules). Pure: samples in, figures out.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ladder.core.figkeys import AVG_POWER_W, ENERGY_J, key
from ladder.core.records import Sample

MJ_PER_J = 1000.0


class Power(NamedTuple):
    """One GPU's mean power over a span of its readings, and where it came from."""

    watts: float
    counter: bool  # True: the energy counter's rise; False: power readings integrated


def counter_power(readings: Sequence[tuple[float, float]]) -> float | None:
    """Mean W from (t, mJ) counter readings in time order: the rise over the time between the first and the last;
    None under two readings, over no time, or where the counter went back (its driver was reloaded)."""
    if len(readings) < 2 or (span := readings[-1][0] - readings[0][0]) <= 0:
        return None
    rise = readings[-1][1] - readings[0][1]
    return rise / MJ_PER_J / span if rise >= 0 else None


def integrated_power(readings: Sequence[tuple[float, float]]) -> float | None:
    """Mean W from (t, W) power readings in time order: the trapezoids' joules over the time they span (a reading
    counts for as long as it stood, so uneven spacing weighs each one by its own gaps); None under two or no time."""
    if len(readings) < 2 or (span := readings[-1][0] - readings[0][0]) <= 0:
        return None
    joules = sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in itertools.pairwise(readings))
    return joules / span


def gpu_power(samples: Sequence[Sample]) -> Power | None:
    """One GPU's mean power over its samples: the counter where it was read twice, else its power readings."""
    ordered = sorted(samples, key=lambda s: s.t)
    counted = counter_power([(s.t, s.energy_mj) for s in ordered if s.energy_mj is not None])
    if counted is not None:
        return Power(counted, counter=True)
    drawn = integrated_power([(s.t, s.power_w) for s in ordered if s.power_w is not None])
    return Power(drawn, counter=False) if drawn is not None else None


def energy_figures(inside: Sequence[Sample], window_s: float, rate: Mapping[str, float]) -> dict[str, float]:
    """The window's energy figures from its GPUs' samples (`inside` it): per GPU `avg_power_wN` and `energy_jN`
    (that power over `window_s`, the span its rate was measured over), their sums `avg_power_w` and `energy_j`,
    `energy_counter` (1: every GPU's counter; 0: power integrated on one at least) and, with a rate, samples per
    joule with its interval (samples/s's over the power: the power's own noise is not in it). {} where no GPU
    gave an energy figure."""
    by_gpu = {i: p for i in sorted({s.index for s in inside}) if (p := gpu_power([s for s in inside if s.index == i]))}
    if not by_gpu:
        return {}
    watts = sum(p.watts for p in by_gpu.values())
    out = {key(AVG_POWER_W, i): round(p.watts, 2) for i, p in by_gpu.items()}
    out |= {key(ENERGY_J, i): round(p.watts * window_s, 2) for i, p in by_gpu.items()}
    out |= {AVG_POWER_W: round(watts, 2), ENERGY_J: round(watts * window_s, 2)}
    out["energy_counter"] = 1.0 if all(p.counter for p in by_gpu.values()) else 0.0
    return out | per_joule(rate, watts)


def per_joule(rate: Mapping[str, float], watts: float) -> dict[str, float]:
    """`samples_per_joule` and its `_lo`/`_hi`: samples/s and its interval over the GPUs' mean power in W
    (= the window's samples over its joules); {} without a rate or without power."""
    if "samples_per_s" not in rate or watts <= 0:
        return {}
    out = {"samples_per_joule": _sig(rate["samples_per_s"] / watts)}
    for end in ("lo", "hi"):
        if (value := rate.get(f"samples_per_s_{end}")) is not None:
            out[f"samples_per_joule_{end}"] = _sig(value / watts)
    return out


def _sig(value: float) -> float:
    """Four significant figures: samples per joule runs from thousandths (a large model) to thousands (the proxy)."""
    return float(f"{value:.4g}")  # an unbounded end stays inf
