"""Fault injection, end to end: `python -m ladder.search` (the proxy on CPU, real torchrun trials) is killed with
SIGKILL at points of a sweep (`LADDER_FAULT`, see ladder/fault.py), or finds its files torn or garbled; the next run
finishes, and its trials.tsv and best_by_case.tsv equal what a clean run records, rebuilt from storage: nothing
lost, nothing run twice, no process left. One clean sweep is the reference for every case (module fixture).

Chains keep the suite short: each run of a chain is killed at its point and the next run resumes the same sweep
(its own count of passes starts again), so one sweep's worth of trials exercises several points. Each run that
died at its point is counted; a point a run never reached is reported, not silently passed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from filelock import FileLock, Timeout

from ladder.storage import fault
from ladder.storage.tsv import read_tsv
from tests.helpers import LIGHT_PROXY, wait_for

FAST = [
    "case=amp_pi_plus",
    "profile=[default]",
    "ladder.rungs=[256,64]",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "device=cpu",
    "workload.nproc=1",  # one rank, started directly: the ranks are not what these tests are about
    LIGHT_PROXY,
]
TRIAL_KEY = ("case", "method", "variant", "num_envs", "phase", "status", "reason")  # not timing or figures
# not `class` either: it is read from the measured util, which follows the machine's load between the runs
BEST_KEY = ("case", "method", "variant", "num_envs", "phase", "status", "reason", "sweep")

pytestmark = pytest.mark.faults  # long (real sweeps): `-m "not faults"` leaves them out locally; CI runs them


@dataclass(frozen=True)
class Clean:
    trials: list[tuple[str, ...]]
    best: list[tuple[str, ...]]
    folder: Path


def search(
    root: Path, sweep: str, *extra: str, fault_at: str = "", reuse: bool = False, stdout: Any = subprocess.PIPE
) -> subprocess.Popen[str]:
    env = {**os.environ, fault.VAR: fault_at} if fault_at else {k: v for k, v in os.environ.items() if k != fault.VAR}
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        *FAST,
        f"reuse={str(reuse).lower()}",
        f"sweep={sweep}",
        f"output_root={root}/output/train",
        *extra,
    ]
    return subprocess.Popen(argv, cwd=root, env=env, stdout=stdout, stderr=subprocess.STDOUT, text=True)


def stop_between_writes(proc: subprocess.Popen[str], sweep_dir: Path) -> None:
    """SIGSTOP `proc` at a moment it holds none of the sweep folder's file locks (journal, TSVs, reuse): stopped
    holding one, it would block every other process at that file until continued. Stopped holding one, it is
    continued until it lets go, and stopped again."""
    while True:
        os.kill(proc.pid, signal.SIGSTOP)
        wait_for(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, timeout_s=60)
        held = [p for p in sweep_dir.glob(".*.lock") if not _free(p)]
        if not held:
            return
        os.kill(proc.pid, signal.SIGCONT)
        wait_for(lambda held=held: all(_free(p) for p in held), timeout_s=60)


def _free(lock_file: Path) -> bool:
    lock = FileLock(str(lock_file))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return False
    lock.release()
    return True


def run(root: Path, sweep: str, *extra: str, fault_at: str = "", reuse: bool = False) -> tuple[int, str]:
    proc = search(root, sweep, *extra, fault_at=fault_at, reuse=reuse)
    out, _ = proc.communicate(timeout=400)
    return proc.returncode, out


def folder(root: Path, sweep: str) -> Path:
    return root / "output" / "train" / f"case_gpu_bench_{sweep}"


def trial_rows(path: Path) -> list[tuple[str, ...]]:
    """trials.tsv as the outcome of each trial that counts (an interrupted one is run again), in order."""
    return [tuple(r[k] for k in TRIAL_KEY) for r in read_tsv(path) if r["status"] != "interrupted"]


def best_rows(path: Path, sweep: str, clean_sweep: str) -> list[tuple[str, ...]]:
    return [tuple(r[k].replace(sweep, clean_sweep) if k == "sweep" else r[k] for k in BEST_KEY) for r in read_tsv(path)]


def from_storage(sweep_dir: Path, what: str, tmp: Path) -> Path:
    """`python -m ladder.merge --<what>-from-storage` into a file of its own."""
    out = tmp / f"rebuilt-{sweep_dir.name}-{what}.tsv"
    subprocess.run(
        [sys.executable, "-m", "ladder.merge", f"--{what}-from-storage", str(sweep_dir), str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out


def left_over(root: Path) -> list[str]:
    """Processes whose command line names this test's folder (trials' ranks, torchrun, a sweep)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(str(root) in a for a in proc.info["cmdline"] or []):
            found.append(" ".join(proc.info["cmdline"]))
    return found


