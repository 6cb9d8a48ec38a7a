"""Per-card answers from a memory model: for each card size, the largest rung predicted to fit with the headroom,
its predicted peak and interval, and the basis of the answer (`Basis`). Pure: a model and a ladder in, answers out;
`rows` and `console_lines` are how `cards.tsv` and the sweep's end show them.

A rung fits a card when the device that holds most is predicted at or under `1 - headroom` of it (the walk's
`mem_headroom_frac`), and no trial of that rung ran out of memory under a card as large or larger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ladder.core.memory.model import Model, Observation, fit
from ladder.core.records import Word

SAME_CARD_FRAC = 0.03  # a trial's cap within this share of a card's size ran on that card (80 GB reads 79.6 GiB)
COLUMNS = (
    "case",
    "profile",
    "card_gb",
    "num_envs",
    "basis",
    "peak_mb",
    "peak_lo_mb",
    "peak_hi_mb",
    "card_mb",
    "device",
    "reason",
)


class Basis(Word):
    """What a card's answer stands on."""

    MEASURED = "measured"  # a trial on this card settled it
    PREDICTED = "predicted"  # the model, from trials on other cards
    VERIFIED = "verified"  # measured on this card, and the model without those trials predicted the same rung
    BEYOND = "beyond the ladder"  # even the top rung fits, or even the bottom one does not
    UNRELIABLE = "unreliable"  # the model cannot be trusted: `Answer.reason` says why


@dataclass(frozen=True)
class Answer:
    """One card's answer: the largest rung to fit (None where none does or none can be said), the predicted peak
    there and its 95% interval (MiB, on the device that holds most), the basis and a one-line reason."""

    card_gb: float
    rung: int | None
    basis: Basis
    reason: str
    peak_mb: float | None = None
    half_mb: float | None = None
    device: int | None = None

    @property
    def card_mb(self) -> float:
        return card_mb(self.card_gb)


def card_mb(card_gb: float) -> float:
    """A card's size in MiB, as the project counts an emulated card (`emulate_gpu_mem_gb` * 1024)."""
    return card_gb * 1024


def on_card(obs: Observation, gb: float) -> bool:
    return abs(obs.cap_mb - card_mb(gb)) <= SAME_CARD_FRAC * card_mb(gb)


def answer(model: Model, rungs: Sequence[int], gb: float, headroom: float) -> Answer:
    """The card's answer: measured (or verified) where trials on this card settle its largest fit, else the
    model's prediction (or why there is none)."""
    if (settled := _measured(model.observations, gb, rungs)) is not None:
        others = [o for o in model.observations if not on_card(o, gb)]
        blind = predict(fit(others, model.advice), rungs, gb, headroom) if others else None
        agreed = blind is not None and blind.basis in (Basis.PREDICTED, Basis.BEYOND) and blind.rung == settled
        why = _settled_why(settled, rungs)
        basis, why = (Basis.VERIFIED, f"{why}, as the other cards predicted") if agreed else (Basis.MEASURED, why)
        if model.unreliable or not model.lines:
            return Answer(gb, settled, basis, why)
        return Answer(gb, settled, basis, why, *model.peak(settled))
    return predict(model, rungs, gb, headroom)


def predict(model: Model, rungs: Sequence[int], gb: float, headroom: float) -> Answer:
    """The model's answer for a card, from the line and the failures (never from a trial on the card itself
    being taken as settled: that is `answer`)."""
    if model.unreliable:
        return Answer(gb, None, Basis.UNRELIABLE, model.unreliable)
    limit = (1.0 - headroom) * card_mb(gb)
    ladder = sorted(rungs, reverse=True)
    fitting = [r for r in ladder if model.peak(r)[0] <= limit and not _failed(model, r, gb)]
    if not fitting:
        peak, half, device = model.peak(ladder[-1])
        why = f"even the bottom rung does not fit: {ladder[-1]} predicted at {peak:.0f} MiB of {limit:.0f} allowed"
        return Answer(gb, None, Basis.BEYOND, why, peak, half, device)
    rung = fitting[0]
    peak, half, device = model.peak(rung)
    if rung == ladder[0]:
        why = f"even the top rung fits: {rung} predicted at {peak:.0f} MiB of {limit:.0f} allowed"
        return Answer(gb, rung, Basis.BEYOND, why, peak, half, device)
    above = ladder[ladder.index(rung) - 1]
    over = model.peak(above)[0]
    why = f"{rung} predicted at {peak:.0f} ± {half:.0f} MiB of {limit:.0f} allowed; {above} at {over:.0f}"
    if peak + half > limit:
        why += f" (the interval reaches past the headroom: {rung} may be one rung too high)"
    if over - model.peak(above)[1] <= limit:
        why += f" (the interval reaches under the headroom: {above} may fit too)"
    if model.borrowed:
        why += f"; {model.borrowed}"
    return Answer(gb, rung, Basis.PREDICTED, why, peak, half, device)


