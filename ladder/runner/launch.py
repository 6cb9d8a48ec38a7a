"""Start a trial's process group, tee its output to the trial folder, and stop it: every process, always reaped.

A trial's argv is what its spec planned: torchrun for several ranks, the trainer itself with torchrun's variables
for one (`ladder.workloads.builtin.ranks`); either way it is one supervised process group, killed whole.
A trial runs in its own session (`start_new_session`), inside a memory cgroup where the system allows one, and
every process it starts carries `LADDER_TRIAL_ID` in its environment (a rank forked by the warm starter,
`ladder.runner.warm`, joins the cgroup first and is found through its client). The orchestrator is a child subreaper, so
workers orphaned by a dying launcher are re-parented to it; stopping sends SIGTERM to the group, waits a grace
period, then SIGKILLs the cgroup, the group and every remaining process that carries the trial's id
(`ladder.runner.procs`, where every process of a trial is found and killed).
"""

from __future__ import annotations

import contextlib
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

from ladder.core.paths import TrialPaths
from ladder.core.spec import TrialSpec
from ladder.runner import procs, suspend, warm
from ladder.runner.cgroup import MemCgroup, Usage
from ladder.runner.procs import TRIAL_ID_VAR, become_subreaper, reap_orphans

log = logging.getLogger(__name__)

__all__ = ["TRIAL_ID_VAR", "Running", "become_subreaper", "free_port", "leftovers", "reap_orphans", "start", "stop"]
ERROR_FILE_VAR = "TORCHELASTIC_ERROR_FILE"  # where an elastic `@record` entry point writes its error.json
leftovers = procs.carrying  # the trial's processes still alive, by its id (kept under this name for its callers)


@dataclass
class Running:
    """A started trial."""

    trial_id: str
    proc: subprocess.Popen[bytes]
    cgroup: MemCgroup | None
    out: IO[bytes]
    started_mono: float
    cgroup_usage: Usage | None = None  # what the cgroup saw (peak, OOM kills), read by `stop` before removing it


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_files(spec: TrialSpec, trial_dir: Path) -> None:
    """The trial folder before launch: generated files, the exact argv and the variables ladder set."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    for name, text in spec.files.items():
        (trial_dir / name).write_text(text)
    files = TrialPaths(trial_dir)
    files.cmd.write_text(shlex.join(spec.argv) + "\n")
    files.env.write_text("".join(f"{k}={v}\n" for k, v in sorted(spec.env.items())))
    if error_file := spec.env.get(ERROR_FILE_VAR):  # a rank ladder starts itself: torchrun would make this folder
        Path(error_file).parent.mkdir(parents=True, exist_ok=True)


def start(spec: TrialSpec, trial_dir: Path, trial_id: str, mem_limit_bytes: int | None) -> Running:
    write_files(spec, trial_dir)
    cgroup = MemCgroup.create(procs.cgroup_name(trial_id), mem_limit_bytes)
    if cgroup is None:
        log.info("no memory cgroup available: the trial is tracked by its process tree")
    join = ["--cgroup", str(cgroup.path)] if cgroup is not None else []
    argv = [sys.executable, "-m", "ladder.runner.trialexec", *join, "--", *spec.argv]
    env = {**os.environ, **spec.env, TRIAL_ID_VAR: trial_id}
    if spec.warm_python and cgroup is not None and (starter := warm.STARTERS.get(spec.warm_python)) is not None:
        env.update(starter.env(cgroup.path))  # the ranks are forked from it, into the trial's cgroup
    out = open(TrialPaths(trial_dir).stdout, "wb")  # noqa: SIM115 - closed in stop()
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=spec.cwd or None,
        start_new_session=True,
    )
    suspend.track(trial_id, cgroup)
    return Running(trial_id, proc, cgroup, out, time.monotonic())


def stop(run: Running, grace_s: float) -> int:
    """End the trial (if still running) and reap everything; returns the launcher's exit code. With `grace_s`, the
    group is asked to end (SIGTERM) and given that long before SIGKILL; with none, it is killed at once. The cgroup's
    figures are read once every process is dead and before the cgroup goes (`run.cgroup_usage`)."""
    if grace_s > 0 and run.proc.poll() is None:  # an orderly end first; with no grace, none is asked for
        procs.signal_group(run.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.proc.wait(timeout=grace_s)
    procs.signal_group(run.proc.pid, signal.SIGKILL)
    code = run.proc.wait()  # reap the leader through Popen before any orphan reaping, to keep its code
    groups = [run.cgroup] if run.cgroup is not None else []
    suspend.untrack(run.trial_id)
    procs.kill_trial(run.trial_id, groups, remove=False)
    if run.cgroup is not None:
        run.cgroup_usage = run.cgroup.usage()
    procs.remove_cgroups(groups)
    run.out.close()
    return code
