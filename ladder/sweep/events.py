"""What a sweep tells whoever watches it (`View`): the sweep started, the trials it had recorded before this process
started (a resume, or a second process on the same sweep), a trial started, a tick of the running trial, a trial
finished, the end. `ladder.ui.view` draws them; a test or a script may pass its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ladder.core import walk
from ladder.core.records import TrialRecord
from ladder.runner.trial import Tick


class View(Protocol):
    def sweep_started(
        self,
        banner: str,
        case: str,
        rungs: Sequence[int],
        profiles: Sequence[str],
        knob: str = "num_envs",
        tuning: walk.Tuning = ...,
        objective: str = "min_avg_util",
    ) -> None: ...
    def found(self, records: Sequence[TrialRecord]) -> None: ...
    def trial_started(self, profile: str, rung: int) -> None: ...
    def tick(self, tick: Tick) -> None: ...
    def trial_finished(self, record: TrialRecord) -> None: ...
    def close(self) -> None: ...


class Unwatched:
    """A view that shows nothing (a dry run plans without a watcher)."""

    def sweep_started(
        self,
        banner: str,
        case: str,
        rungs: Sequence[int],
        profiles: Sequence[str],
        knob: str = "num_envs",
        tuning: walk.Tuning | None = None,
        objective: str = "min_avg_util",
    ) -> None:
        pass

    def found(self, records: Sequence[TrialRecord]) -> None:
        pass

    def trial_started(self, profile: str, rung: int) -> None:
        pass

    def tick(self, tick: Tick) -> None:
        pass

    def trial_finished(self, record: TrialRecord) -> None:
        pass

    def close(self) -> None:
        pass
