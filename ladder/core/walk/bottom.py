"""The bottom check: does num_envs matter at all? After failures whose evidence names no memory, the ladder's lowest
rung runs next; failing there the same way, the profile stops (`Outcome.UNRELATED`: the fix is not a lower ladder)."""

from __future__ import annotations

from collections.abc import Sequence

from ladder.core import pick
from ladder.core.records import Status
from ladder.core.walk import facts
from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Step


def fits_nowhere(mine: list[Attempt]) -> bool:
    """No rung of the profile fits (neither ran nor diverged: a rung that diverged fitted in memory)."""
    return facts.floor(mine) is None and not any(a.status is Status.DIVERGED for a in mine)


def without_memory(attempt: Attempt) -> bool:
    """A step-down whose evidence names no memory (`NO_MEMORY_REASONS`), and which did not fill its card either
    (`pick.NEAR_FULL`: a collective that fails at a full card fails for want of memory as often as not): it may not
    depend on num_envs at all."""
    return attempt.status in facts.STEP_DOWN and pick.names_no_memory(attempt.reason, attempt.mem_frac)


def bottom_check(rungs: Sequence[int], profile: str, mine: list[Attempt]) -> Decision | None:
    """The ladder's lowest rung, next, for a profile that fits nowhere yet and whose counted failures, at two rungs
    or more, all named no memory: the one launch that tells whether num_envs matters at all."""
    lowest, fails = min(rungs), facts.counted(mine)
    failed_at = sorted({a.rung for a in fails}, reverse=True)
    if not fits_nowhere(mine) or len(failed_at) < 2:
        return None
    if not all(without_memory(a) for a in fails) or lowest not in facts.left(rungs, mine):
        return None
    if any(a.rung == lowest for a in mine):
        return None
    reasons = ", ".join(sorted({str(a.reason or a.status) for a in fails}))
    return Decision(
        profile,
        lowest,
        f"the lowest rung: the failures at {', '.join(map(str, failed_at))} envs named no memory ({reasons}); "
        "if it fails the same way, num_envs is not the cause",
        step=Step.BOTTOM,
    )


def failed_without_memory_above(rungs: Sequence[int], attempts: Sequence[Attempt]) -> bool:
    """Some profile of the case failed above the lowest rung, counted, and none of its failures named memory."""
    lowest = min(rungs)
    for profile in {a.profile for a in attempts}:
        fails = facts.counted(facts.mine(profile, attempts))
        if any(a.rung > lowest for a in fails) and all(without_memory(a) for a in fails):
            return True
    return False


def unrelated(rungs: Sequence[int], mine: list[Attempt], attempts: Sequence[Attempt]) -> int | None:
    """The lowest rung, where a profile that fits nowhere failed there, counted, with no memory evidence in any of
    its failures, as the case did above it: num_envs is not the cause (`Outcome.UNRELATED`); None otherwise."""
    if not fits_nowhere(mine):
        return None
    lowest, fails = min(rungs), facts.counted(mine)
    at_bottom = any(a.rung == lowest for a in fails)
    if at_bottom and all(without_memory(a) for a in fails) and failed_without_memory_above(rungs, attempts):
        return lowest
    return None