def assert_like_clean(root: Path, sweep: str, clean: Clean) -> None:
    """The sweep's files equal the clean run's, and equal what its storage rebuilds; each trial counts once."""
    here = folder(root, sweep)
    assert trial_rows(here / "trials.tsv") == clean.trials
    assert best_rows(here / "best_by_case.tsv", sweep, "ref") == clean.best
    # `trials` counts the case's probes, the interrupted ones too: as many as trials.tsv lists
    assert [r["trials"] for r in read_tsv(here / "best_by_case.tsv")] == [str(len(read_tsv(here / "trials.tsv")))]
    assert read_tsv(from_storage(here, "trials", root)) == read_tsv(here / "trials.tsv")
    assert read_tsv(from_storage(here, "best", root)) == read_tsv(here / "best_by_case.tsv")
    wait_for(lambda: not left_over(root), timeout_s=30)


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Clean:
    root = tmp_path_factory.mktemp("clean")
    code, out = run(root, "ref")
    assert code == 0, out
    here = folder(root, "ref")
    trials = trial_rows(here / "trials.tsv")
    assert [(t[3], t[5]) for t in trials] == [("256", "oom_or_nccl"), ("64", "ok")], out  # the story the cases need
    return Clean(trials, best_rows(here / "best_by_case.tsv", "ref", "ref"), here)


def copy_of(clean: Clean, root: Path, sweep: str) -> Path:
    """The clean sweep's folder as another sweep of the same name in `root` (its storage names it `ref`)."""
    target = folder(root, sweep)
    shutil.copytree(clean.folder, target)
    return target


# ---------------------------------------------------------------- SIGKILL at points of a sweep

CHAINS = {
    # before/after journal appends: study creation, the first trial created (not launched), its heartbeat (its
    # ranks orphaned mid-run), its outcome half-written (status stored, state still RUNNING), its state stored
    "journal": [
        "journal.before_append:1",
        "journal.after_append:3",
        "journal.after_append:1",
        "journal.after_append:8",
        "journal.before_append:9",
        "journal.after_append:14",
    ],
    # between writing a TSV's temp file and renaming it (trials.tsv after a trial, best_by_case.tsv at the end), and
    # a trial measured whose outcome is not yet stored
    "tsv_and_finish": ["tsv.before_rename:1", "trial.before_finish:1", "tsv.before_rename:1", "tsv.before_rename:2"],
}


@pytest.mark.parametrize("chain", list(CHAINS), ids=list(CHAINS))
def test_sigkill_at_each_point_then_resume_records_what_a_clean_run_records(
    chain: str, clean: Clean, tmp_path: Path
) -> None:
    reached = []
    for point in CHAINS[chain]:
        code, out = run(tmp_path, chain, fault_at=point)
        assert code in (-signal.SIGKILL, 0), out  # killed at the point, or done before reaching it
        reached.append((point, code == -signal.SIGKILL))
    code, out = run(tmp_path, chain)
    assert code == 0, out
    print(f"{chain}: killed at {[p for p, hit in reached if hit]}; not reached: {[p for p, hit in reached if not hit]}")
    assert sum(hit for _, hit in reached) >= len(reached) - 1, reached  # the chain exercises its points
    assert_like_clean(tmp_path, chain, clean)


def test_sigkill_while_a_reused_trial_is_copied(clean: Clean, tmp_path: Path) -> None:
    copy_of(clean, tmp_path, "ref")  # an earlier sweep on this machine: its two trials answer for the next one's
    code, out = run(tmp_path, "again", fault_at="reuse.copy:2", reuse=True)
    assert code == -signal.SIGKILL, out
    code, out = run(tmp_path, "again", reuse=True)
    assert code == 0, out
    assert "reused from" in out
    assert_like_clean(tmp_path, "again", clean)


def test_sigkill_of_one_of_two_processes_sharing_a_case(clean: Clean, tmp_path: Path) -> None:
    # the first process dies as it records its first trial's outcome (the 6th append, after the study, its sweep and
    # settings attributes, the trial's creation and its first heartbeat: the trial ran), while the second, started
    # once that trial was begun, waits for it; the second then takes the case over
    # (the first is held stopped until the second says it waits, so the order does not depend on the machine's speed)
    doomed = search(tmp_path, "two", fault_at="journal.after_append:6")
    journal = folder(tmp_path, "two") / "journal.log"
    wait_for(lambda: journal.exists() and b'{"op_code":4,' in journal.read_bytes(), timeout_s=120)
    stop_between_writes(doomed, journal.parent)
    log = tmp_path / "other.log"
    try:
        with open(log, "w") as fh:
            other = search(tmp_path, "two", stdout=fh)
        wait_for(lambda: "waiting for its outcome" in log.read_text(), timeout_s=120)
    finally:
        os.kill(doomed.pid, signal.SIGCONT)
    out_doomed, _ = doomed.communicate(timeout=400)
    other.wait(timeout=400)
    out_other = log.read_text()
    assert doomed.returncode == -signal.SIGKILL, out_doomed
    assert other.returncode == 0, out_other
    assert "waiting for its outcome" in out_other and "marked interrupted" in out_other, out_other
    code, out = run(tmp_path, "two")
    assert code == 0, out
    assert_like_clean(tmp_path, "two", clean)


# ---------------------------------------------------------------- torn and garbled files


