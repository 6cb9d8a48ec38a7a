"""What a strategy answers (`Mover`), and the question it is asked (`Between`): how the walk picks among the rungs
left between a profile's floor and ceiling. One strategy per module (`plain`, `model`); `profile` looks one up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Seed
from ladder.core.walk.gain import Gain
from ladder.core.walk.memory_line import MemoryLine
from ladder.core.walk.tuning import Tuning


@dataclass(frozen=True)
class Between:
    """One profile's walk with rungs left: what a strategy's `step` is asked."""

    rungs: Sequence[int]  # the ladder, highest first
    profile: str
    left: list[int]  # the rungs left that could still become the pick, highest first
    mine: list[Attempt]  # the profile's attempts (`facts.mine`)
    tuning: Tuning
    seed: Seed | None  # where an earlier profile says to start (None: no seed)
    case_best: float | None  # the case's best value so far
    gain: Gain  # the case's gain bound (`gain.gain`)


class Mover(Protocol):
    """One strategy of the walk."""

    descends: bool  # with `Tuning.descend`, it measures below the largest fit

    def seed(
        self, rungs: Sequence[int], picks: list[int], nothing_fits: bool, tuning: Tuning, prior: Seed | None = None
    ) -> Seed | None:
        """Where a profile starts: its `prior` (the rung its memory history predicts for this card), or, for a later
        profile, the earlier profiles' picks (None: from the top)."""
        ...

    def step(self, at: Between) -> Decision | None:
        """The profile's next launch among the rungs left (None: its floor is the answer)."""
        ...

    def line(self, mine: list[Attempt]) -> MemoryLine | None:
        """The memory line it reads from the profile's measured points (None: it reads none)."""
        ...

    def above_reach(self, rung: int, mine: list[Attempt], tuning: Tuning, case_best: float | None) -> str:
        """Why `rung` cannot become the case's pick whatever it measures ("" if it can, or it does not judge)."""
        ...
