"""Start a trial's process group, tee its output to the trial folder, and stop it: every process, always reaped.

A trial runs in its own session (`start_new_session`), inside a memory cgroup where the system allows one, and
every process it starts carries `LADDER_TRIAL_ID` in its environment. The orchestrator is a child subreaper, so
workers orphaned by a dying launcher are re-parented to it; stopping sends SIGTERM to the group, waits a grace
period, then SIGKILLs the cgroup, the group and every remaining process that carries the trial's id.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from ladder.cgroup import MemCgroup
from ladder.workloads.spec import TrialSpec

log = logging.getLogger(__name__)

TRIAL_ID_VAR = "LADDER_TRIAL_ID"
PR_SET_CHILD_SUBREAPER = 36


@dataclass
class Running:
    """A started trial."""

    trial_id: str
    proc: subprocess.Popen[bytes]
    cgroup: MemCgroup | None
    out: IO[bytes]
    started_mono: float


def become_subreaper() -> bool:
    """Orphans of our trials re-parent to us (Linux), so none escapes the stop."""
    try:
        return ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_files(spec: TrialSpec, trial_dir: Path) -> None:
    """The trial folder before launch: generated files, the exact argv and the variables ladder set."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    for name, text in spec.files.items():
        (trial_dir / name).write_text(text)
    (trial_dir / "cmd.txt").write_text(shlex.join(spec.argv) + "\n")
    (trial_dir / "env.txt").write_text("".join(f"{k}={v}\n" for k, v in sorted(spec.env.items())))


def start(spec: TrialSpec, trial_dir: Path, trial_id: str, mem_limit_bytes: int | None) -> Running:
    write_files(spec, trial_dir)
    cgroup = MemCgroup.create(f"ladder-{os.getpid()}-{trial_id}", mem_limit_bytes)  # owner pid: see remove_stale
    if cgroup is None:
        log.info("no memory cgroup available: the trial is tracked by its process tree")
    join = ["--cgroup", str(cgroup.path)] if cgroup is not None else []
    argv = [sys.executable, "-m", "ladder.trialexec", *join, "--", *spec.argv]
    env = {**os.environ, **spec.env, TRIAL_ID_VAR: trial_id}
    out = open(trial_dir / "stdout.log", "wb")  # noqa: SIM115 - closed in stop()
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=spec.cwd or None, start_new_session=True)  # fmt: skip
    return Running(trial_id, proc, cgroup, out, time.monotonic())


def stop(run: Running, grace_s: float) -> int:
    """End the trial (if still running) and reap everything; returns the launcher's exit code."""
    if run.proc.poll() is None:
        _signal_group(run.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.proc.wait(timeout=grace_s)
    _signal_group(run.proc.pid, signal.SIGKILL)
    code = run.proc.wait()  # reap the leader through Popen before any orphan reaping, to keep its code
    _kill_everything(run)
    run.out.close()
    return code


def leftovers(trial_id: str) -> list[psutil.Process]:
    """Processes still carrying the trial's id (any of ours; the machine's others cannot see it)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get(TRIAL_ID_VAR) == trial_id:
                found.append(proc)
    return found


def _kill_everything(run: Running) -> None:
    if run.cgroup is not None:
        run.cgroup.kill_all()
    procs = leftovers(run.trial_id)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=3)  # reaps those that re-parented to us
    reap_orphans()
    if run.cgroup is not None:
        _wait_empty(run.cgroup)
        run.cgroup.remove()


def reap_orphans() -> None:
    """Collect exited orphans that re-parented to us (we are their subreaper)."""
    for child in psutil.Process().children():
        if child.status() == psutil.STATUS_ZOMBIE:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, os.WNOHANG)


def _wait_empty(cgroup: MemCgroup, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while cgroup.pids() and time.monotonic() < deadline:
        reap_orphans()
        time.sleep(0.05)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
