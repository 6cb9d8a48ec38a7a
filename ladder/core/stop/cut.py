"""The cuts: a trial that cannot matter (its rate clearly below `beat`, what it must beat) ends early, its window
closed where it was decided and its figures marked `cut`; an insurance probe's short window, lost, is `short` too."""

from __future__ import annotations

from dataclasses import replace

from ladder.core import pick, warmup
from ladder.core.measure import bounds
from ladder.core.measure.cadence import stall_limit_s
from ladder.core.measure.usage import figures
from ladder.core.measure.window import Window, close_window, stable_since
from ladder.core.records import Objective, StopCause
from ladder.core.stop.course import Course, Mark, Observation


def early_beaten(course: Course, obs: Observation) -> Course:
    """Before its window opens: the window its settled first steps predict (`warmup.Warmup.predict`) would end
    below `beat` even at its top, as a tie would reach it (`warmup.Prediction.reach`); then it is cut there, its
    figures the prediction's. Only steps the case's whole windows showed steady count, so a trainer still warming up
    runs on to its window, where `beaten` judges it on its own steps."""
    early, beat = course.terms.early, course.terms.beat
    if course.window is not None or beat is None or early is None or not obs.points:
        return course
    first = warmup.steps(obs.fresh, first=not obs.since_t)
    predicted = early.predict(first)
    if predicted is None:
        return course
    pace_s = sum(step.seconds for step, _ in first) / len(first)
    band = pick.noise_of(Objective.SAMPLES_PER_S)
    if predicted.reach(band, course.terms.limits.window_s / pace_s, early.noise) >= beat:
        return course
    window = Window(predicted.start_t, obs.points[-1].t, gated=True)
    return course.stopped(StopCause.WINDOW_DONE, window=window, predicted=predicted).marked(Mark.CUT)


def beaten(course: Course, obs: Observation) -> Course:
    """The steady steps so far say the window would end below `beat` (`bounds.final_upper`: the rate's top, narrowed
    as the window runs out); then the window ends here. They are the window's and the `stable_k` that opened it
    (`window.stable_since`), so a clear loser is cut as its window opens. The interval is the steps' own, or with the
    case's pooled step noise the pooled one: a few steps of a trial say little of their own spread."""
    beat, window = course.terms.beat, course.window
    if window is None or beat is None:
        return course
    since = stable_since(obs.fresh, window, course.terms.limits.stable_k)
    band = pick.noise_of(Objective.SAMPLES_PER_S)
    upper = bounds.final_upper(obs.points, since, window.end_t, band, course.terms.noise)
    open_step_s = course.open_step_s
    if upper is None or upper >= beat:
        upper = open_step_upper(course, obs, since)
        if upper is None or upper >= beat:
            return course
        open_step_s = round(obs.now_t - obs.points[-1].t, 2)
    cut = replace(window, start_t=since, end_t=obs.points[-1].t)
    return course.stopped(StopCause.WINDOW_DONE, window=cut, open_step_s=open_step_s).marked(Mark.CUT)


def open_step_upper(course: Course, obs: Observation, since: float) -> float | None:
    """The rate's top with the step in progress counted as ending now (`bounds.open_step_upper`): a trial whose
    next step is already too slow for it to matter is cut without waiting for that step. Not once the silence is
    long enough to be a stall: a hang is a stall, not a loser's window."""
    if not obs.points:
        return None
    if obs.now_t - obs.points[-1].t > stall_limit_s(obs.fresh, course.terms.limits.stall_timeout_s):
        return None
    return bounds.open_step_upper(obs.points, since, obs.now_t, course.terms.noise)


def short_lost(course: Course, obs: Observation, min_points: int = 3) -> Course:
    """An insurance probe's short window has closed (`short_s`, and at least `min_points` points) with a rate below
    `beat`, or its steps so far are already `bounds.SHORT_Z` standard errors below it (`bounds.rate_top`): its window
    ends there, counted from the steady steps that opened it (`window.stable_since`). A short window whose rate
    reaches `beat` leaves the rest of the window to decide, under the usual cut."""
    beat, window = course.terms.beat, course.window
    if course.short_s is None or window is None or beat is None:
        return course
    since = stable_since(obs.fresh, window, course.terms.limits.stable_k)
    top = bounds.rate_top(obs.points, since, bounds.SHORT_Z, course.terms.noise)
    if top is not None and top < beat:
        lost = replace(window, start_t=since, end_t=obs.points[-1].t)
        return course.stopped(StopCause.WINDOW_DONE, window=lost).marked(Mark.CUT, Mark.SHORT)
    short = close_window(replace(window, start_t=since, end_t=since + course.short_s), obs.points, min_points)
    if short is None:
        return course
    rate = figures([], obs.points, short, course.terms.launch_t).get("samples_per_s")
    if rate is None or rate >= beat:
        return replace(course, short_s=None)
    return course.stopped(StopCause.WINDOW_DONE, window=short).marked(Mark.CUT, Mark.SHORT)
