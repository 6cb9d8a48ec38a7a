"""Crash-safe resume and shared storage, end to end with `python -m ladder.search` (real torchrun trials on CPU).

A sweep killed with SIGKILL mid-trial and resumed ends with the records of a sweep never interrupted: no finished
trial lost or duplicated, no process of the killed trial left. Two sweeps of different cases share one PostgreSQL
storage and one results folder, and the storage password appears nowhere they print or write.
"""

from __future__ import annotations

import contextlib
import glob
import os
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest
from hydra import compose, initialize_config_dir

from ladder.core.errors import ExitCode
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.runner import launch
from ladder.runner.machine import find_machine
from ladder.settings.argv import known_cases
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import register, settings_from
from ladder.storage import reuse, studies, sweeps
from ladder.storage.tsv import read_tsv
from ladder.sweep import loop as sweep
from ladder.sweep import resume
from ladder.ui.view import PlainView
from tests.conftest import PgServer
from tests.helpers import LIGHT_PROXY, wait_for

FIRST = "amp_pi_plus"
FAST = [
    "profile=[default]",
    "ladder.rungs=[256,64]",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "workload.nproc=1",  # one rank, started directly: the ranks are not what these tests are about
    "history=false",  # sweeps of one output root in the order they ran, each walked as if alone
    LIGHT_PROXY,
]

# The entry point without Hydra's command line, for a case that is not a file in conf/case: the same composition,
# validation (less the known-case check) and sweep as `python -m ladder.search`.
COMPOSED = textwrap.dedent(
    """
    import sys
    from hydra import compose, initialize_config_dir
    from ladder.settings.config import register, settings_from
    from ladder.settings.catalog import CONF_DIR
    from ladder.search import execute
    register()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=sys.argv[1:])
    sys.exit(execute(settings_from(cfg)))
    """
)


def search(cwd: Path, *overrides: str, composed: bool = False, reuse: bool = False) -> subprocess.Popen[str]:
    entry = ["-c", COMPOSED] if composed else ["-m", "ladder.search"]
    # the CPU path on any host; each sweep runs its own trials unless told (these tests compare sweeps)
    argv = [
        sys.executable,
        *entry,
        "device=cpu",
        f"reuse={str(reuse).lower()}",
        f"output_root={cwd}/output/train",
        *overrides,
    ]
    return subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], timeout_s: float = 300) -> str:
    out, _ = proc.communicate(timeout=timeout_s)
    assert proc.returncode == 0, out
    return out


def sweep_dir(cwd: Path, name: str) -> Path:
    return cwd / "output" / "train" / f"case_gpu_bench_{name}"


def trial_ids(pid: int) -> set[str]:
    """The LADDER_TRIAL_ID of every process below `pid`."""
    found = set()
    for proc in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found.add(proc.environ().get(launch.TRIAL_ID_VAR, ""))
    return found - {""}


def outcome(records: list[TrialRecord], interrupted: bool = False) -> list[tuple[str, str, str, str]]:
    keep = [r for r in records if interrupted or r.status is not Status.INTERRUPTED]
    return [(r.case, r.profile, str(r.num_envs), str(r.status)) for r in keep]


def tsv_outcome(path: Path) -> list[tuple[str, str, str, str]]:
    return [(r["case"], r["variant"], r["num_envs"], r["status"]) for r in read_tsv(path)]


def test_sigkill_mid_trial_then_resume_matches_an_uninterrupted_run(tmp_path: Path) -> None:
    finish(search(tmp_path, f"case={FIRST}", *FAST, "sweep=whole"))
    cut = search(tmp_path, f"case={FIRST}", *FAST, "sweep=cut")
    progress = str(sweep_dir(tmp_path, "cut") / "trials" / "*" / "*" / "progress.jsonl")
    wait_for(lambda: any(Path(p).read_text().strip() for p in glob.glob(progress)), timeout_s=180)
    ids = trial_ids(cut.pid)
    assert ids, "the running trial's processes carry its id"
    cut.kill()
    cut.communicate(timeout=30)

    resumed = finish(search(tmp_path, f"case={FIRST}", *FAST, "sweep=cut"))
    assert {i: launch.leftovers(i) for i in ids} == {i: [] for i in ids}, resumed
    whole = studies.sweep_records(studies.open_storage_at(str(sweep_dir(tmp_path, "whole"))))
    got = studies.sweep_records(studies.open_storage_at(str(sweep_dir(tmp_path, "cut"))))
    assert outcome(got) == outcome(whole)  # none lost, none duplicated
    assert [r.status for r in got].count(Status.INTERRUPTED) == 1
    assert len({r.number for r in got}) == len(got)
    assert tsv_outcome(sweep_dir(tmp_path, "cut") / "trials.tsv") == outcome(got, interrupted=True)
    best = [tsv_outcome(sweep_dir(tmp_path, name) / "best_by_case.tsv") for name in ("whole", "cut")]
    assert best[0] == best[1] and len(best[0]) == 1


