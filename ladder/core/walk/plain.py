"""The plain strategy (`strategy=walk`): the highest rung left, one rung at a time; no seed (nor prior), no memory
line, no descent."""

from __future__ import annotations

from collections.abc import Sequence

from ladder.core.walk.attempt import Attempt
from ladder.core.walk.decision import Decision, Seed
from ladder.core.walk.memory_line import MemoryLine
from ladder.core.walk.strategy import Between
from ladder.core.walk.tuning import Tuning


class Plain:
    """The highest rung left, every time."""

    descends = False

    def seed(
        self, rungs: Sequence[int], picks: list[int], nothing_fits: bool, tuning: Tuning, prior: Seed | None = None
    ) -> Seed | None:
        return None  # from the top, whatever history says

    def step(self, at: Between) -> Decision | None:
        return Decision(at.profile, at.left[0], "the highest rung left")

    def line(self, mine: list[Attempt]) -> MemoryLine | None:
        return None

    def above_reach(self, rung: int, mine: list[Attempt], tuning: Tuning, case_best: float | None) -> str:
        return ""
