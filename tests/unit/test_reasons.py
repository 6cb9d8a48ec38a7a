"""Reasons that say what happened: a healthy trainer that ended by itself before its window stood is `unmeasured`
with how long it ran and what its window still needed, never "too few points" when it printed hundreds."""

from __future__ import annotations

import pytest

from ladder.core.records import Reason, Status, StopCause, Verdict
from ladder.failures import refine
from tests.unit.test_measure import conf

OK = Verdict(Status.OK, Reason.NONE, "")
MEASURE = conf(window_s=8.0, min_window_iters=5, trial_timeout_s=180.0, budget_s=540.0)
HELD = (
    "its cadence is unknown (a regex of its own): no pause has recurred in its progress and it has printed evenly for "
    "19.9 s only of the 24 s (3 windows) that show whether it pauses for updates, and an update comes only after a "
    "whole rollout"
)


@pytest.mark.parametrize(
    ("seen", "said"),
    [
        (
            refine.Seen(points=303, window_points=150, ran_s=20.3, window_end_s=12.1, unsettled=HELD),
            f"it exited by itself after 20.3 s (303 progress point(s)), before its window could stand: {HELD}; no "
            "figures; run the trainer longer (its own setting: more steps or iterations)",
        ),
        (
            refine.Seen(points=9, window_points=3, ran_s=6.0, window_end_s=10.5),
            "it exited by itself after 6.0 s (9 progress point(s)), before its window closed 10.5 s after launch "
            "(measure.window_s=8; it held 3 progress point(s) of the 5 needed): no figures; run the trainer longer "
            "(its own setting: more steps or iterations)",
        ),
        (
            refine.Seen(points=2, ran_s=1.5),
            "it exited by itself after 1.5 s (2 progress point(s)), before its window opened (on steady steps after "
            "measure.warmup_iters): no figures; run the trainer longer (its own setting: more steps or iterations)",
        ),
        (
            refine.Seen(points=9, window_points=3, ran_s=12.0, window_end_s=10.5),
            "it exited by itself after 12.0 s (9 progress point(s)), its window holding 3 progress point(s) of the 5 "
            "needed (measure.min_window_iters): no figures; run the trainer longer (its own setting: more steps or "
            "iterations)",
        ),
    ],
    ids=["held-its-cadence-unseen", "window-still-open", "no-window-yet", "window-short-of-points"],
)
def test_a_trainer_that_exited_before_its_window_stood_says_so(seen: refine.Seen, said: str) -> None:
    verdict = refine.settled(OK, seen, MEASURE)
    assert (verdict.status, verdict.reason, verdict.evidence) == (Status.UNMEASURED, Reason.FEW_POINTS, said)


def test_a_trainer_ladder_stopped_at_its_time_limit_still_gets_the_budget_that_would_measure_it() -> None:
    """Out of time (ladder stopped it): a longer budget is the setting; the words stay as they were."""
    seen = refine.Seen(stopped_by=StopCause.TRIAL_TIMEOUT, points=4, window_points=2, ran_s=180.0, pace_s=40.0)
    timed_out = Verdict(Status.UNMEASURED, Reason.TRIAL_TIMEOUT, "")
    verdict = refine.settled(timed_out, seen, MEASURE)
    assert verdict.evidence == (
        "survived, but its window held 2 progress point(s) of the 5 needed: no figures; try a longer "
        "measure.budget_s (now 540 s; measure.trial_timeout_s 180 s) or a trainer setting that prints progress more "
        "often"
    )