def test_resume_latest_picks_the_sweep_started_last_and_redoes_nothing(tmp_path: Path) -> None:
    older, newer = sweep_dir(tmp_path, "20260101_000000"), sweep_dir(tmp_path, "mine")
    older.mkdir(parents=True)
    study = studies.open_study(studies.open_storage(None, newer), FIRST, "mine")
    sweeps.note_latest(newer.parent, "mine")  # as ladder.search does when it starts or resumes a sweep
    trial = studies.begin(study, "default", 64, ("default", "hiutil"), {"case": FIRST, "method": "amp"})
    done = TrialRecord(
        FIRST,
        "amp",
        "default",
        64,
        Phase.PROBE,
        Status.OK,
        Reason.NONE,
        "",
        {"min_avg_util": 40.0},
        {"trial_dir": "trials/amp_pi_plus/default_e64_probe_1"},
    )
    studies.finish(study, trial, done, 40.0)
    out = finish(search(tmp_path, f"case={FIRST}", "profile=[default]", "ladder.rungs=[64]", "resume=latest"))
    assert "sweep mine" in out
    assert [r.status for r in studies.records(study)] == [Status.OK]
    assert not older.joinpath("journal.log").exists()


def second_case() -> tuple[str, bool]:
    """Another case for the second sweep: a conf/case file when there is one, else a renamed copy of the first
    (which only the composed entry point accepts: the command line rejects a case with no file)."""
    others = [c for c in known_cases() if c != FIRST]
    same_robot = [c for c in others if c.endswith("_pi_plus")]
    return ((same_robot or others)[0], False) if others else (f"{FIRST}_copy", True)


def test_two_sweeps_on_different_cases_share_one_postgresql_storage_and_results(tmp_path: Path, pg_url: str) -> None:
    other, composed = second_case()
    shared = [*FAST, "sweep=shared", f"storage={pg_url}"]
    first = search(tmp_path, f"case={FIRST}", *shared)
    second = (
        search(tmp_path, f"case={FIRST}", f"case.name={other}", *shared, composed=True)
        if composed
        else search(tmp_path, f"case={other}", *shared)
    )
    outs = [finish(first), finish(second)]

    root = sweep_dir(tmp_path, "shared")
    records = studies.sweep_records(studies.open_storage(pg_url, root), "shared")
    assert {r.case for r in records} == {FIRST, other}
    assert all(r.status is not Status.INTERRUPTED for r in records)
    assert sorted(tsv_outcome(root / "trials.tsv")) == sorted(outcome(records))  # the last writer saw them all
    assert sorted(r["case"] for r in read_tsv(root / "best_by_case.tsv")) == sorted([FIRST, other])
    assert not (root / "journal.log").exists()

    password = pg_url.split(":")[2].split("@")[0]
    assert all(password not in out for out in outs)
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert leaks == []


