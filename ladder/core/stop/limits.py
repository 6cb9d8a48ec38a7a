"""The limits on a trial's time: a stall (no progress for longer than its own pauses allow), its time limit
(`trial_timeout_s`, past which a steady trainer runs on within `budget_s`), and a silent start that is not busy."""

from __future__ import annotations

from dataclasses import replace

from ladder.core.measure import usage
from ladder.core.measure.cadence import stall_limit_s
from ladder.core.measure.peak import is_cycle_unseen
from ladder.core.measure.window import Plan, close_by
from ladder.core.records import StopCause
from ladder.core.stop.course import Course, Mark, Observation, Stage


def stalled(course: Course, obs: Observation) -> Course:
    """Silent for longer than its pauses so far allow (`cadence.stall_limit_s`), once it has printed progress."""
    if obs.points and obs.silent_s > stall_limit_s(obs.fresh, course.terms.limits.stall_timeout_s):
        return course.stopped(StopCause.STALLED)
    return course


def timed_out(course: Course, obs: Observation) -> Course:
    """Past `trial_timeout_s`: a window held for a cycle its reader has not seen runs on within `budget_s`; a window
    held or extended stands as far as it got; a trainer within its budget runs on (`overtime`); else it is out of
    time."""
    if obs.elapsed_s <= course.terms.limits.trial_timeout_s:
        return course
    if is_cycle_unseen(course.unsettled) and obs.elapsed_s <= course.terms.limits.budget_s:
        return course.marked(Mark.OVERTIME)  # held for a cycle its reader cannot see: it may yet show, within budget
    if course.stage in (Stage.HELD, Stage.EXTENDED) and course.window is not None:  # the window it had stands
        return course.stopped(StopCause.WINDOW_DONE, window=replace(course.window, end_t=obs.points[-1].t))
    return within_budget(course, obs)


def within_budget(course: Course, obs: Observation) -> Course:
    """A trainer that prints steadily runs on while, at its pace so far, its window can close within `budget_s` of
    its launch (`due_s` keeps that projection for the verdict); else it is stopped `trial_timeout`."""
    m = course.terms.limits
    plan = Plan(m.warmup_iters, m.stable_k, m.warmup_timeout_s, m.window_s, m.min_window_iters)
    due = close_by(obs.fresh, course.window, obs.now_t, plan)
    due_s = None if due is None else due - course.terms.launch_t - obs.paused_s
    course = replace(course, due_s=due_s)
    if due_s is not None and obs.elapsed_s <= m.budget_s and due_s <= m.budget_s:
        return course.marked(Mark.OVERTIME)
    return course.stopped(StopCause.TRIAL_TIMEOUT)


def silent_start(course: Course, obs: Observation) -> Course:
    """Before the first progress line: a slow first update is not a hang while the trainer visibly works."""
    m = course.terms.limits
    if obs.points or obs.silent_s <= max(m.stall_timeout_s, m.startup_timeout_s):
        return course
    busy = usage.busy(obs.samples, obs.now_t - m.stall_timeout_s)
    return course if busy else course.stopped(StopCause.STALLED)
