"""Step noise: how far one window step's samples/s spreads around its window's rate (`step_noise`), and a case's
step noise pooled over its trials' windows (`Noise`, `pooled_noise`), on which a cut and a window's interval judge
a trial of a few steps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from ladder.core.measure.tdist import t_quantile

# A cut looks again at every step: each look at the one-sided 0.5% quantile, not 2.5%
CUT_Z = 2.575829
# The case's pool counts from MIN_POOLED_DF degrees of freedom on (t's exact quantile makes two enough), and weighs
# at most POOL_WEIGHT_DF against a trial's own steps, so that a trial noisier than the case's others still widens
# its own interval (`python scripts/sim_cut.py` measures both)
MIN_POOLED_DF = 2.0
POOL_WEIGHT_DF = 6.0


def residual_sd(ys: Sequence[float], xs: Sequence[float], rate: float) -> float:
    """The ratio estimator's residual sd: how far each step's samples lie from `rate` times its seconds."""
    return math.sqrt(sum((y - rate * x) ** 2 for x, y in zip(xs, ys, strict=True)) / (len(xs) - 1))


def step_noise(ys: Sequence[float], xs: Sequence[float]) -> dict[str, float]:
    """One window step's relative spread around the window's rate (`step_sd_frac`: the ratio estimator's residual
    sd over a mean step's samples) and its degrees of freedom (`step_df`, steps less one); {} under two steps."""
    n, rate = len(xs), sum(ys) / sum(xs)
    if n < 2 or rate <= 0:
        return {}
    return {"step_sd_frac": round(residual_sd(ys, xs, rate) / (rate * statistics.fmean(xs)), 5), "step_df": n - 1.0}


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


def joined(*noises: Noise | None) -> Noise | None:
    """Step noises pooled by their degrees of freedom (None where none is given)."""
    known = [n for n in noises if n is not None]
    df = sum(n.df for n in known)
    return Noise(math.sqrt(sum(n.df * n.sd_frac**2 for n in known) / df), df) if df > 0 else None


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
