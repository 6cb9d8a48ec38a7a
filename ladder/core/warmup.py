"""What a trial's first steps say of its window, before the window opens (the early cut). Pure.

The case's trials that measured a whole window say how each of their first `EARLY_K` steps compared with it
(`gains`); a step whose gain stayed within the step noise is settled (`Warmup.settled`), and a new trial's settled
first steps predict its window (`Warmup.predict`), so a clear loser is cut before its warm-up ends. Steps still
warming up never enter; a step faster than the window enters only as a bound (`Warmup.slowing`). docs/searching.md
("Stopping a trial that cannot win") has the rule and its reasons; `scripts/sim_cut.py --early` prices it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from ladder.core.measure.noise import CUT_Z, Noise
from ladder.core.measure.steps import Step, timed_steps
from ladder.core.measure.tdist import Z95, t_quantile
from ladder.core.records import Point

EARLY_K = 4  # the first steps whose gains a whole window records (and the most a prediction uses)
GAIN = "early_gain_"  # figure prefix: early_gain_1 .. early_gain_<EARLY_K>
EARLY_STEPS = "early_steps"  # figure: the cut was decided on this many settled first steps (`Prediction.steps`)
# A step is settled once its mean log gain lies within this many standard errors of 0 (a steady step's gain is 1
# but for noise) and, where the gains' own spread is measured (`MIN_SPREAD_TRIALS` whole windows and more), within
# MAX_SETTLED of it whatever that spread: a step 10% slow in every window is still warming up, though its warm-up
# differ from rung to rung. Under that many, a gain is judged against the step noise alone: one window cannot tell a
# step 13% slow by chance on a noisy machine from a warming one (`python scripts/sim_cut.py --early --cv 0.13`).
SETTLED_Z = Z95
MAX_SETTLED = 0.10
MIN_SPREAD_TRIALS = 3  # whole windows from which the gains' own spread is estimated (`Gain.sd`)
MIN_STEPS = 2  # a prediction rests on this many settled steps at least, which agree with each other (`agree`)


class Gain(NamedTuple):
    """One first step's gain over the case's whole windows: the mean and sd (None under `MIN_SPREAD_TRIALS`) of its
    logarithm."""

    mean: float
    sd: float | None
    n: int


class Prediction(NamedTuple):
    """A trial's window samples/s as its settled first steps predict it, with its one-sided `CUT_Z` interval."""

    value: float
    lo: float
    hi: float
    steps: int  # the settled first steps it rests on
    start_t: float  # where the first of them began

    def reach(self, band: float, window_steps: float, noise: Noise) -> float:
        """How high the window could take it in a tie (as `bounds.final_upper`): the prediction's top, or the top
        of the interval the whole window would end with (its half-width at the case's step noise over
        `window_steps`) less the run-to-run `band`, whichever is higher."""
        wide = self.value * Z95 * noise.sd_frac / math.sqrt(max(1.0, window_steps))
        return max(self.hi, (self.hi + wide) / (1.0 + band))

    def figures(self) -> dict[str, float]:
        return {
            "samples_per_s": round(self.value, 2),
            "samples_per_s_lo": round(self.lo, 2),
            "samples_per_s_hi": round(self.hi, 2),
            EARLY_STEPS: float(self.steps),
        }


def steps(points: Sequence[Point], first: bool) -> list[tuple[Step, float]]:
    """The trial's first steps (at most `EARLY_K`), each with the time it began: the first point's own step time
    where `first` (it is the trial's first point, not the first after a pause) and the trainer reports one, then the
    intervals between points."""
    out: list[tuple[Step, float]] = []
    head = points[0] if points else None
    if first and head is not None and head.step_time_s and head.step_time_s > 0 and head.iter >= 1:
        out.append((Step(head.step_time_s, 1, head.samples / head.iter), head.t - head.step_time_s))
    out.extend(timed_steps(points[: EARLY_K + 1]))
    return out[:EARLY_K]


def gains(points: Sequence[Point], first: bool, window_rate: float) -> dict[str, float]:
    """The window's samples/s over each first step's (`early_gain_<j>`), for a window measured whole."""
    out = {}
    for j, (step, _) in enumerate(steps(points, first), 1):
        if step.samples > 0 and step.seconds > 0 and window_rate > 0:
            out[f"{GAIN}{j}"] = round(window_rate / (step.samples / step.seconds), 4)
    return out


