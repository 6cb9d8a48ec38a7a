"""The memory model: per device, peak memory = a fixed part + a part per unit of the knob, fitted to every stored
trial of one case, profile, trainer code and machine (a fit is a point; a memory failure a lower bound: its rung
needs more than its cap held). Pure: observations in, a `Model` out.

A model that cannot be trusted says why (`Model.unreliable`) instead of a line: too few or too close points, a
step in memory, a failure the line contradicts, or an allocator that takes what the card offers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)  # Student t, 97.5%, df 1..10
MIN_SPAN_FRAC = 0.25  # the knob's values span less than this share of the largest: points too close to extrapolate
STEP_FRAC = 0.10  # a point this far off the line (share of its peak, at 3+ rungs): a step, not a line
FLOOR_FRAC = 0.02  # the least an interval allows (share of the prediction): a line through 2 points has no residual
SCALES_TOL = 0.10  # peaks of one rung that follow their cards' sizes within this share: the allocator takes the card
PREALLOCATE = "XLA_PYTHON_CLIENT_PREALLOCATE"


@dataclass(frozen=True)
class Observation:
    """One trial as the model reads it: its knob value, the cap it ran under and, for a fit, each device's peak
    as that cap sees it (MiB). A failure (`fits` False) carries no peaks: its rung needed more than `cap_mb`."""

    knob: int
    cap_mb: float
    peaks_mb: tuple[float, ...] = ()
    fits: bool = True
    label: str = ""  # where it came from (`<sweep>#<number>`), for the reasons


@dataclass(frozen=True)
class Line:
    """One device's fit: peak MiB = fixed_mb + per_unit_mb * knob, and what its prediction interval needs."""

    device: int
    fixed_mb: float
    per_unit_mb: float
    resid_sd_mb: float  # the residuals' standard deviation (0 with two points)
    n: int
    mean_knob: float
    sxx: float  # the knob's sum of squared deviations

    def predict(self, knob: float) -> float:
        return self.fixed_mb + self.per_unit_mb * knob

    def half_width(self, knob: float) -> float:
        """The 95% prediction interval's half-width at `knob` (Student t on the residuals; `FLOOR_FRAC` of the
        prediction at least, and alone where two points leave no residual)."""
        floor = FLOOR_FRAC * abs(self.predict(knob))
        df = self.n - 2
        if df < 1:
            return floor
        spread = math.sqrt(1 + 1 / self.n + (knob - self.mean_knob) ** 2 / self.sxx)
        return max(floor, t975(df) * self.resid_sd_mb * spread)

    def max_residual(self, points: Sequence[tuple[int, float]]) -> tuple[int, float]:
        """The point furthest off the line: its knob and its residual as a share of its peak."""
        far = max(points, key=lambda p: abs(p[1] - self.predict(p[0])) / max(p[1], 1.0))
        return far[0], abs(far[1] - self.predict(far[0])) / max(far[1], 1.0)


@dataclass(frozen=True)
class Model:
    """Every device's line (empty where none could be fitted), the observations behind it, and why it cannot be
    trusted ("" when it can); `advice`: what would make the memory readable, where known."""

    lines: tuple[Line, ...]
    observations: tuple[Observation, ...]
    unreliable: str = ""
    advice: str = ""
    borrowed: str = ""  # whose line it is where not its own (`similar.from_sibling`), said with each prediction

    def peak(self, knob: float) -> tuple[float, float, int]:
        """The predicted peak at `knob` of the device that holds most there, its interval's half-width, and that
        device."""
        line = max(self.lines, key=lambda ln: ln.predict(knob))
        return line.predict(knob), line.half_width(knob), line.device

    @property
    def bounds(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if not o.fits)


