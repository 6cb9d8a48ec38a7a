"""Turn-taking between two processes on one storage (a journal file, a real PostgreSQL): one claim wins, a waiter
wakes on the outcome."""

from __future__ import annotations

import logging
import threading

import optuna
import pytest

from ladder.core.records import Status, TrialRecord
from ladder.storage import studies
from tests.helpers import wait_for
from tests.unit.test_turns import VARIANTS, process, record


@pytest.mark.parametrize("other_looks", ["before-my-begin", "between-my-begin-and-my-look"])
def test_of_two_processes_claiming_at_once_exactly_one_gets_a_trial_the_older(
    where: str, other_looks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes that decided at the same moment: whichever way their begins and looks interleave, one trial
    runs, the older one; the other claim gets nothing and leaves no live trial."""
    me, other = process(where), process(where)
    theirs: list[optuna.Trial | None] = []
    real_begin, inside = studies.begin, [False]

    def begin(*args, **kwargs):  # type: ignore[no-untyped-def]
        if inside[0]:  # the other's claim, run from inside mine
            return real_begin(*args, **kwargs)
        inside[0] = True
        if other_looks == "before-my-begin":
            theirs.append(other.claim("default", 64, VARIANTS, {}))
            return real_begin(*args, **kwargs)
        mine = real_begin(*args, **kwargs)
        theirs.append(other.claim("default", 64, VARIANTS, {}))
        return mine

    monkeypatch.setattr(studies, "begin", begin)
    mine = me.claim("default", 64, VARIANTS, {})
    (their,) = theirs
    claimed = [t for t in (mine, their) if t is not None]
    assert len(claimed) == 1
    assert claimed[0].number == min(t.number for t in me.study.trials())  # the older one
    assert [t.number for t in me.running()] == [claimed[0].number]
    assert [t.number for t in other.running()] == [claimed[0].number]


def test_wait_returns_once_the_other_trial_has_its_outcome_with_that_outcome(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    me, other = process(where), process(where)
    running = studies.begin(other.study, "default", 256, VARIANTS, {})
    got: list[list[TrialRecord]] = []
    caplog.set_level(logging.INFO, logger="ladder.storage.turns")
    waiter = threading.Thread(target=lambda: got.append(me.wait()))
    waiter.start()
    try:
        wait_for(lambda: "waiting for its outcome before deciding" in caplog.text, timeout_s=60)
        assert got == []  # still waiting: the other's trial has no outcome yet
        studies.finish(other.study, running, record(256, Status.OOM_OR_NCCL), None)
    finally:
        waiter.join(timeout=60)
    assert [[(r.num_envs, r.status) for r in records] for records in got] == [[(256, Status.OOM_OR_NCCL)]]
    assert f"trial {running.number} (default e256) is running in another process (pid" in caplog.text


def test_a_waiter_is_given_each_trial_that_lands_while_the_owner_runs_its_next(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An owner that runs trials back to back (its next begun before the waiter looks again) leaves no moment free
    of them; the waiter is given each outcome as it lands, not all of them once the owner is done."""
    me, other = process(where), process(where)
    first = studies.begin(other.study, "default", 256, VARIANTS, {})
    landed: list[list[tuple[int, Status]]] = []
    got: list[list[TrialRecord]] = []

    def shown(records: list[TrialRecord]) -> None:
        landed.append([(r.num_envs, r.status) for r in records])

    caplog.set_level(logging.INFO, logger="ladder.storage.turns")
    waiter = threading.Thread(target=lambda: got.append(me.wait(landed=shown)))
    waiter.start()
    try:
        wait_for(lambda: f"trial {first.number} (default e256) is running" in caplog.text, timeout_s=60)
        second = studies.begin(other.study, "default", 128, VARIANTS, {})  # begun before the first ends
        studies.finish(other.study, first, record(256, Status.OOM_OR_NCCL), None)
        wait_for(lambda: bool(landed), timeout_s=60)
        assert got == []  # still waiting: e128 runs
        assert landed == [[(256, Status.OOM_OR_NCCL)]]
        studies.finish(other.study, second, record(128, Status.OK), None)
    finally:
        waiter.join(timeout=60)
    assert [[(r.num_envs, r.status) for r in records] for records in got] == [
        [(256, Status.OOM_OR_NCCL), (128, Status.OK)]
    ]
