"""When ladder stops a running trial, as pure rules (Optuna's pruners are the model): each rule reads the trial's
course so far and one look at it, and returns the course it leaves, a stop cause set where the trial should end.
`decide` asks them in turn; the runner (`ladder.runner.trial`) reads the clock and the files and does the stop."""

from ladder.core.stop.course import Course, Limits, Mark, Observation, Stage, Terms, paused
from ladder.core.stop.decide import RULES, StopRule, decide

__all__ = ["RULES", "Course", "Limits", "Mark", "Observation", "Stage", "StopRule", "Terms", "decide", "paused"]