def t975(df: int) -> float:
    """Student t's 97.5% quantile (a table to 10 degrees of freedom, the Cornish-Fisher expansion beyond)."""
    if df <= len(T975):
        return T975[max(df, 1) - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def fit_line(device: int, points: Sequence[tuple[int, float]]) -> Line | None:
    """Least squares over (knob, MiB); None without two distinct knob values."""
    n = len(points)
    if len({x for x, _ in points}) < 2:
        return None
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    fixed = my - slope * mx
    ssr = sum((y - fixed - slope * x) ** 2 for x, y in points)
    sd = math.sqrt(ssr / (n - 2)) if n > 2 else 0.0
    return Line(device, fixed, slope, sd, n, mx, sxx)


def fit(observations: Sequence[Observation], advice: str = "") -> Model:
    """The model of these observations (one case, profile, trainer code and machine, one kind of cap). `advice`:
    the reader's word that the trainer's allocator takes what the card offers, and the setting that stops it (a JAX
    trainer without `XLA_PYTHON_CLIENT_PREALLOCATE=false`): the model is then unreliable, saying so."""
    obs = tuple(observations)
    if advice:
        return Model((), obs, f"the trainer's allocator takes what the card offers: {advice}", advice)
    if why := _takes_the_card(obs):
        return Model((), obs, why)
    fits = [o for o in obs if o.fits and o.peaks_mb]
    knobs = sorted({o.knob for o in fits})
    if len(knobs) < 2:
        return Model((), obs, f"too few points: {len(knobs)} rung(s) measured to fit (2 needed)")
    if knobs[-1] - knobs[0] < MIN_SPAN_FRAC * knobs[-1]:
        return Model((), obs, f"points too close: rungs {knobs[0]}..{knobs[-1]} only, too narrow to extrapolate")
    lines = tuple(ln for d in range(max(len(o.peaks_mb) for o in fits)) if (ln := fit_line(d, _points(fits, d))))
    model = Model(lines, obs)
    return Model(lines, obs, _untrusted(model, fits, len(knobs)))


def _points(fits: Sequence[Observation], device: int) -> list[tuple[int, float]]:
    return [(o.knob, o.peaks_mb[device]) for o in fits if device < len(o.peaks_mb)]


def _untrusted(model: Model, fits: Sequence[Observation], n_knobs: int) -> str:
    """Why a fitted model cannot be trusted: memory falling with the knob, a step, or a failure under the line."""
    for line in model.lines:
        if line.per_unit_mb < 0:
            return f"memory falls as the knob grows on device {line.device}: not a line to extrapolate"
        knob, off = line.max_residual(_points(fits, line.device))
        if n_knobs >= 3 and off > STEP_FRAC:
            return (
                f"a step in memory: {knob} is {off:.0%} off the line on device {line.device} "
                "(a buffer that grows in steps, or not linear in the knob)"
            )
    if (bound := contradicting(model)) is not None:
        peak, half, device = model.peak(bound.knob)
        return (
            f"a failure contradicts the line: {bound.knob} ran out of memory under {bound.cap_mb:.0f} MiB "
            f"({bound.label or 'a trial'}), where the line predicts {peak:.0f} ± {half:.0f} MiB on device {device}"
        )
    return ""


def contradicting(model: Model) -> Observation | None:
    """A memory failure the model's lines say would have fitted: predicted, interval included, under its cap."""
    for bound in model.bounds:
        peak, half, _ = model.peak(bound.knob)
        if peak + half < bound.cap_mb:
            return bound
    return None


def _takes_the_card(obs: Sequence[Observation]) -> str:
    """Two fits of one rung on different cards whose peaks follow the cards' sizes: an allocator that reserves what
    it finds (torch's caching allocator on a bigger card, JAX's preallocation), not what the rung needs."""
    fits = [o for o in obs if o.fits and o.peaks_mb]
    for a in fits:
        for b in fits:
            if a.knob != b.knob or b.cap_mb <= a.cap_mb * (1 + SCALES_TOL):
                continue
            card_ratio, peak_ratio = b.cap_mb / a.cap_mb, max(b.peaks_mb) / max(max(a.peaks_mb), 1.0)
            if peak_ratio > 1 + SCALES_TOL and abs(peak_ratio / card_ratio - 1) <= SCALES_TOL:
                return (
                    f"the trainer's allocator takes what the card offers: {a.knob} used {max(a.peaks_mb):.0f} of "
                    f"{a.cap_mb:.0f} MiB and {max(b.peaks_mb):.0f} of {b.cap_mb:.0f} MiB"
                )
    return ""
