"""The early-stop rules (`ladder.core.stop`) fed scripted looks: the stage a trial's course is in as its points come,
what the live view calls it, the stop decided, and what a pause undoes."""

from __future__ import annotations

from ladder.core.measure.window import Window
from ladder.core.records import Point, StopCause
from ladder.core.stop import Course, Mark, Observation, Stage, Terms, decide, paused
from tests.unit.test_measure import conf, steps_at


def look(points: list[Point], now_t: float, silent_s: float = 0.0) -> Observation:
    return Observation(points, [], now_t, elapsed_s=now_t - 990.0, silent_s=silent_s)


def test_a_course_starts_warms_up_and_measures_as_its_points_come() -> None:
    """No point yet: starting; points but no steady steps: warming up; the stable rule met: measuring. The live view
    says `warm-up` for the first two and `window` for the third, as it always has."""
    pts = steps_at([1.0, 1.0, 1.0])
    course = Course(Terms(conf(window_s=4.0), 990.0))
    assert course.stage is Stage.STARTING
    course = decide(course, look([], 999.0))
    assert (course.stage, course.stage.shown, course.cause) == (Stage.STARTING, "warm-up", StopCause.NONE)
    course = decide(course, look(pts[:1], 1000.0))
    assert (course.stage, course.stage.shown, course.window) == (Stage.WARMING_UP, "warm-up", None)
    course = decide(course, look(pts, pts[-1].t))
    assert (course.stage, course.stage.shown) == (Stage.MEASURING, "window")
    assert course.window == Window(pts[2].t, pts[2].t + 4.0, gated=True)  # two steps agree: the stable rule


def test_a_decided_stop_is_the_course_s_cause_and_its_last_stage() -> None:
    """A trainer silent past its stall limit is stopped `stalled`; the course says so, and the view would say
    `stopping`. Rules after the one that stopped it are not asked."""
    pts = steps_at([1.0, 1.0, 1.0])
    course = decide(Course(Terms(conf(window_s=100.0), 990.0)), look(pts, pts[-1].t))
    stalled = decide(course, look(pts, pts[-1].t + 500.0, silent_s=500.0))
    assert (stalled.cause, stalled.stage, stalled.stage.shown) == (StopCause.STALLED, Stage.STOPPING, "stopping")
    silent = decide(Course(Terms(conf(trial_timeout_s=600.0), 990.0)), look([], 1100.0, silent_s=100.0))
    assert silent.cause is StopCause.STALLED  # past its start-up limit, and not busy


def test_a_pause_restarts_an_open_window_and_forgets_its_extension() -> None:
    """After a pause the window is measured afresh: the course is warming up again, its extension and futility
    forgotten, and it is marked `window_restarted`; a course with no window yet is left as it is."""
    extended = Course(
        Terms(conf(), 990.0), Stage.EXTENDED, window=Window(1000.0, 1010.0, True), marks=frozenset({Mark.EXTENDED})
    )
    after = paused(extended)
    assert (after.stage, after.window, after.marks) == (Stage.WARMING_UP, None, frozenset({Mark.RESTARTED}))
    fresh = Course(Terms(conf(), 990.0))
    assert paused(fresh) is fresh
