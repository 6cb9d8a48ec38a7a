"""The sweep's storage: redacted URLs, one-write trial creation, heartbeats, and abandoned trials of dead owners."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ladder.core.errors import StorageError
from ladder.core.paths import JOURNAL
from ladder.core.records import Status
from ladder.runner import launch
from ladder.storage import studies as store
from ladder.storage.heartbeat import HEARTBEAT_ATTR, Owner
from ladder.sweep.context import end_abandoned
from tests.helpers import wait_for
from tests.unit.test_store import VARIANTS, _journal_with_trials, _values, record, state

# An orchestrator stand-in: opens the sweep's journal, leaves a trial RUNNING with a process of its own (in its own
# session, as torchrun is), and waits to be killed.
OWNER = textwrap.dedent(
    """
    import os, subprocess, sys
    from ladder.storage import studies as store
    study = store.open_study(store.open_storage_at(sys.argv[1]), "amp_pi_plus", "s")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                             env={**os.environ, "LADDER_TRIAL_ID": sys.argv[2]})
    store.begin(study, "default", 64, ("default", "hiutil"), {"case": "amp_pi_plus", "trial_id": sys.argv[2]})
    print("running", child.pid, flush=True)
    sys.stdin.read()
    """
)


def study_at(where: str, sweep: str = "s") -> store.CaseStudy:
    return store.open_study(store.open_storage_at(where), "amp_pi_plus", sweep)


# Opens the storage once all openers are released together (the first use of a database creates its tables).
OPENER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ladder.storage import studies as store
    go = Path(sys.argv[2])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    study = store.open_study(store.open_storage(sys.argv[1], Path("unused")), f"case{sys.argv[3]}", "s")
    print(study.study_name)
    """
)


def test_a_dead_owners_trial_is_interrupted_and_its_processes_killed(where: str) -> None:
    study = study_at(where)
    done = store.begin(study, "default", 256, VARIANTS, {})
    store.finish(study, done, record(256, Status.OOM_OR_NCCL), None)
    trial_id = f"test-store-{os.getpid()}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, where, trial_id], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().startswith("running")
        assert store.mark_abandoned(study, end=end_abandoned) == 0  # its owner is alive
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        assert len(launch.leftovers(trial_id)) == 1  # the trial's own process outlives its orchestrator
        assert store.mark_abandoned(study, end=end_abandoned) == 1  # the sweep ends what is left of it
        assert launch.leftovers(trial_id) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner.pid, signal.SIGKILL)
        for proc in launch.leftovers(trial_id):
            proc.kill()
    assert state(study, 0) == (TrialState.FAIL, "oom_or_nccl")  # finished: untouched
    assert state(study, 1) == (TrialState.FAIL, "interrupted")
    assert "owner process" in study.trials()[1].user_attrs["evidence"]
    got = [(r.num_envs, r.status) for r in store.records(study)]
    assert got == [(256, Status.OOM_OR_NCCL), (64, Status.INTERRUPTED)]
    assert store.mark_abandoned(study) == 0


def test_processes_opening_a_fresh_postgresql_database_at_once_all_succeed(tmp_path: Path, pg_url: str) -> None:
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, pg_url, str(go), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    assert all(p.stdout is not None and p.stdout.readline() == "ready\n" for p in procs)  # all at the start line
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    storage = store.open_storage(pg_url, tmp_path)
    assert sorted(optuna.get_all_study_names(storage)) == [f"s/case{i}" for i in range(6)]


# ---------------------------------------------------------------- the journal file: torn and garbled lines


