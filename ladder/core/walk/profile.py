"""One profile's walk: its next launch (`next_for`) and where it stands (`standing`), with the strategy that picks
among the rungs left looked up by name (`mover`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ladder.core.records import Status
from ladder.core.walk import bottom, facts
from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Outcome, Seed, Standing, Step
from ladder.core.walk.descent import descent_step, not_descended
from ladder.core.walk.gain import Gain, gain
from ladder.core.walk.model import Model
from ladder.core.walk.plain import Plain
from ladder.core.walk.strategy import Between, Mover
from ladder.core.walk.tuning import DEFAULT, Strategy, Tuning

MOVERS: Mapping[Strategy, Mover] = {Strategy.PLAIN: Plain(), Strategy.MODEL: Model()}


def mover(tuning: Tuning) -> Mover:
    """The strategy `tuning` names."""
    return MOVERS[tuning.strategy]


def descends(tuning: Tuning) -> bool:
    """The walk measures below the largest fit (`descend`, under a strategy that descends)."""
    return tuning.descend and mover(tuning).descends


def next_for(
    rungs: Sequence[int],
    profile: str,
    attempts: Sequence[Attempt],
    tuning: Tuning,
    seed: Seed | None = None,
    case_gain: Gain | None = None,
) -> Decision | None:
    """One profile's next launch (None: its walk has ended), from every attempt of the case (`case_gain`:
    `gain.gain` of them, where the caller found it already)."""
    mine = facts.mine(profile, attempts)
    if facts.broken(mine) is not None:
        return None
    if (again := facts.retry(mine)) is not None:
        return Decision(profile, again.rung, "the same rung again: its launch failed (port in use)", step=Step.RETRY)
    if (doubt := facts.to_confirm(mine)) is not None:
        why = "the same rung once more: its failure was weak evidence (low confidence)"
        return Decision(profile, doubt, why, step=Step.AGAIN)
    if (check := bottom.bottom_check(rungs, profile, mine)) is not None:
        return check
    case_best, strategy = facts.case_best(attempts), mover(tuning)
    case_gain = case_gain if case_gain is not None else gain(attempts, tuning)
    left = [r for r in facts.left(rungs, mine) if not strategy.above_reach(r, mine, tuning, case_best)]
    if not left:
        return descent_step(rungs, profile, mine, case_gain, case_best, tuning.noise) if descends(tuning) else None
    decision = strategy.step(Between(rungs, profile, left, mine, tuning, seed, case_best, case_gain))
    if decision is not None and decision.rung == min(rungs) and bottom.failed_without_memory_above(rungs, attempts):
        return replace(decision, step=Step.BOTTOM)  # its failure, too, would say num_envs is not the cause
    return decision


def standing(rungs: Sequence[int], profile: str, attempts: Sequence[Attempt], tuning: Tuning = DEFAULT) -> Standing:
    """Where one profile's walk stands (its next rung, when pending, is as if it had no seed)."""
    mine = facts.mine(profile, attempts)
    case_best, case_gain = facts.case_best(attempts), gain(attempts, tuning)
    skipped = _skipped(rungs, mine, tuning, case_best)
    if descends(tuning):
        skipped += not_descended(rungs, mine, case_best, case_gain)
    decision = next_for(rungs, profile, attempts, tuning, case_gain=case_gain)
    if decision is not None:
        return Standing(profile, Outcome.PENDING, decision.rung, skipped)
    if (broken := facts.broken(mine)) is not None:
        return Standing(profile, Outcome.ERROR, broken, skipped)
    if (lowest := bottom.unrelated(rungs, mine, attempts)) is not None:
        ran = {a.rung for a in mine}
        why = "not run: it fails at the lowest rung too, so num_envs is not the cause"
        return Standing(profile, Outcome.UNRELATED, lowest, tuple((r, why) for r in rungs if r not in ran))
    floor = facts.floor(mine)
    if floor is None and (diverged := [a.rung for a in mine if a.status is Status.DIVERGED]):
        return Standing(profile, Outcome.DIVERGED, min(diverged), skipped)
    return Standing(profile, Outcome.FOUND if floor else Outcome.EXHAUSTED, floor, skipped)


def _skipped(
    rungs: Sequence[int], mine: list[Attempt], tuning: Tuning, case_best: float | None
) -> tuple[tuple[int, str], ...]:
    """Rungs above the floor that were never launched, and what ruled each out."""
    ran, floor, ceiling = {a.rung for a in mine}, facts.floor(mine), facts.ceiling(mine)
    strategy = mover(tuning)
    line = strategy.line(mine)
    out = []
    for rung in (r for r in rungs if r not in ran and (floor is None or r > floor)):
        if ceiling is not None and rung > ceiling:
            out.append((rung, f"above the failure at {ceiling} envs"))
        elif line is not None and line.predict(rung) > 1.0 + tuning.mem_margin_frac:
            out.append((rung, f"memory fit predicts {line.predict(rung):.0%} of the card"))
        elif why := strategy.above_reach(rung, mine, tuning, case_best):
            out.append((rung, why))
    return tuple(out)
