"""Where a case's launch time went (`ladder.ui.summary.spent`): each trial counted once, by what it had to prove."""

from __future__ import annotations

from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.ui.summary import purpose, spent


def rec(profile: str, envs: int, status: Status, seconds: float, step: str = "walk", **figs: float) -> TrialRecord:
    info = {"duration_s": str(seconds), "step": step}
    return TrialRecord("amp_pi_plus", "amp", profile, envs, Phase.PROBE, status, Reason.NONE, "", dict(figs), info)


OK, OOM = Status.OK, Status.OOM_OR_NCCL


def test_each_launch_is_priced_by_what_it_proved_and_the_sum_is_every_trials() -> None:
    best = rec("default", 48, OK, 34.8)
    records = [
        rec("default", 256, OOM, 1.9),
        rec("default", 128, OOM, 2.2),
        best,
        rec("default", 40, OK, 5.0, step="descent", cut=1.0),
        rec("hiutil", 48, OK, 6.7, cut=1.0),
        rec("hiutil", 128, OOM, 1.9),
        rec("hiutil", 32, Status.ERROR, 3.0),
    ]
    line = spent(records, best)
    assert line.startswith("spent 55.5 s: ")
    assert line.endswith(
        "the pick's window 34.8 s (1 launch), failing probes 6.0 s (3 launches), cut once out of reach 6.7 s "
        "(1 launch), insurance 5.0 s (1 launch), errors 3.0 s (1 launch)"
    )


def test_the_picks_recheck_counts_as_the_pick_and_a_reused_trial_costs_nothing() -> None:
    best = rec("default", 64, OK, 30.0)
    again = rec("default", 64, OK, 31.0, step="recheck")
    reused = rec("hiutil", 64, OK, 40.0)
    reused.info["reused_from"] = "20261127_010101"
    assert purpose(again, best) == "the pick's window"
    assert spent([best, again, reused], best) == "spent 61.0 s: the pick's window 61.0 s (2 launches)"
    assert spent([reused], None) == ""


def test_with_no_pick_a_full_window_is_measured_in_full() -> None:
    assert spent([rec("default", 64, OK, 30.0)], None) == "spent 30.0 s: other fits, whole window 30.0 s (1 launch)"