class Warmup(NamedTuple):
    """The case's first-step gains (`Gain` per step, None where no whole window recorded it) and its step noise."""

    gains: tuple[Gain | None, ...]
    noise: Noise

    def spread(self, j: int) -> float:
        """One trial's log gain at step `j`: its sd, the step noise or, over three trials and more, their own
        spread where that is wider (steps that differ from rung to rung)."""
        return max(self.noise.sd_frac, self._gain(j).sd or 0.0)

    def settled(self, j: int) -> bool:
        gain = self._found(j)
        if gain is None:
            return False
        bound = SETTLED_Z * self.spread(j) / math.sqrt(gain.n)
        return abs(gain.mean) <= (min(MAX_SETTLED, bound) if gain.sd is not None else bound)

    def slowing(self, j: int) -> bool:
        """Step `j` ran faster than the case's windows, beyond what `settled` allows: the trainer slowed after it."""
        gain = self._found(j)
        return gain is not None and gain.mean < 0 and not self.settled(j)

    def log_gain(self, j: int) -> float | None:
        """What step `j`'s rate is multiplied by (its log) to predict the window: the mean gain of a settled step, 1
        for a `slowing` one (a bound: the window no faster than the step), None for a step still warming up."""
        if self.settled(j):
            return self._gain(j).mean
        return 0.0 if self.slowing(j) else None

    def predict(self, first: Sequence[tuple[Step, float]]) -> Prediction | None:
        """The window predicted from the settled and `slowing` steps among `first`: None under `MIN_STEPS` of them,
        or where they disagree (`agree`: a later one faster than an earlier one): then this trial may still be warming
        up where the case's others no longer were (a compile cache they found and it did not), and its own steps must
        say so before any prediction."""
        chosen = [
            (j, step, t, g)
            for j, (step, t) in enumerate(first, 1)
            if step.seconds > 0 and (g := self.log_gain(j)) is not None
        ]
        samples, seconds = sum(c[1].samples for c in chosen), sum(c[1].seconds for c in chosen)
        if len(chosen) < MIN_STEPS or samples <= 0 or not self.agree([c[1] for c in chosen]):
            return None
        rate, k = samples / seconds, len(chosen)
        mean = sum(s.seconds * g for _, s, _, g in chosen) / seconds
        trials = min(self._gain(j).n for j, *_ in chosen)
        noise, between = self.noise.sd_frac, max(self.spread(j) for j, *_ in chosen)
        # the steps' own noise averages over k of them; what a step's gain differs by from trial to trial does not
        var = (noise**2 / k + max(0.0, between**2 - noise**2)) * (1.0 + 1.0 / trials)
        half = t_quantile(self.noise.df, CUT_Z) * math.sqrt(var)
        value = rate * math.exp(mean)
        return Prediction(value, value * math.exp(-half), value * math.exp(half), k, min(c[2] for c in chosen))

    def agree(self, chosen: Sequence[Step]) -> bool:
        """No later one of a trial's own first steps (`chosen`, in the order they ran) is faster than an earlier one
        beyond the step noise (two steps' difference, at `SETTLED_Z`): an earlier step still slowed by warming up is
        not counted as a steady one. A later step slower than an earlier one is no warm-up: it only lowers the
        prediction towards a trainer that slows (`slowing`), whose window is slower still."""
        rates = [s.samples / s.seconds for s in chosen]
        if min(rates) <= 0:
            return False
        gain = max((math.log(later / rates[i]) for i in range(len(rates)) for later in rates[i + 1 :]), default=0.0)
        return gain <= SETTLED_Z * self.noise.sd_frac * math.sqrt(2.0)

    def _found(self, j: int) -> Gain | None:
        """Step `j`'s gain, None where no whole window recorded it (or it is past `EARLY_K`)."""
        return self.gains[j - 1] if j <= len(self.gains) else None

    def _gain(self, j: int) -> Gain:
        gain = self._found(j)
        assert gain is not None
        return gain


def pooled(figures: Iterable[Mapping[str, float]], noise: Noise | None) -> Warmup | None:
    """The case's first-step gains over the whole windows among `figures` (None without the step noise or any)."""
    if noise is None:
        return None
    logs: list[list[float]] = [[] for _ in range(EARLY_K)]
    for f in figures:
        for j in range(EARLY_K):
            g = f.get(f"{GAIN}{j + 1}")
            if g is not None and g > 0 and math.isfinite(g):
                logs[j].append(math.log(g))
    found = tuple(
        Gain(statistics.fmean(v), statistics.stdev(v) if len(v) >= MIN_SPREAD_TRIALS else None, len(v)) if v else None
        for v in logs
    )
    return Warmup(found, noise) if any(found) else None
