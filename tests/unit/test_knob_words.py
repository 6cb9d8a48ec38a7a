"""Messages name the sweep's knob (`ladder.knob`): the words written for num_envs, said of another knob."""

from __future__ import annotations

from ladder.core import caseclass
from ladder.core.walk import Outcome, Standing
from ladder.ui.summary import walk_state


def test_a_broken_row_of_another_knob_says_stepping_that_knob_down_will_not_help() -> None:
    row = {"status": "error", "knob": "num_actors", "evidence": "ValueError: num_envs must be even", "trial_dir": "t1"}
    cls, action = caseclass.classify_row(row)
    assert cls is caseclass.CaseClass.BROKEN
    assert action == (
        "fix the configuration: ValueError: num_envs must be even (see t1); stepping num_actors down will not help"
    )
    assert "not num_actors (" in caseclass.broken_action(row, caseclass.NOT_NUM_ENVS)


def test_the_default_knob_keeps_its_words() -> None:
    row = {"status": "error", "evidence": "boom", "trial_dir": "t1"}
    assert caseclass.broken_action(row) == "fix the configuration: boom (see t1); stepping num_envs down will not help"
    assert caseclass.classify_row({"status": "oom_or_nccl"})[1] == caseclass.ACTIONS[caseclass.CaseClass.UNSTABLE]
    assert "step num_actors down" in caseclass.classify_row({"status": "oom_or_nccl", "knob": "num_actors"})[1]


def test_a_walk_that_is_not_its_knob_says_so() -> None:
    walk = Standing("default", Outcome.UNRELATED, 4)
    assert walk_state(walk, "num_actors").startswith("not num_actors: it failed at num_actors=4, the lowest rung")
    assert walk_state(walk, "num_envs").startswith("not num_envs: it failed at e4, the lowest rung")