@pytest.mark.parametrize(
    ("bad", "lost"),
    [(b"\x00\x00garbage\n", "unknown op"), (b'{"op_code":4,"wor\n', "op read from the fragment")],
    ids=["unknown_op", "op_from_fragment"],
)
def test_repair_keeps_every_readable_record_and_renumbers_past_a_lost_create(
    tmp_path: Path, bad: bytes, lost: str
) -> None:
    journal, _ = _journal_with_trials(tmp_path, 3)
    lines = journal.read_bytes().splitlines(keepends=True)
    create = [i for i, ln in enumerate(lines) if ln.startswith(b'{"op_code":4')][1]  # the second trial's create
    journal.write_bytes(b"".join([*lines[:create], bad, *lines[create + 1 :]]))
    done = subprocess.run([sys.executable, "-m", "ladder.repair", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # the lost trial's records go with it; the third trial keeps its own (not the second's) under the next id
    assert _values(tmp_path) == [(0, 0.0, {"k": 0}), (1, 2.0, {"k": 2})]
    aside = [json.loads(ln) for p in tmp_path.glob("journal.log.set-aside-*") for ln in p.read_text().splitlines()]
    assert [a["line"] for a in aside] == [create + 1, create + 2, create + 3]
    assert len(list(tmp_path.glob("journal.log.before-repair-*"))) == 1
    _journal_with_trials(tmp_path, 1)  # and it takes new records
    assert [v for _, v, _ in _values(tmp_path)] == [0.0, 2.0, 0.0]


def test_repair_recovers_a_record_glued_onto_a_torn_fragment(tmp_path: Path) -> None:
    journal, _ = _journal_with_trials(tmp_path, 2)
    lines = journal.read_bytes().splitlines(keepends=True)
    attr = [i for i, ln in enumerate(lines) if ln.startswith(b'{"op_code":8')][1]  # the second trial's attr
    glued = b'{"op_code":9,"worker_id":"tor' + lines[attr]  # what optuna's own writer made of a torn line
    journal.write_bytes(b"".join([*lines[:attr], glued, *lines[attr + 1 :]]))
    with pytest.raises(StorageError, match=f"line {attr + 1}"):
        store.open_storage(None, tmp_path)
    assert subprocess.run([sys.executable, "-m", "ladder.repair", str(tmp_path)], capture_output=True).returncode == 0
    assert _values(tmp_path) == [(0, 0.0, {"k": 0}), (1, 1.0, {"k": 1})]  # nothing of the trials lost


def test_repair_names_the_trials_whose_outcome_went_with_the_lines_set_aside(tmp_path: Path) -> None:
    """The second trial's finish record torn: the trial is kept, with no outcome; the repair says so, and that the
    resumed sweep no longer counts it and runs it again (which the resume then did, as 'left running')."""
    study = optuna.create_study(study_name="s/amp_pi_plus", storage=store.open_storage(None, tmp_path))
    for i in range(2):
        trial = study.ask()
        trial.set_user_attr("status", "ok")
        study.tell(trial, float(i))
    journal = tmp_path / JOURNAL
    lines = journal.read_bytes().splitlines(keepends=True)
    finish = [i for i, ln in enumerate(lines) if ln.startswith(b'{"op_code":6')][1]  # the second trial's state
    journal.write_bytes(b"".join([*lines[:finish], b'{"op_code":6,"wor\n', *lines[finish + 1 :]]))
    done = subprocess.run([sys.executable, "-m", "ladder.repair", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (
        "1 trial(s) lost their outcome with the lines set aside (s/amp_pi_plus #1): the resumed sweep no longer "
        "counts them and runs their rungs again" in done.stdout
    ), done.stdout
    assert _values(tmp_path) == [(0, 0.0, {"status": "ok"}), (1, None, {"status": "ok"})]


def test_repair_names_a_finished_trial_whose_status_went_with_the_lines_set_aside(tmp_path: Path) -> None:
    """A finished trial whose `status` attribute line is damaged: kept COMPLETE, but the sweep counts only trials
    with a status, so its rung silently ran again; the repair names it (a withdrawn claim, never counted, not)."""
    study = optuna.create_study(study_name="s/amp_pi_plus", storage=store.open_storage(None, tmp_path))
    for i in range(2):
        trial = study.ask()
        trial.set_user_attr("status", "ok")
        study.tell(trial, float(i))
    withdrawn = study.ask()
    withdrawn.set_user_attr("withdrawn", True)
    study.tell(withdrawn, state=TrialState.FAIL)
    journal = tmp_path / JOURNAL
    lines = journal.read_bytes().splitlines(keepends=True)
    status = [i for i, ln in enumerate(lines) if b'"status"' in ln][1]  # the second trial's
    journal.write_bytes(b"".join([*lines[:status], b'{"op_code":8,"wor\n', *lines[status + 1 :]]))
    done = subprocess.run([sys.executable, "-m", "ladder.repair", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 trial(s) lost their outcome with the lines set aside (s/amp_pi_plus #1):" in done.stdout, done.stdout


def test_repair_of_a_whole_journal_changes_nothing(tmp_path: Path) -> None:
    journal, _ = _journal_with_trials(tmp_path, 2)
    before = journal.read_bytes()
    done = subprocess.run([sys.executable, "-m", "ladder.repair", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0 and "nothing to repair" in done.stdout
    assert journal.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".journal.log.lock", "journal.log"]  # no side file


# ---------------------------------------------------------------- the storage password off the command line


def test_repair_past_a_lost_study_create_keeps_the_other_studys_trials(tmp_path: Path) -> None:
    storage = store.open_storage(None, tmp_path)
    for case in ("amp_pi_plus", "add_pi_plus"):
        study = optuna.create_study(study_name=f"s/{case}", storage=storage)
        for i in range(2):
            trial = study.ask()
            trial.set_user_attr("k", f"{case}{i}")
            study.tell(trial, float(i))
    journal = tmp_path / JOURNAL
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join([b'{"op_code":0,"wor\n', *lines[1:]]))  # the first study's create, torn
    assert subprocess.run([sys.executable, "-m", "ladder.repair", str(tmp_path)], capture_output=True).returncode == 0
    storage = store.open_storage_at(str(tmp_path))
    assert optuna.get_all_study_names(storage) == ["s/add_pi_plus"]
    kept = optuna.load_study(study_name="s/add_pi_plus", storage=storage).get_trials(deepcopy=False)
    assert [(t.number, t.value, t.user_attrs) for t in kept] == [
        (0, 0.0, {"k": "add_pi_plus0"}),
        (1, 1.0, {"k": "add_pi_plus1"}),
    ]


def test_the_stored_heartbeat_moves_while_the_trial_runs(where: str) -> None:
    study = study_at(where)
    trial = store.begin(study, "default", 64, VARIANTS, {})

    def stored() -> float:
        return float(study.trials()[trial.number].user_attrs[HEARTBEAT_ATTR])

    first = stored()
    with store.heartbeat(study, trial, every_s=0.05):
        wait_for(lambda: stored() > first)
    store.finish(study, trial, record(64, Status.OK), 40.0)
    assert state(study, trial.number) == (TrialState.COMPLETE, "ok")


def test_a_reused_pid_and_a_stale_remote_heartbeat_are_abandoned(where: str) -> None:
    study = study_at(where)
    storage = study.storage
    trials = [store.begin(study, "default", n, VARIANTS, {}) for n in (256, 128, 64, 48)]
    mine, reused, remote_stale, remote_fresh = trials
    storage.set_trial_user_attr(reused.trial_id, "owner_started", Owner.here().started - 3600)
    for trial, age in ((remote_stale, 3600), (remote_fresh, 5)):
        storage.set_trial_user_attr(trial.trial_id, "owner_host", "another-node")
        storage.set_trial_user_attr(trial.trial_id, HEARTBEAT_ATTR, time.time() - age)
    assert store.mark_abandoned(study, stale_after_s=300) == 2
    assert [state(study, t.number)[1] for t in trials] == ["", "interrupted", "interrupted", ""]
    assert mine.number == 0


def test_sweep_records_keep_sweeps_apart_in_one_storage(where: str) -> None:
    storage = store.open_storage_at(where)
    for sweep, case, n in (("s1", "amp_pi_plus", 64), ("s1", "add_pi_plus", 48), ("s2", "amp_pi_plus", 32)):
        study = store.open_study(storage, case, sweep)
        store.finish(study, store.begin(study, "default", n, VARIANTS, {}), record(n, Status.OK), 40.0)
    assert [r.num_envs for r in store.sweep_records(storage, "s1")] == [48, 64]  # by case
    assert [r.num_envs for r in store.sweep_records(storage, "s2")] == [32]
    assert len(store.sweep_records(storage)) == 3
    assert optuna.get_all_study_names(storage) == ["s1/amp_pi_plus", "s1/add_pi_plus", "s2/amp_pi_plus"]


def test_a_profile_added_to_the_config_later_does_not_break_resuming_a_sweep(where: str) -> None:
    study = study_at(where)
    store.begin(study, "default", 64, ("default", "hiutil"), {})
    later = store.begin(study, "hiutil", 64, ("default", "hiutil", "hiutil40"), {})  # a new profile file appeared
    frozen = study.trials()[later.number]
    assert frozen.params["variant"] == "hiutil"
    assert frozen.distributions["variant"].choices == ("default", "hiutil")  # the set the sweep started with


@pytest.mark.parametrize("name", ["trials.tsv", "journal.log"])
def test_repair_refuses_a_file_that_is_not_a_journal_and_changes_nothing(tmp_path: Path, name: str) -> None:
    """A trials.tsv (or a README) given to the repair by mistake: each of its lines would be set aside as
    unreadable and the file emptied. Refused, whatever the file's name, and the file left as it was."""
    given = tmp_path / name
    given.write_text("case\tnum_envs\tstatus\namp_pi_plus\t64\tok\namp_pi_plus\t128\toom_or_nccl\n")
    before = given.read_bytes()
    done = subprocess.run([sys.executable, "-m", "ladder.repair", str(given)], capture_output=True, text=True)
    assert done.returncode == 2, done.stdout
    assert (
        f"{given} is not an Optuna journal: 0 of its 3 line(s) are journal records; nothing was changed" in done.stderr
    )
    assert given.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [name]  # no side file, no lock
