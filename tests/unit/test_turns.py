"""Turn-taking between the processes that run one case's walk (`ladder.storage.turns`), and a sweep step that loads the
case's records once.

The unit tests use a real Optuna journal storage in a temporary folder; two processes are stood in for by two study
handles (and two `Turns`) on the one storage. The real processes are in test_resume and test_faults.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from optuna.trial import TrialState

from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.storage import studies
from ladder.storage.heartbeat import HEARTBEAT_ATTR, Owner
from ladder.storage.turns import Turns

VARIANTS = ("default", "hiutil")


@pytest.fixture
def journal(tmp_path: Path) -> str:
    """The journal file in a sweep folder (the rule tables: the storage contract is `where`'s)."""
    studies.open_storage(None, tmp_path)
    return str(tmp_path)


def process(where: str) -> Turns:
    """One process's turn-taking on the case: its own handle on the storage (short polls: a unit test waits)."""
    return Turns(studies.open_study(studies.open_storage_at(where), "amp_pi_plus", "s"), stale_after_s=300, poll_s=0.05)


def record(num_envs: int, status: Status = Status.OK) -> TrialRecord:
    return TrialRecord(
        "amp_pi_plus",
        "amp",
        "default",
        num_envs,
        Phase.PROBE,
        status,
        Reason.NONE,
        "",
        {"min_avg_util": 40.0},
        {"gpu_name": "cpu"},
    )


def states(turns: Turns) -> list[tuple[int, TrialState, bool]]:
    """(number, state, withdrawn) of every trial of the case, as the storage holds them."""
    return [(t.number, t.state, bool(t.user_attrs.get("withdrawn"))) for t in turns.study.trials()]


# What another process left in the storage before this one looks: each a trial begun by `other` (then changed).
def _live(other: Turns) -> None:
    studies.begin(other.study, "default", 256, VARIANTS, {})


def _finished(other: Turns) -> None:
    studies.finish(other.study, studies.begin(other.study, "default", 256, VARIANTS, {}), record(256), 40.0)


def _withdrawn(other: Turns) -> None:
    other.withdraw(studies.begin(other.study, "default", 256, VARIANTS, {}))


def _pid_reused(other: Turns) -> None:  # its owner's pid now belongs to another process: the owner is dead
    trial = studies.begin(other.study, "default", 256, VARIANTS, {})
    other.study.storage.set_trial_user_attr(trial.trial_id, "owner_started", Owner.here().started - 3600)


def _remote(age_s: float) -> Callable[[Turns], None]:
    def left(other: Turns) -> None:  # run by another host, its last heartbeat `age_s` ago
        trial = studies.begin(other.study, "default", 256, VARIANTS, {})
        other.study.storage.set_trial_user_attr(trial.trial_id, "owner_host", "another-node")
        other.study.storage.set_trial_user_attr(trial.trial_id, HEARTBEAT_ATTR, time.time() - age_s)

    return left


def _nothing(other: Turns) -> None:
    pass


# (what the other process left, whether it holds the turn, the records this one then decides from)
LEFT = [
    pytest.param(_nothing, True, [], id="nothing"),
    pytest.param(_live, False, None, id="live-trial"),
    pytest.param(_finished, True, [(256, Status.OK)], id="finished"),
    pytest.param(_withdrawn, True, [], id="withdrawn"),
    pytest.param(_pid_reused, True, [], id="dead-owner"),
    pytest.param(_remote(5), False, None, id="remote-fresh"),
    pytest.param(_remote(3600), True, [], id="remote-stale"),
]


@pytest.mark.parametrize(("left", "free", "seen"), LEFT)
def test_now_gives_the_records_only_while_no_live_owner_runs_a_trial(
    journal: str, left: Callable[[Turns], None], free: bool, seen: list | None
) -> None:
    me, other = process(journal), process(journal)
    left(other)
    got = me.now()
    assert (got is not None) is free
    assert seen is None or [(r.num_envs, r.status) for r in got or []] == seen


@pytest.mark.parametrize(("left", "free", "seen"), LEFT)
def test_a_claim_gets_its_trial_unless_an_older_live_trial_runs_and_then_leaves_no_trace(
    journal: str, left: Callable[[Turns], None], free: bool, seen: list | None
) -> None:
    me, other = process(journal), process(journal)
    left(other)
    before = len(states(me))
    claimed = me.claim("default", 64, VARIANTS, {"trial_id": "t1"})
    assert (claimed is not None) is free
    mine = states(me)[before]
    if claimed is not None:
        assert mine == (claimed.number, TrialState.RUNNING, False)
        assert claimed.number in [t.number for t in me.running()]
        assert me.study.trials()[claimed.number].user_attrs["trial_id"] == "t1"
    else:  # withdrawn: ended with no outcome, no record, and nobody waits on it
        assert mine[1:] == (TrialState.FAIL, True)
        assert mine[0] not in [t.number for t in me.running()]
        assert all(r.num_envs != 64 for r in studies.records(me.study))
        assert studies.mark_abandoned(me.study) == 0  # nor is it taken for abandoned


@pytest.mark.parametrize(("left", "free", "seen"), [row for row in LEFT if row.values[1]])
def test_wait_does_not_wait_where_no_live_owner_runs_a_trial(
    journal: str, left: Callable[[Turns], None], free: bool, seen: list
) -> None:
    me, other = process(journal), process(journal)
    left(other)
    assert [(r.num_envs, r.status) for r in me.wait()] == seen


# ---------------------------------------------------------------- a sweep step loads the case's records once