def test_two_processes_on_one_sweep_and_case_take_turns_and_run_nothing_twice(tmp_path: Path) -> None:
    """The same command started twice at once (two terminals, two hosts on one storage): the walk is the case's
    own, so the two take turns, each deciding from the other's finished trials; no rung is launched twice."""
    same = [f"case={FIRST}", *FAST, "sweep=twice"]
    outs = [finish(p) for p in [search(tmp_path, *same), search(tmp_path, *same)]]

    root = sweep_dir(tmp_path, "twice")
    records = studies.sweep_records(studies.open_storage(None, root), "twice")
    launched = [(r.profile, r.num_envs, str(r.phase)) for r in records]
    assert sorted(launched) == [("default", 64, "probe"), ("default", 256, "probe")], outs
    assert sorted(p.name for p in (root / "trials" / FIRST).iterdir()) == [
        "default_e256_probe_1",
        "default_e64_probe_1",
    ]
    assert all("best: amp_pi_plus    default  e64" in out for out in outs), outs
    # each shows every trial once as a row: as it lands, or, for one already finished when that process started (a
    # slow start on a busy machine), under the line that says what it found in storage
    for out in outs:
        rows = [ln for ln in out.splitlines() if ln.startswith("amp_pi_plus    default  e")]
        assert [r.split()[2:4] for r in rows] == [["e256", "oom_or_nccl"], ["e64", "ok"]], outs

    # again, as a new sweep that reuses the first: the trials are copied in once, and nothing launches
    again = [f"case={FIRST}", *FAST, "sweep=again"]
    outs = [finish(p) for p in [search(tmp_path, *again, reuse=True), search(tmp_path, *again, reuse=True)]]
    rows = read_tsv(sweep_dir(tmp_path, "again") / "trials.tsv")
    assert sorted((r["variant"], r["num_envs"]) for r in rows) == [("default", "256"), ("default", "64")], outs
    assert all(r["why"].startswith("reused from twice#") for r in rows)
    assert sorted(p.name for p in (sweep_dir(tmp_path, "again") / "trials" / FIRST).iterdir()) == [
        "default_e256_probe_1",
        "default_e64_probe_1",
    ]  # each copied in once, by one of the two


def test_sweeps_reusing_one_earlier_sweep_at_one_moment_copy_each_trial_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sweeps (threads standing in for two processes, each with its own storage handle) reach the reuse step
    together: one copies while the other waits, and then finds the copies there. Each thread, once it may copy,
    waits up to a second for the other to get there too; only a missing exclusion lets both in at once."""
    finish(search(tmp_path, f"case={FIRST}", *FAST, "sweep=first"))
    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                f"case={FIRST}",
                *FAST,
                "sweep=again",
                "device=cpu",
                "reuse=true",
                f"output_root={tmp_path}/output/train",
            ],
        )
    settings = settings_from(cfg, known_cases())
    paths, machine = resume.paths_for(settings, datetime.now(timezone.utc)), find_machine(settings)

    read_both = threading.Barrier(2)  # both have read the earlier sweep before either may copy
    inside, most, both_in, count = [0], [0], threading.Event(), threading.Lock()
    real_read, real_pick = reuse.earlier_records, reuse.pick

    def read(*args: object) -> list[TrialRecord]:
        found = real_read(*args)  # type: ignore[arg-type]
        read_both.wait(timeout=60)
        return found

    def pick(*args: object) -> list[TrialRecord]:
        with count:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            if inside[0] == 2:
                both_in.set()
        both_in.wait(timeout=1.0)
        try:
            return real_pick(*args)  # type: ignore[arg-type]
        finally:
            with count:
                inside[0] -= 1

    monkeypatch.setattr(reuse, "earlier_records", read)
    monkeypatch.setattr(reuse, "pick", pick)
    errors: list[BaseException] = []

    def one() -> None:
        try:
            sweep.run(settings, paths, machine, PlainView())
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and most[0] == 1
    records = studies.sweep_records(studies.open_storage(None, paths.sweep_dir), "again")
    assert sorted((r.profile, r.num_envs) for r in records) == [("default", 64), ("default", 256)]
    assert all(r.info["reused_from"].startswith("first#") for r in records)


# ---------------------------------------------------------------- unwritable places, and no password printed


def _ladder(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ladder.search", "device=cpu", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@contextlib.contextmanager
def read_only_mount(where: Path):
    """A read-only tmpfs at `where` (root only), so that writes fail with EROFS as on a read-only share."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(where)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.mark.parametrize("kind", ["missing_under_proc", "read_only_mount"])
