"""What the walk knows of one finished trial (`Attempt`), and a case's records read as such (`attempts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ladder.core import pick
from ladder.core.records import Phase, Reason, Status, TrialRecord


@dataclass(frozen=True)
class Attempt:
    """One finished trial, as the walk sees it."""

    profile: str
    rung: int
    status: Status
    mem_frac: float | None = None  # peak memory / the card's memory, where it ran
    value: float | None = None  # the objective it measured (ok only)
    value_hi: float | None = None  # the top of its tie band (`pick.reach`): its interval's, or the run-to-run noise's
    confirmed: bool = True  # False: a step-down failure on weak evidence (a low-confidence verdict, see README)
    util: float | None = None  # the busiest GPU's mean util (%) in its window (NVML; None where no GPU measured it)
    repeats: int = 1  # how many windows its value is the median of (`pick.median_repeats`)
    reason: Reason = Reason.NONE  # the finer cause of a failure: a step-down whose evidence names no memory may not
    # depend on num_envs at all (`bottom`)
    wide: int = 0  # how many of its windows ran whole and were still wide (`pick.window_wide`): they count only where
    # all did; one such window that a lower rung beats is measured again first (`descent.doubted`)


def attempts(records: Sequence[TrialRecord], objective: str) -> list[Attempt]:
    """What the walk knows: every probe, and every confirmation that failed (its rung then fails for the walk),
    repeats as their median. A value's top (`Attempt.value_hi`) is the top of its tie band, as the pick judges it."""
    return [
        _attempt(r, objective)
        for r in pick.median_repeats(records, objective)
        if r.phase is Phase.PROBE or (r.phase is Phase.CONFIRM and r.status is not Status.OK)
    ]


def _attempt(r: TrialRecord, objective: str) -> Attempt:
    value, hi, noise = pick.objective_value(r, objective), r.figures.get(f"{objective}_hi"), pick.noise_of(objective)
    top = pick.reach(value, hi, noise) if value is not None and noise else hi
    repeats = int(r.figures.get("repeats", 1))
    wide = (
        int(r.figures[pick.WIDE_WINDOWS])
        if pick.WIDE_WINDOWS in r.figures
        else int(repeats == 1 and pick.window_wide(r))
    )
    return Attempt(
        r.profile,
        r.num_envs,
        r.status,
        pick.mem_frac(r),
        value,
        top,
        not pick.weak(r),
        pick.gpu_util(r),
        repeats,
        r.reason,
        wide,
    )
