"""The measured window's own rules: when it opens, when it closes, when it is held for its memory, and when its
wide interval extends it once (and when that extension is futile)."""

from __future__ import annotations

from dataclasses import replace

from ladder.core.measure.noise import Noise
from ladder.core.measure.peak import outlived_peak
from ladder.core.measure.rates import projected_ci_frac, whole_window_noise, window_ci_frac
from ladder.core.measure.window import Rule, Window, close_window, open_window, window_points
from ladder.core.records import StopCause
from ladder.core.stop.course import Course, Mark, Observation, Stage

# An extension ends (or is not made) once the steps so far project its interval wider than this many times
# `max_ci_frac` at its end: at 1, once it is more likely to end wide than narrow.
FUTILE_MARGIN = 1.0


def opened(course: Course, obs: Observation) -> Course:
    """A window not open yet opens once the stable rule (or the warm-up limit) says so."""
    if course.window is not None:
        return course
    m = course.terms.limits
    rule = Rule(m.warmup_iters, m.stable_k, m.stable_tol, m.data_time_max_s)
    window = open_window(obs.fresh, obs.now_t, m.window_s, rule, m.warmup_timeout_s)
    if window is None:
        return replace(course, stage=Stage.WARMING_UP if obs.points else Stage.STARTING)
    return replace(course, window=window, stage=Stage.MEASURING)


def closed(course: Course, obs: Observation) -> Course:
    """The window holds `min_window_iters` points and `window_s` has passed, and the trial's memory has outlived its
    peak (`peak.outlived_peak`); else it is held. Once, a rate whose interval is wider than `max_ci_frac` extends
    it by another `window_s` (`extend_unstable`); the extension ends at the first point where the interval is
    narrow enough (`narrow_enough`), or where its steps cannot narrow it (`futile`). A window not extended because
    the extension would be futile closes `unstable`, marked `window_futile`."""
    if (current := course.window) is None:
        return course
    m = course.terms.limits
    window = close_window(current, obs.points, m.min_window_iters)
    if window is None and Mark.EXTENDED in course.marks:
        window = narrow_enough(course, obs)
        if window is None:
            course, window = futile(course, obs)
    if window is None:
        return course
    terms = course.terms
    unsettled = outlived_peak(obs.samples, obs.fresh, window, terms.cadence_s, terms.per_iteration, terms.numbered)
    if unsettled:  # it goes on, taking each new point, until its memory outlives its peak (or its budget ends)
        return replace(course, unsettled=unsettled, stage=Stage.HELD).marked(Mark.HELD)
    course = replace(course, unsettled="")
    wide = (window_ci_frac(obs.points, window, noise(course, obs, window)) or 0.0) > m.max_ci_frac
    if wide and m.extend_unstable and Mark.EXTENDED not in course.marks:
        extended = replace(current, end_t=window.end_t + m.window_s)
        course = hopeless(course, obs, window, extended.end_t)
        if Mark.FUTILE not in course.marks:
            return replace(course, window=extended, stage=Stage.EXTENDED).marked(Mark.EXTENDED)
    return course.stopped(StopCause.WINDOW_DONE, window=window)


def futile(course: Course, obs: Observation) -> tuple[Course, Window | None]:
    """An extended window, closed at its newest point once its steps so far say the rest of the extension cannot
    bring its interval within `max_ci_frac` (`hopeless`); None while it still may."""
    assert course.window is not None
    now = so_far(course, obs)
    if now is None:
        return course, None
    course = hopeless(course, obs, now, course.window.end_t)
    return course, now if Mark.FUTILE in course.marks else None


def so_far(course: Course, obs: Observation) -> Window | None:
    """The open window up to its newest point, once it holds `min_window_iters` points (None before)."""
    assert course.window is not None
    if not obs.points:
        return None
    now = replace(course.window, end_t=obs.points[-1].t)
    return now if window_points(now, obs.points) >= max(1, course.terms.limits.min_window_iters) else None


def hopeless(course: Course, obs: Observation, window: Window, until_t: float) -> Course:
    """Marked `window_futile` where running `window` on to `until_t` would, at its steps' pace and spread so far,
    leave its interval wider than `FUTILE_MARGIN` times `max_ci_frac` (`rates.projected_ci_frac`); unmarked else."""
    projected = projected_ci_frac(obs.points, window, until_t, noise(course, obs, window))
    if projected is not None and projected > FUTILE_MARGIN * course.terms.limits.max_ci_frac:
        return course.marked(Mark.FUTILE)
    return replace(course, marks=course.marks - {Mark.FUTILE})


def narrow_enough(course: Course, obs: Observation) -> Window | None:
    """An extended window, closed at its newest point once the samples/s interval over all of it is within
    `max_ci_frac` (None while it is wider)."""
    now = so_far(course, obs)
    ci = None if now is None else window_ci_frac(obs.points, now, noise(course, obs, now))
    return now if ci is not None and ci <= course.terms.limits.max_ci_frac else None


def noise(course: Course, obs: Observation, window: Window) -> Noise | None:
    """The step noise a whole window's interval pools (`rates.whole_window_noise`): the case's, where the window's
    steps are no noisier, and that of the steady steps that opened it."""
    return whole_window_noise(obs.fresh, window, course.terms.noise, course.terms.limits.stable_k)
