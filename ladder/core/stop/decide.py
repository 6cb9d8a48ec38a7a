"""`decide`: one look at a running trial, asked of every rule in turn. Each rule takes the course so far and the
look, and returns the course it leaves (the same one where it has nothing to say); the first that stops the trial
ends the turn. The runner asks at each tick and stops the trial once `cause` is set."""

from __future__ import annotations

from collections.abc import Callable

from ladder.core.stop import cut, limits, window
from ladder.core.stop.course import Course, Observation

StopRule = Callable[[Course, Observation], Course]

# In this order: the window closes whole before a cut is looked for; a trial cut or measured is never a stall.
RULES: tuple[StopRule, ...] = (
    window.opened,
    window.closed,
    cut.early_beaten,
    cut.beaten,
    cut.short_lost,
    limits.stalled,
    limits.timed_out,
    limits.silent_start,
)


def decide(course: Course, obs: Observation, rules: tuple[StopRule, ...] = RULES) -> Course:
    """The course after this look: `cause` says whether (and why) to stop the trial now."""
    for rule in rules:
        course = rule(course, obs)
        if course.cause:
            return course
    return course
