"""Ctrl-Z on a sweep (SIGTSTP): the running trial (torchrun and its workers, in sessions of their own) stops with
the sweep and goes on with it at SIGCONT; its window is measured after the pause, never across it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psutil

from ladder.runner import procs
from ladder.storage.tsv import read_tsv
from tests.helpers import live, wait_for

OBSERVE_S = 3.0  # how long the test watches the stopped trial for any progress (an observation, not a wait)


def progress_lines(root: Path) -> int:
    logs = list((root / "out").glob("case_gpu_bench_s/trials/*/*/progress.jsonl"))
    return sum(log.read_text(errors="replace").count('"samples"') for log in logs)


def running(procs: list[psutil.Process]) -> list[str]:
    """The processes among `procs` that neither are stopped nor have ended, named for a failure's message."""
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            if (status := proc.status()) not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                out.append(f"{proc.pid} {status} {' '.join(proc.cmdline())[:160]}")
    return out


def test_sigtstp_suspends_the_running_trial_with_the_sweep_and_its_window_follows_the_pause(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "case=amp_pi_plus",
        "profile=[default]",
        "ladder.rungs=[64]",
        "measure.window_s=8",  # measured after the pause: its length changes nothing asserted here
        "measure.warmup_iters=2",
        "measure.stable_tol=0.5",
        "device=cpu",
        "workload.nproc=2",
        "workload.proxy_ranks=torchrun",  # its workers in sessions of their own: the harder case (ladder's rank
        "sweep=s",  # launcher keeps its ranks in the trial's group; the other sweep tests run that one)
        f"output_root={tmp_path}/out",
    ]
    with open(tmp_path / "console.txt", "w") as console:
        # A session of its own makes its process group orphaned, as under nohup or a launcher: there the kernel
        # drops a SIGTSTP left to its default action, and the sweep must still stop.
        sweep = subprocess.Popen(argv, cwd=tmp_path, stdout=console, stderr=subprocess.STDOUT, start_new_session=True)
    trial: list[psutil.Process] = []
    try:
        wait_for(lambda: progress_lines(tmp_path) >= 2, timeout_s=240)
        trial = [p for p in psutil.Process(sweep.pid).children(recursive=True) if p.is_running()]
        assert len(trial) >= 3  # the supervisor, torchrun, its two workers (each in a session of its own)
        os.kill(sweep.pid, signal.SIGTSTP)
        everyone = [psutil.Process(sweep.pid), *trial]
        try:
            wait_for(lambda: not running(everyone), timeout_s=30)
        except AssertionError:
            raise AssertionError(f"still running after SIGTSTP: {running(everyone)}") from None
        before = progress_lines(tmp_path)
        time.sleep(OBSERVE_S)
        assert running(everyone) == []
        assert progress_lines(tmp_path) == before  # nothing of the trial ran while the sweep was stopped
        resumed_t = time.time()
        os.kill(sweep.pid, signal.SIGCONT)
        assert sweep.wait(timeout=300) == 0, (tmp_path / "console.txt").read_text()
    finally:
        if sweep.poll() is None:  # a failure above: leave nothing running, the trial's stopped processes included
            sweep.kill()
            sweep.wait()
            for proc in trial:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(trial, timeout=30)
            procs.remove_stale()  # the trial's memory cgroup, which the killed sweep did not remove
    (row,) = read_tsv(tmp_path / "out" / "case_gpu_bench_s" / "trials.tsv")
    assert row["status"] == "ok" and float(row["paused_s"]) >= OBSERVE_S
    window_start_t = datetime.fromisoformat(row["started_at"]).timestamp() + float(row["window_start_s"])
    assert window_start_t >= resumed_t - 1.0  # measured after the pause (started_at has whole seconds)
    assert "suspended with" in (tmp_path / "console.txt").read_text()
    assert not live(trial)  # none left behind