def answers(model: Model, rungs: Sequence[int], cards_gb: Sequence[float], headroom: float) -> list[Answer]:
    return [answer(model, rungs, gb, headroom) for gb in cards_gb]


def _failed(model: Model, rung: int, gb: float) -> bool:
    """A trial of `rung`, or of a rung below it, ran out of memory under a card at least this large: it cannot fit
    this one."""
    return any(b.knob <= rung and b.cap_mb >= card_mb(gb) * (1 - SAME_CARD_FRAC) for b in model.bounds)


def _measured(obs: Sequence[Observation], gb: float, rungs: Sequence[int]) -> int | None:
    """The largest fit the trials settle on one card: a rung that fitted on it, with the rung above it out of
    memory on it or on a larger card (or it the top rung); None where they settle nothing."""
    ladder = sorted(rungs, reverse=True)
    failed = {o.knob for o in obs if not o.fits and o.cap_mb >= card_mb(gb) * (1 - SAME_CARD_FRAC)}
    fitted = sorted({o.knob for o in obs if o.fits and on_card(o, gb) and o.knob not in failed}, reverse=True)
    for rung in fitted:
        if rung not in ladder:
            continue
        i = ladder.index(rung)
        if i == 0 or ladder[i - 1] in failed:
            return rung
    return None


def _settled_why(rung: int, rungs: Sequence[int]) -> str:
    ladder = sorted(rungs, reverse=True)
    i = ladder.index(rung)
    return "the top rung fitted on this card" if i == 0 else f"{rung} fitted on this card and {ladder[i - 1]} did not"


def rows(case: str, profile: str, found: Sequence[Answer], knob: str = "num_envs") -> list[dict[str, str]]:
    """`cards.tsv`'s rows (columns `COLUMNS`; `num_envs` holds the knob's value, as in best_by_case.tsv)."""
    return [_row(case, profile, a) | ({"knob": knob} if knob != "num_envs" else {}) for a in found]


def _row(case: str, profile: str, a: Answer) -> dict[str, str]:
    def mb(v: float | None) -> str:
        return f"{v:.0f}" if v is not None else ""

    lo = a.peak_mb - a.half_mb if a.peak_mb is not None and a.half_mb is not None else None
    hi = a.peak_mb + a.half_mb if a.peak_mb is not None and a.half_mb is not None else None
    return {
        "case": case,
        "profile": profile,
        "card_gb": f"{a.card_gb:g}",
        "num_envs": str(a.rung) if a.rung is not None else "",
        "basis": str(a.basis),
        "peak_mb": mb(a.peak_mb),
        "peak_lo_mb": mb(lo),
        "peak_hi_mb": mb(hi),
        "card_mb": mb(a.card_mb),
        "device": str(a.device) if a.device is not None else "",
        "reason": a.reason,
    }


def console_lines(case: str, profile: str, found: Sequence[Answer]) -> list[str]:
    """The sweep's end: one line per card."""
    return [_line(case, profile, a) for a in found]


def _line(case: str, profile: str, a: Answer) -> str:
    rung = f"e{a.rung}" if a.rung is not None else "-"
    peak = f"  peak {a.peak_mb:.0f} ± {a.half_mb or 0:.0f} MiB" if a.peak_mb is not None else ""
    return f"{case:<14} {profile:<8} {a.card_gb:>5g} GB  {rung:<6} {a.basis!s:<17}{peak}  ({a.reason})"
