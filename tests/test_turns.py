"""Turn-taking between the processes that run one case's walk (`ladder.storage.turns`), and a sweep step that loads the
case's records once.

The unit tests use a real Optuna journal storage in a temporary folder; two processes are stood in for by two study
handles (and two `Turns`) on the one storage. The real processes are in test_resume and test_faults.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import optuna
import pytest
from hydra import compose, initialize_config_dir
from optuna.trial import TrialState

from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.runner.machine import find_machine
from ladder.settings.argv import known_cases
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import register, settings_from
from ladder.storage import studies
from ladder.storage.heartbeat import HEARTBEAT_ATTR, Owner
from ladder.storage.turns import Turns
from ladder.sweep import loop as sweep
from ladder.sweep import resume
from ladder.ui.view import PlainView
from tests.helpers import wait_for

VARIANTS = ("default", "hiutil")


@pytest.fixture(params=["journal", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The journal file in a sweep folder, and a PostgreSQL database (skipped, with the reason, where no server can
    be started): each storage the sweep supports."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    studies.open_storage(None, tmp_path)
    return str(tmp_path)


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


@pytest.mark.parametrize(("left", "free", "seen"), [row for row in LEFT if row.values[1]])
def test_wait_does_not_wait_where_no_live_owner_runs_a_trial(
    journal: str, left: Callable[[Turns], None], free: bool, seen: list
) -> None:
    me, other = process(journal), process(journal)
    left(other)
    assert [(r.num_envs, r.status) for r in me.wait()] == seen


# ---------------------------------------------------------------- a sweep step loads the case's records once

STEP = [
    "case=amp_pi_plus",
    "device=cpu",
    "reuse=false",
    "profile=[default]",
    "ladder.rungs=[256,64]",
    "confirm_s=3",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "measure.stable_k=1",
    "measure.warmup_timeout_s=150",
    "measure.extend_unstable=false",
]


def test_a_sweep_step_loads_the_case_records_once_and_the_sweep_records_once_per_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real small sweep (proxy trainer, torchrun on CPU): 256 runs out of memory, 64 fits, its confirmation
    passes, and the step after finds nothing left. Each step reads the case's records once (its snapshot), and a
    step that ran a trial reads the sweep's once more for trials.tsv: at most 2 loads a step."""
    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*STEP, "sweep=loads", f"output_root={tmp_path}/output/train"])
    settings = settings_from(cfg, known_cases())
    paths, machine = resume.paths_for(settings, datetime.now(timezone.utc)), find_machine(settings)

    loads, per_step = [0], []
    real_records, real_step = studies.records, sweep._step

    def records(study):  # type: ignore[no-untyped-def]
        loads[0] += 1
        return real_records(study)

    def step(ctx, gate):  # type: ignore[no-untyped-def]
        before = loads[0]
        try:
            return real_step(ctx, gate)
        finally:
            per_step.append(loads[0] - before)

    monkeypatch.setattr(studies, "records", records)
    monkeypatch.setattr(sweep, "_step", step)
    summary = sweep.run(settings, paths, machine, PlainView())

    walked = [(r.num_envs, r.phase, r.status) for r in summary.records]
    assert walked == [
        (256, Phase.PROBE, Status.OOM_OR_NCCL),
        (64, Phase.PROBE, Status.OK),
        (64, Phase.CONFIRM, Status.OK),
    ]
    assert len(per_step) == 4, per_step  # three launches, then the step that finds nothing left
    assert max(per_step) <= 2 and per_step[-1] == 1, per_step
