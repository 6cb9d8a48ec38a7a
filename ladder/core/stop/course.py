"""A trial's course as the early-stop rules see it: where it is (`Stage`), what it was given (`Terms`), what the
runner saw at one look (`Observation`), and what the rules decided so far (`Course`, frozen: a rule returns a new
one). No clock, no process: the runner passes the times and the points it read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Protocol

from ladder.core import warmup
from ladder.core.measure.noise import Noise
from ladder.core.measure.window import Window
from ladder.core.records import Point, Sample, StopCause, Word


class Stage(Word):
    """Where a trial is in its life; `shown` is what the live view says of it."""

    STARTING = "starting"  # launched, no progress point read yet
    WARMING_UP = "warming_up"  # its points come, its window is not open yet (or opens afresh after a pause)
    MEASURING = "measuring"  # its window is open
    HELD = "held"  # its window's time is up, held open while its memory is unsettled (`Course.unsettled`)
    EXTENDED = "extended"  # its window was extended once: its rate's interval was wider than `max_ci_frac`
    STOPPING = "stopping"  # a stop was decided (`Course.cause`)

    @property
    def shown(self) -> str:
        if self in (Stage.STARTING, Stage.WARMING_UP):
            return "warm-up"
        return "stopping" if self is Stage.STOPPING else "window"


class Mark(Word):
    """What a course did on its way that its figures say (the value is the figure's name)."""

    CUT = "cut"  # the window closed early: the trial measured clearly less than `beat`
    SHORT = "short"  # ... an insurance probe's short window, lost
    EXTENDED = "window_extended"  # the window was extended once
    FUTILE = "window_futile"  # ... or was not, or its extension ended early: its steps could not narrow it
    HELD = "window_held"  # the window ran past window_s, held open while its memory was unsettled
    OVERTIME = "overtime"  # it ran past trial_timeout_s, printing steadily, its window due within budget_s
    RESTARTED = "window_restarted"  # a pause came while its window was open: the window started again after it


class Limits(Protocol):
    """The measure settings the rules read (`MeasureConf` is one)."""

    @property
    def warmup_iters(self) -> int: ...
    @property
    def stable_k(self) -> int: ...
    @property
    def stable_tol(self) -> float: ...
    @property
    def data_time_max_s(self) -> float | None: ...
    @property
    def warmup_timeout_s(self) -> float: ...
    @property
    def window_s(self) -> float: ...
    @property
    def min_window_iters(self) -> int: ...
    @property
    def stall_timeout_s(self) -> float: ...
    @property
    def startup_timeout_s(self) -> float: ...
    @property
    def trial_timeout_s(self) -> float: ...
    @property
    def budget_s(self) -> float: ...
    @property
    def max_ci_frac(self) -> float: ...
    @property
    def extend_unstable(self) -> bool: ...


@dataclass(frozen=True)
class Terms:
    """What a trial is judged against, fixed at its launch."""

    limits: Limits
    launch_t: float  # unix time of launch
    beat: float | None = None  # samples/s this trial must beat to matter; below it, its window closes early
    noise: Noise | None = None  # the case's pooled step noise the cut and the interval judge on
    early: warmup.Warmup | None = None  # the case's first-step gains: a cut before the window opens
    cadence_s: float = 0.0  # the window length cadence and settling are judged on
    per_iteration: bool = True  # each progress point is a whole iteration (`TrialSpec.progress_per_iteration`)
    numbered: bool = True  # the trainer numbers its iterations (`progress.numbered`); else its lines are only counted


@dataclass(frozen=True)
class Observation:
    """One look at a running trial: its points and samples so far (read, never changed), and the times."""

    points: Sequence[Point]
    samples: Sequence[Sample]
    now_t: float  # unix time of the look
    elapsed_s: float  # since launch, less the pauses
    silent_s: float  # since the last new progress point (or the launch), less the pauses
    paused_s: float = 0.0  # how long the sweep and this trial were suspended together
    since_t: float = 0.0  # the window opens on points from here on: after the last pause

    @cached_property
    def fresh(self) -> Sequence[Point]:
        """The points since the last pause (all of them where there was none): its pace and its window's."""
        return [p for p in self.points if p.t >= self.since_t] if self.since_t else self.points


@dataclass(frozen=True)
class Course:
    """What the rules decided so far: the stage, the window, the stop (NONE while it runs) and the marks."""

    terms: Terms
    stage: Stage = Stage.STARTING
    cause: StopCause = StopCause.NONE
    window: Window | None = None
    marks: frozenset[Mark] = field(default_factory=frozenset)
    short_s: float | None = None  # an insurance probe: past this much window, a rate below `beat` ends it
    unsettled: str = ""  # why the closed window cannot stand for a fit yet (memory still rising, no update in it)
    open_step_s: float | None = None  # a cut decided on the step in progress, which had run this long
    predicted: warmup.Prediction | None = None  # a cut before the window opened, on this prediction of its window
    due_s: float | None = None  # when its window could close, seconds from launch at its pace (at the last look)

    def marked(self, *marks: Mark) -> Course:
        return replace(self, marks=self.marks | set(marks))

    def stopped(self, cause: StopCause, **changes: object) -> Course:
        return replace(self, cause=cause, stage=Stage.STOPPING, **changes)  # type: ignore[arg-type]


def paused(course: Course) -> Course:
    """After a pause (Ctrl-Z with the sweep), an open window is measured afresh on the points after it: a window
    across a pause would measure the pause."""
    if course.window is None:
        return course
    marks = (course.marks - {Mark.EXTENDED, Mark.FUTILE}) | {Mark.RESTARTED}
    return replace(course, window=None, stage=Stage.WARMING_UP, marks=marks, unsettled="")