def test_a_torn_journal_line_is_set_aside_and_resumes_keep_working(clean: Clean, tmp_path: Path) -> None:
    journal = copy_of(clean, tmp_path, "ref") / "journal.log"
    fragment = b'{"op_code":8,"worker_id":"tor'
    with open(journal, "ab") as fh:
        fh.write(fragment)  # a write cut short: no newline at the end
    for _ in range(2):  # the second resume reads what the first one appended
        code, out = run(tmp_path, "ref")
        assert code == 0, out
    assert "set aside" in out or any(journal.parent.glob("journal.log.torn-*"))
    sides = list(journal.parent.glob("journal.log.torn-*"))
    assert [p.read_bytes() for p in sides] == [fragment]
    assert all(json.loads(line) for line in journal.read_bytes().splitlines())
    assert_like_clean(tmp_path, "ref", clean)


def test_a_garbled_journal_line_names_its_line_and_repair_makes_it_resume(clean: Clean, tmp_path: Path) -> None:
    here = copy_of(clean, tmp_path, "ref")
    journal = here / "journal.log"
    lines = journal.read_bytes().splitlines(keepends=True)
    lines.insert(5, b'{"op_code": 9, broken\n')
    journal.write_bytes(b"".join(lines))
    code, out = run(tmp_path, "ref")
    assert code == 2, out
    assert f"{journal}: line 6 cannot be read" in out and "python -m ladder.repair" in out
    assert "Traceback" not in out
    fixed = subprocess.run([sys.executable, "-m", "ladder.repair", str(here)], capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stderr
    assert "1 line(s) set aside" in fixed.stdout
    code, out = run(tmp_path, "ref")
    assert code == 0, out
    assert_like_clean(tmp_path, "ref", clean)


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("truncated_mid_row", lambda b: b[: len(b) - 40]),
        ("random_bytes", lambda b: bytes(range(256)) * 3),
        ("nul", lambda b: b[:50] + b"\x00" * 20 + b[50:]),
    ],
    ids=["truncated_mid_row", "random_bytes", "nul"],
)
def test_a_damaged_tsv_is_set_aside_and_rebuilt_before_any_trial(
    name: str, damage, clean: Clean, tmp_path: Path
) -> None:
    here = copy_of(clean, tmp_path, "ref")
    for tsv in ("best_by_case.tsv", "trials.tsv"):
        (here / tsv).write_bytes(damage((here / tsv).read_bytes()))
    code, out = run(tmp_path, "ref")
    assert code == 0, out
    assert "rebuilt with 1 row(s)" in out
    assert len(list(here.glob("best_by_case.tsv.damaged-*"))) == 1
    assert len(list(here.glob("trials.tsv.damaged-*"))) == 1
    assert_like_clean(tmp_path, "ref", clean)


# ---------------------------------------------------------------- a full disk at points of a sweep

# each run of the chain fills the disk at its point and must stop with one line and code 5; the ballast is then
# removed, and the next run resumes the same sweep (the last one while its trial writes, filled from here)
FULL_AT = ["journal.before_append:3", "tsv.before_rename:1", "trial.before_finish:1", "journal.after_append:2"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        wait_for(lambda: not left_over(disk), timeout_s=60)
        subprocess.run(["umount", str(disk)], check=True)


def stopped_for_space(code: int, out: str, disk: Path) -> bool:
    """The run stopped on the full disk as it should: code 5, one line naming the folder and the resume command,
    no traceback. False where it finished before it got there (code 0)."""
    if code == 0:
        return False
    assert code == 5, out
    assert "Traceback" not in out, out
    (line,) = [line for line in out.splitlines() if "no space left" in line]
    assert line.startswith(f"ladder: no space left on the disk of {disk}") and "resume with `" in line, out
    (disk / fault.BALLAST).unlink()
    return True


def test_a_full_disk_at_each_write_stops_with_one_line_and_the_same_command_resumes_exactly(
    clean: Clean, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fault.FILL_VAR, str(small_disk))
    stopped = []
    for point in FULL_AT:
        code, out = run(small_disk, "full", fault_at=f"{point}:fill")
        stopped.append((point, stopped_for_space(code, out, small_disk)))
    print("stopped for space at", stopped)
    assert sum(hit for _, hit in stopped) >= len(FULL_AT) - 1, stopped
    # the disk fills while the trainer writes: its own ENOSPC is no broken configuration, and nothing is recorded
    sweep_dir = folder(small_disk, "full")
    proc = search(small_disk, "full")
    before = len(list(sweep_dir.glob("trials/*/*/progress.jsonl")))
    wait_for(lambda: len(list(sweep_dir.glob("trials/*/*/progress.jsonl"))) > before, timeout_s=120)
    fault.fill(small_disk)
    out, _ = proc.communicate(timeout=400)
    if proc.returncode != 0:  # 0: its trial ended before the disk filled (a loaded machine)
        assert stopped_for_space(proc.returncode, out, small_disk)
    code, out = run(small_disk, "full")
    assert code == 0, out
    assert "error" not in {r["status"] for r in read_tsv(sweep_dir / "trials.tsv")}
    assert_like_clean(small_disk, "full", clean)
