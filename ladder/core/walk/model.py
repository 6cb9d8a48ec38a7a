"""The model strategy (`strategy=model`, the default): a profile seeded at its prior (the rung memory history
predicts for this card) or, for a later profile, at an earlier pick; jumps along a profile's memory line, rungs the
line puts over the card or that perfect scaling keeps below the case's best skipped, and (with `descend`) the descent
below the largest fit."""

from __future__ import annotations

from collections.abc import Sequence

from ladder.core.records import Status
from ladder.core.walk import facts
from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Seed, num
from ladder.core.walk.descent import descent_step
from ladder.core.walk.memory_line import MemoryLine, memory_line
from ladder.core.walk.strategy import Between
from ladder.core.walk.tuning import Tuning


class Model:
    """Seeds, memory-line jumps, the scaling bound, and the descent."""

    descends = True

    def seed(
        self, rungs: Sequence[int], picks: list[int], nothing_fits: bool, tuning: Tuning, prior: Seed | None = None
    ) -> Seed | None:
        if prior is not None:  # the profile's own memory on other cards speaks for it before another profile's pick
            return prior
        if picks:
            after = "the rung below, then the one above" if tuning.descend else "the rung above"
            return Seed(picks[0], f"seeded at {picks[0]} envs, an earlier profile's pick; {after} comes next")
        if nothing_fits:
            return Seed(
                rungs[-1], "seeded at the lowest rung: no rung fitted an earlier profile; if it fails, none fits"
            )
        return None

    def step(self, at: Between) -> Decision | None:
        profile, left, mine, tuning = at.profile, at.left, at.mine, at.tuning
        if at.seed is not None and at.seed.rung in left and not facts.ran(mine):
            return Decision(profile, at.seed.rung, at.seed.why)
        line = self.line(mine)
        if line is not None:
            return _jump(profile, left, line, tuning)
        if facts.floor(mine) is not None:
            below = (
                descent_step(at.rungs, profile, mine, at.gain, at.case_best, tuning.noise) if tuning.descend else None
            )
            if below:
                return below  # the descent measures it anyway; its memory point may rule out the rungs above
            if [
                r for r in facts.left(at.rungs, mine) if r < left[-1]
            ]:  # those between are out of reach (`above_reach`)
                return Decision(
                    profile, left[-1], "the lowest rung above the largest fit that could still become the pick"
                )
            return Decision(profile, left[-1], "just above the largest rung that fits")
        return Decision(profile, left[0], "the highest rung left")

    def line(self, mine: list[Attempt]) -> MemoryLine | None:
        return memory_line(facts.points(mine))

    def above_reach(self, rung: int, mine: list[Attempt], tuning: Tuning, case_best: float | None) -> str:
        """For a throughput objective: an iteration never gets faster with more envs, so samples/s grows at most in
        proportion to num_envs, and even perfect scaling from the top of the interval of a rung of this profile
        measured below `rung` may stay under the case's best. Only a later profile can meet this (the case's best is
        otherwise its own)."""
        if not tuning.throughput or case_best is None:
            return ""
        below = [a for a in mine if a.status is Status.OK and a.value is not None and a.rung < rung]
        if not below:
            return ""
        base = min(below, key=lambda a: facts.upper(a) / a.rung)
        bound = facts.upper(base) * rung / base.rung
        if bound >= case_best:
            return ""
        return (
            f"even perfect scaling from {num(facts.upper(base))} at {base.rung} envs ({num(bound)}) stays below the "
            f"case's best {num(case_best)}"
        )


def _jump(profile: str, left: list[int], line: MemoryLine, tuning: Tuning) -> Decision | None:
    """The largest rung left the line predicts to leave `mem_headroom_frac` free (else the lowest it puts within
    `mem_margin_frac` of the card); None where it puts every rung left over the card: the floor is the answer."""
    plausible = [r for r in left if line.predict(r) <= 1.0 + tuning.mem_margin_frac]
    if not plausible:
        return None
    fits = [r for r in plausible if line.predict(r) <= 1.0 - tuning.mem_headroom_frac]
    target = fits[0] if fits else plausible[-1]
    return Decision(profile, target, f"memory fit predicts {line.predict(target):.0%} of the card at {target} envs")
