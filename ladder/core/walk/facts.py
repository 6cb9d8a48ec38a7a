"""What a profile's attempts prove: its ceiling (the lowest failure that counts), its floor (the largest fit), the
rungs left between them, and whether it is broken or asks for a retry. Pure functions of the attempts."""

from __future__ import annotations

from collections.abc import Sequence

from ladder.core.records import Status
from ladder.core.walk.attempt import Attempt

MAX_RETRIES = 3  # launches of one rung that fail for reasons unrelated to it (port in use) before giving up

STEP_DOWN = frozenset({Status.OOM_OR_NCCL, Status.TIMEOUT})
# A rung that ran survives for memory reasoning (floor, memory line); only `ok` carries figures (values, descent)
FITS = frozenset({Status.OK, Status.UNMEASURED})
# `diverged` fits (its memory point stands) but is no answer: the walk goes on below it, as below a failure
WALK_DOWN = STEP_DOWN | {Status.DIVERGED}


def mine(profile: str, attempts: Sequence[Attempt]) -> list[Attempt]:
    """One profile's attempts that count (an interrupted trial is as if never run)."""
    return [a for a in attempts if a.profile == profile and a.status is not Status.INTERRUPTED]


def broken(mine: list[Attempt]) -> int | None:
    """The rung of an `error`, or of a rung retried `MAX_RETRIES` times: the profile stops there."""
    errors = [a.rung for a in mine if a.status is Status.ERROR]
    retried = {a.rung for a in mine if a.status is Status.RETRY}
    exhausted = [r for r in retried if sum(1 for a in mine if a.rung == r and a.status is Status.RETRY) >= MAX_RETRIES]
    bad = errors + exhausted
    return bad[0] if bad else None


def counted(mine: list[Attempt]) -> list[Attempt]:
    """The step-down failures the walk counts (one on weak evidence only once its rung failed twice)."""
    return [a for a in mine if a.status in STEP_DOWN and (a.confirmed or failed_twice(a.rung, mine))]


def retry(mine: list[Attempt]) -> Attempt | None:
    """A rung whose last launch asked to be retried, and nothing conclusive since."""
    last = mine[-1] if mine else None
    return last if last is not None and last.status is Status.RETRY else None


def ceiling(mine: list[Attempt]) -> int | None:
    """The lowest rung whose failure (or divergence) counts: every rung above it is ruled out."""
    fails = [a.rung for a in mine if a.status in WALK_DOWN and (a.confirmed or failed_twice(a.rung, mine))]
    return min(fails) if fails else None


def failed_twice(rung: int, mine: list[Attempt]) -> bool:
    return sum(1 for a in mine if a.rung == rung and a.status in STEP_DOWN) >= 2


def to_confirm(mine: list[Attempt]) -> int | None:
    """A rung whose only launch failed on weak evidence, still open: it runs once more before the walk steps down
    (a second failure, weak or not, settles it; a fit settles it the other way)."""
    low, high = floor(mine), ceiling(mine)
    open_rung = [
        r
        for r in (a.rung for a in mine if a.status in STEP_DOWN and not a.confirmed)
        if sum(1 for b in mine if b.rung == r) == 1 and (high is None or r < high) and (low is None or r > low)
    ]
    return open_rung[0] if open_rung else None


def floor(mine: list[Attempt]) -> int | None:
    """The largest rung below the ceiling that ran: every rung below it fits."""
    high = ceiling(mine)
    fits = [a.rung for a in mine if a.status in FITS and (high is None or a.rung < high)]
    return max(fits) if fits else None


def ran(mine: list[Attempt]) -> bool:
    """Some rung of the profile ran (fitted or diverged): a seed stands only before one did (a failure copied from an
    earlier sweep, reused or carried from a larger card, leaves it standing)."""
    return any(a.status in FITS or a.status is Status.DIVERGED for a in mine)


def left(rungs: Sequence[int], mine: list[Attempt]) -> list[int]:
    """Rungs not yet settled, highest first: above the floor and below the ceiling."""
    low, high = floor(mine), ceiling(mine)
    return [r for r in rungs if (low is None or r > low) and (high is None or r < high)]


def points(mine: list[Attempt]) -> list[tuple[int, float]]:
    """The measured memory points (num_envs, memory fraction) of every rung that fitted (diverged ones too)."""
    return [(a.rung, a.mem_frac) for a in mine if a.status in FITS | {Status.DIVERGED} and a.mem_frac is not None]


def case_best(attempts: Sequence[Attempt]) -> float | None:
    """The best value any profile of the case measured (None before any)."""
    values = [a.value for a in attempts if a.status is Status.OK and a.value is not None]
    return max(values) if values else None


def measured(mine: list[Attempt]) -> list[Attempt]:
    """The profile's measured rungs below its ceiling, highest first."""
    high = ceiling(mine)
    return sorted(
        (a for a in mine if a.status is Status.OK and a.value is not None and (high is None or a.rung < high)),
        key=lambda a: -a.rung,
    )


def best_of(measured: list[Attempt]) -> Attempt:
    """Down the measured rungs (highest first), the best: a lower rung takes over only by beating it (`beats`)."""
    best = measured[0]
    for attempt in measured[1:]:
        best = attempt if beats(attempt, best) else best
    return best


def beats(lower: Attempt, higher: Attempt) -> bool:
    return lower.value is not None and lower.value > upper(higher)


def upper(attempt: Attempt) -> float:
    """The top of an attempt's tie band (its value where it has none; -inf where it has no value)."""
    value = attempt.value if attempt.value is not None else float("-inf")
    return attempt.value_hi if attempt.value_hi is not None and attempt.value_hi >= value else value