def test_an_unwritable_output_root_is_one_line_naming_it_and_the_fix(tmp_path: Path, kind: str) -> None:
    with contextlib.ExitStack() as stack:
        ro = kind == "read_only_mount"
        root = str(stack.enter_context(read_only_mount(tmp_path / "ro"))) if ro else "/proc/nope"
        before = sorted(p.name for p in tmp_path.iterdir())
        done = _ladder(tmp_path, f"output_root={root}/out", "sweep=x")
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert f"output_root={root}/out" in done.stderr and "fix: set output_root=" in done.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written anywhere else


def test_hydra_never_prints_a_storage_password(tmp_path: Path) -> None:
    for cfg in ("job", "all"):
        done = _ladder(tmp_path, "storage=postgresql://u:s3kr1t@db.example/ladder", "--cfg", cfg)
        assert done.returncode == 0, done.stderr
        assert "storage: postgresql://u@db.example/ladder" in done.stdout
        assert "s3kr1t" not in done.stdout + done.stderr


OUTAGE_S = 5.0


def test_a_storage_server_restarted_mid_sweep_is_waited_for_and_nothing_is_lost_or_twice(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    """The PostgreSQL server stops while a trial runs and starts again a few seconds later: the sweep says the storage
    is unreachable, waits, says it is back, and finishes with the records of a sweep never interrupted."""
    proc = search(tmp_path, f"case={FIRST}", *FAST, "sweep=outage", f"storage={pg_url}", "heartbeat_s=1")
    progress = str(sweep_dir(tmp_path, "outage") / "trials" / "*" / "*" / "progress.jsonl")
    try:
        wait_for(lambda: any(Path(p).read_text().strip() for p in glob.glob(progress)), timeout_s=180)
        pg_server.stop()
        try:
            wait_for(lambda: "unreachable" in "".join(_logged(tmp_path)), timeout_s=60)
            time.sleep(OUTAGE_S)  # the outage's length, as injected: the sweep waits it out
        finally:
            pg_server.start()
        out = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "storage postgresql://ladder@" in out and "unreachable" in out and "back after" in out, out
    records = studies.sweep_records(studies.open_storage(pg_url, tmp_path), "outage")
    assert outcome(records) == [(FIRST, "default", "256", "oom_or_nccl"), (FIRST, "default", "64", "ok")], out
    assert tsv_outcome(sweep_dir(tmp_path, "outage") / "trials.tsv") == outcome(records)
    assert pg_url.split(":")[2].split("@")[0] not in out  # the password is never printed


def _logged(root: Path) -> list[str]:
    """What the sweeps under `root` logged so far (Hydra's job log of each run)."""
    return [p.read_text(errors="replace") for p in (root / "output" / "train" / "hydra").glob("*/*.log")]


def test_a_storage_server_down_past_the_wait_stops_the_sweep_with_code_6_and_the_same_command_resumes(
    tmp_path: Path, pg_server: PgServer, pg_url: str
) -> None:
    """The server stops while a trial runs and stays down past `storage_wait_s`: the sweep stops with exit code 6
    and a line that says so, nothing of it left running; once the server is back the same command resumes to the
    records of a sweep never interrupted."""
    argv = (f"case={FIRST}", *FAST, "sweep=down", f"storage={pg_url}", "heartbeat_s=1", "storage_wait_s=3")
    proc = search(tmp_path, *argv)
    progress = str(sweep_dir(tmp_path, "down") / "trials" / "*" / "*" / "progress.jsonl")
    try:
        wait_for(lambda: any(Path(p).read_text().strip() for p in glob.glob(progress)), timeout_s=180)
        everyone = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        pg_server.stop()
        try:
            out, _ = proc.communicate(timeout=300)  # the server stays down until the sweep has ended
        finally:
            pg_server.start()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == ExitCode.STORAGE, out
    assert "unreachable" in out and "run the same command" in out and "Traceback" not in out, out
    assert not [p for p in everyone if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    out2 = finish(search(tmp_path, *argv))
    records = studies.sweep_records(studies.open_storage(pg_url, tmp_path), "down")
    assert outcome(records) == [(FIRST, "default", "256", "oom_or_nccl"), (FIRST, "default", "64", "ok")], out2
    assert tsv_outcome(sweep_dir(tmp_path, "down") / "trials.tsv") == outcome(records, interrupted=True)
