"""The walk: the search over a case's profiles and rungs for which (profile, rung) to launch next, from the trials
so far. Pure. Its rules, with their reasons, are in docs/searching.md ("The walk")."""

from ladder.core.walk.attempt import Attempt, attempts
from ladder.core.walk.case import next_trial
from ladder.core.walk.decision import Decision, Outcome, Seed, Standing, Step
from ladder.core.walk.descent import insurance
from ladder.core.walk.facts import FITS, MAX_RETRIES, STEP_DOWN
from ladder.core.walk.gain import rising
from ladder.core.walk.memory_line import MemoryLine, memory_line
from ladder.core.walk.profile import standing
from ladder.core.walk.tuning import Strategy, Tuning

__all__ = [
    "FITS",
    "MAX_RETRIES",
    "STEP_DOWN",
    "Attempt",
    "Decision",
    "MemoryLine",
    "Outcome",
    "Seed",
    "Standing",
    "Step",
    "Strategy",
    "Tuning",
    "attempts",
    "insurance",
    "memory_line",
    "next_trial",
    "rising",
    "standing",
]
