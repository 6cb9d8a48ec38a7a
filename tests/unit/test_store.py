"""The sweep's storage: redacted URLs, one-write trial creation, heartbeats, and abandoned trials of dead owners."""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ladder.core.errors import StorageError
from ladder.core.paths import JOURNAL
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.runner import launch
from ladder.settings import credentials
from ladder.storage import studies as store
from ladder.storage.heartbeat import HEARTBEAT_ATTR, Heartbeat, Owner, abandoned_because
from tests.helpers import wait_for

VARIANTS = ("default", "hiutil")


def record(num_envs: int, status: Status) -> TrialRecord:
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


def journal_study(tmp_path: Path, sweep: str = "s") -> store.CaseStudy:
    return store.open_study(store.open_storage(None, tmp_path), "amp_pi_plus", sweep)


def state(study: store.CaseStudy, number: int) -> tuple[TrialState, str]:
    trial = study.trials()[number]
    return trial.state, str(trial.user_attrs.get("status", ""))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://ladder:s3cret@db:5432/sweeps", "postgresql://ladder:***@db:5432/sweeps"),
        ("postgresql+psycopg2://u:p%40ss@h/db?sslmode=require", "postgresql+psycopg2://u:***@h/db?sslmode=require"),
        ("postgresql://h/db?user=u&password=s3cret", "postgresql://h/db?user=u&password=***"),
        ("mysql+pymysql://u:@h/db", "mysql+pymysql://u:***@h/db"),
        ("postgresql://ladder@db/sweeps", "postgresql://ladder@db/sweeps"),
        ("sqlite:///out/study.db", "sqlite:///out/study.db"),
        (None, ""),
    ],
    ids=["password", "encoded-password", "query-password", "empty-password", "no-password", "sqlite", "none"],
)
def test_redact_hides_only_the_password(url: str | None, shown: str) -> None:
    assert credentials.redact(url) == shown


def test_an_unreachable_storage_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://ladder:pw-{os.getpid()}-x@127.0.0.1:{launch.free_port()}/sweeps"
    with pytest.raises(StorageError) as err:
        store.open_storage(url, tmp_path)
    text = str(err.value) + repr(err.value.__cause__) + repr(err.value.__context__)
    assert f"pw-{os.getpid()}-x" not in text
    assert "postgresql://ladder:***@127.0.0.1" in text


HERE = Owner("node1", "boot-a", "pid:[1]", 100, 1000.0)


@pytest.mark.parametrize(
    ("owner", "pid_started", "last_beat", "why"),
    [
        (HERE, 1000.0, 0.0, ""),
        (Owner("node1", "boot-a", "pid:[1]", 7, 990.0), None, 9999.0, "owner process 7 on node1 is gone"),
        (Owner("node1", "boot-a", "pid:[1]", 7, 990.0), 1500.0, 9999.0, "owner pid 7 on node1 now belongs to another"),
        (Owner("node1", "boot-a", "pid:[1]", 7, 990.0), 990.4, 0.0, ""),
        (Owner("node1", "boot-0", "pid:[1]", 7, 990.0), None, 9999.0, "host node1 rebooted since"),
        (Owner("node2", "boot-b", "pid:[1]", 7, 990.0), None, 9999.0, ""),
        (Owner("node2", "boot-b", "pid:[1]", 7, 990.0), None, 9000.0, "no heartbeat for 1000 s"),
        (Owner("node1", "boot-a", "pid:[2]", 7, 990.0), None, 9999.0, ""),
        (Owner("node1", "boot-a", "pid:[2]", 7, 990.0), None, 100.0, "no heartbeat for 9900 s"),
        (None, None, 9999.0, ""),
        (None, None, 0.0, "no heartbeat for 10000 s"),
    ],
    ids=[
        "alive",
        "pid-gone",
        "pid-reused",
        "same-start",
        "rebooted",
        "other-host-fresh",
        "other-host-stale",
        "other-container-fresh",
        "other-container-stale",
        "no-owner-fresh",
        "no-owner-stale",
    ],
)
def test_the_owner_liveness_rule(owner: Owner | None, pid_started: float | None, last_beat: float, why: str) -> None:
    verdict = abandoned_because(owner, HERE, pid_started, last_beat, now=10000.0, stale_after_s=300.0)
    assert verdict.startswith(why) and bool(verdict) == bool(why)


def test_begin_is_one_write_with_params_owner_and_heartbeat(tmp_path: Path) -> None:
    study = journal_study(tmp_path)
    before, began = (tmp_path / "journal.log").read_text().count("\n"), time.time()
    trial = store.begin(study, "hiutil", 48, VARIANTS, {"case": "amp_pi_plus", "trial_id": "t1"})
    ended = time.time()
    assert (tmp_path / "journal.log").read_text().count("\n") == before + 1
    frozen = study.trials()[trial.number]
    assert frozen.state is TrialState.RUNNING and frozen.params == {"variant": "hiutil", "num_envs": 48}
    attrs = frozen.user_attrs
    assert (attrs["owner_host"], attrs["owner_pid"], attrs["trial_id"]) == (Owner.here().host, os.getpid(), "t1")
    assert abs(attrs["owner_started"] - Owner.here().started) < 1e-6
    assert began <= attrs[HEARTBEAT_ATTR] <= ended  # its first heartbeat, written with it
    assert study.study_name == "s/amp_pi_plus" and study.user_attrs["sweep"] == "s"


