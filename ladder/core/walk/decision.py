"""What the walk answers: the next launch (`Decision`, of a kind `Step`), and where a profile's walk stands
(`Standing`, ended in an `Outcome`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from ladder.core.records import Word


class Outcome(str, enum.Enum):
    PENDING = "pending"  # a rung is still to be tried
    FOUND = "found"  # the largest stable rung is known and measured
    ERROR = "error"  # stopped on a broken config
    EXHAUSTED = "exhausted"  # no rung fits
    DIVERGED = "diverged"  # rungs fit, but each that fits trained to NaN or inf
    UNRELATED = "not num_envs"  # it failed at the lowest rung as above it, with no memory evidence: fix, not step down


class Step(Word):
    """What kind of launch a decision is, recorded with its trial (`step` in its info; the values are recorded)."""

    BETWEEN = "walk"  # a rung left between the largest fit and the lowest failure
    DESCENT = "descent"  # below the largest fit: measured while fewer envs do better (the insurance)
    RETRY = "retry"  # the same rung again: its launch failed for a reason unrelated to it
    AGAIN = "again"  # the same rung once more: its failure was weak evidence
    RECHECK = "recheck"  # the pick once more: its figure was unstable (a second window before it counts)
    CONFIRM = "confirm"  # the pick, run for confirm_s
    PLACEMENT = "placement"  # the pick's profile as one-device jobs side by side (`placement=measure`)
    BOTTOM = "bottom"  # the lowest rung, after failures that named no memory: does num_envs matter at all?


@dataclass(frozen=True)
class Decision:
    profile: str
    rung: int
    why: str
    beat: float | None = None  # what it must reach to become the case's pick (stop it once it clearly cannot)
    short: bool = False  # insurance no measured pair says may pay: a short probe, not a window (`descent.insured`)
    step: Step = Step.BETWEEN  # what kind of launch it is (recorded with the trial)


@dataclass(frozen=True)
class Standing:
    """Where one profile's walk stands."""

    profile: str
    outcome: Outcome
    rung: int | None  # the next rung (pending), the stable one (found), the failing one (error)
    skipped: tuple[tuple[int, str], ...] = ()  # rungs ruled out without a launch, and why


class Seed(NamedTuple):
    """Where a later profile starts, and why."""

    rung: int
    why: str


def num(value: float) -> str:
    """A measured value as a person reads it: 177915 -> "177,915", 0.8123 -> "0.8123"."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"
