"""The ladder walk: which (profile, rung) to try next, from the trials so far. Pure.

Per profile, from the top rung down: `ok` ends the walk at that rung (the largest stable one); `oom_or_nccl`
and `timeout` step down one rung; `error` stops the profile (a broken config never steps down); `retry`
(port in use) runs the same rung again, a bounded number of times; `interrupted` is as if never run.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from ladder.records import Status

MAX_RETRIES = 3  # launches of one rung that fail for reasons unrelated to it (port in use) before giving up

STEP_DOWN = frozenset({Status.OOM_OR_NCCL, Status.TIMEOUT})


class Outcome(str, enum.Enum):
    PENDING = "pending"  # a rung is still to be tried
    FOUND = "found"  # the largest stable rung is known
    ERROR = "error"  # stopped on a broken config
    EXHAUSTED = "exhausted"  # no rung fits


@dataclass(frozen=True)
class Attempt:
    """One finished trial, as the walk sees it."""

    profile: str
    rung: int
    status: Status


@dataclass(frozen=True)
class Walk:
    """Where one profile's walk stands."""

    profile: str
    outcome: Outcome
    rung: int | None  # the next rung (pending), the stable one (found), the failing one (error)


def walk(rungs: Sequence[int], profile: str, attempts: Sequence[Attempt]) -> Walk:
    """The state of one profile's walk down `rungs` given its attempts (any order)."""
    mine = [a for a in attempts if a.profile == profile and a.status is not Status.INTERRUPTED]
    for rung in rungs:
        statuses = [a.status for a in mine if a.rung == rung]
        step = _rung_step(statuses)
        if step is None:
            return Walk(profile, Outcome.PENDING, rung)
        if step is not Outcome.PENDING:
            return Walk(profile, step, rung)
    return Walk(profile, Outcome.EXHAUSTED, None)


def next_trial(rungs: Sequence[int], profiles: Sequence[str], attempts: Sequence[Attempt]) -> tuple[str, int] | None:
    """The next (profile, rung) to launch, profiles in order; None when every walk has ended."""
    for profile in profiles:
        state = walk(rungs, profile, attempts)
        if state.outcome is Outcome.PENDING and state.rung is not None:
            return profile, state.rung
    return None


def _rung_step(statuses: list[Status]) -> Outcome | None:
    """What one rung's attempts say: None = run it (again); PENDING = step down; else the walk's end."""
    if Status.OK in statuses:
        return Outcome.FOUND
    if Status.ERROR in statuses:
        return Outcome.ERROR
    if any(s in STEP_DOWN for s in statuses):
        return Outcome.PENDING
    if statuses.count(Status.RETRY) >= MAX_RETRIES:
        return Outcome.ERROR
    return None