def test_heartbeat_beats_until_it_exits_and_survives_a_failed_write(caplog: pytest.LogCaptureFixture) -> None:
    beats: list[float] = []
    ticks = itertools.count(1)

    def beat(now: float) -> None:
        if now == 2.0:
            raise ConnectionError("storage away")
        beats.append(now)

    with Heartbeat(beat, every_s=0.01, clock=lambda: float(next(ticks))):
        assert beats == [1.0]  # the first beat is written before the trial starts
        wait_for(lambda: len(beats) >= 3)
    assert beats[:3] == [1.0, 3.0, 4.0]
    assert not [t for t in threading.enumerate() if t.name == "ladder-heartbeat"]
    assert "heartbeat not written: ConnectionError" in caplog.text


def test_a_trial_taken_for_abandoned_while_it_ran_stays_interrupted(tmp_path: Path) -> None:
    study = journal_study(tmp_path)
    trial = store.begin(study, "default", 64, VARIANTS, {})
    study.storage.set_trial_user_attr(trial.trial_id, "owner_host", "another-node")
    study.storage.set_trial_user_attr(trial.trial_id, HEARTBEAT_ATTR, time.time() - 3600)
    assert store.mark_abandoned(study, stale_after_s=300) == 1
    store.finish(study, trial, record(64, Status.OK), 40.0)  # the late result does not overwrite the verdict
    assert state(study, trial.number) == (TrialState.FAIL, "interrupted")


def test_a_new_profile_in_an_old_sweep_on_a_database_is_a_clear_error(tmp_path: Path) -> None:
    study = store.open_study(store.open_storage_at(f"sqlite:///{tmp_path}/db.sqlite"), "amp_pi_plus", "s")
    store.begin(study, "default", 64, ("default", "hiutil"), {})
    with pytest.raises(StorageError, match="profile 'hiutil40' is not among the profiles") as err:
        store.begin(study, "hiutil40", 64, ("default", "hiutil", "hiutil40"), {})
    assert "sweep=<another name>" in err.value.fix


# ---------------------------------------------------------------- the journal file: torn and garbled lines


def _journal_with_trials(tmp_path: Path, n: int) -> tuple[Path, optuna.Study]:
    study = optuna.create_study(
        study_name="s/amp_pi_plus", storage=store.open_storage(None, tmp_path), load_if_exists=True
    )
    for i in range(n):
        trial = study.ask()
        trial.set_user_attr("k", i)
        study.tell(trial, float(i))
    return tmp_path / JOURNAL, study


def _values(tmp_path: Path) -> list[tuple[int, float | None, dict]]:
    study = optuna.load_study(study_name="s/amp_pi_plus", storage=store.open_storage_at(str(tmp_path)))
    return [(t.number, t.value, t.user_attrs) for t in study.trials]


def test_a_torn_tail_is_set_aside_before_the_next_append_with_its_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal, _ = _journal_with_trials(tmp_path, 2)
    with open(journal, "ab") as fh:
        fh.write(b'{"op_code":8,"worker_id":"tor')
    _, study = _journal_with_trials(tmp_path, 1)  # reads past the fragment, then appends
    assert [v for _, v, _ in _values(tmp_path)] == [0.0, 1.0, 0.0]
    sides = list(tmp_path.glob("journal.log.torn-*"))
    assert [p.read_bytes() for p in sides] == [b'{"op_code":8,"worker_id":"tor']
    assert "set aside" in caplog.text and sides[0].name in caplog.text


def test_a_complete_but_unreadable_last_line_is_set_aside_too(tmp_path: Path) -> None:
    journal, _ = _journal_with_trials(tmp_path, 1)
    with open(journal, "ab") as fh:
        fh.write(b'{"op_code": 9, broken\n')
    _journal_with_trials(tmp_path, 1)
    assert [v for _, v, _ in _values(tmp_path)] == [0.0, 0.0]
    assert [p.read_bytes() for p in tmp_path.glob("journal.log.torn-*")] == [b'{"op_code": 9, broken\n']


def test_an_unreadable_line_in_the_middle_is_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    journal, _ = _journal_with_trials(tmp_path, 2)
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join([*lines[:3], b"\x00\xffgarbage\n", *lines[3:]]))
    with pytest.raises(StorageError, match=rf"{journal}: line 4 cannot be read") as err:
        store.open_storage(None, tmp_path)
    assert f"python -m ladder.repair {tmp_path}" in str(err.value)
    with pytest.raises(StorageError, match="line 4"):
        store.open_storage_at(str(tmp_path))


# ---------------------------------------------------------------- the storage password off the command line


def test_a_password_moves_between_the_url_and_the_environment() -> None:
    url = "postgresql://u:p%40ss@h:5432/db?sslmode=require"
    bare, password = credentials.without_password(url)
    assert (bare, password) == ("postgresql://u@h:5432/db?sslmode=require", "p@ss")
    assert (
        credentials.with_password(bare, {credentials.PASSWORD_VAR: "p@ss"})
        == "postgresql://u:p%40ss@h:5432/db?sslmode=require"
    )
    assert credentials.with_password(url, {credentials.PASSWORD_VAR: "other"}) == url  # the URL's own password wins
    assert credentials.with_password(bare, {}) == bare


def test_a_whole_last_record_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    journal, _ = _journal_with_trials(tmp_path, 2)
    journal.write_bytes(journal.read_bytes()[:-1])  # the second trial's state, complete but for its newline
    assert [v for _, v, _ in _values(tmp_path)] == [0.0, None]  # Optuna does not read it yet
    _journal_with_trials(tmp_path, 1)
    assert [v for _, v, _ in _values(tmp_path)] == [0.0, 1.0, 0.0]
    assert not list(tmp_path.glob("journal.log.torn-*"))
