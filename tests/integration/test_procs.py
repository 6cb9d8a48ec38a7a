"""A trial's processes and cgroup are found and killed from its id alone, by whichever orchestrator comes next."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from ladder.runner import launch, procs
from ladder.runner.cgroup import ROOT, MemCgroup
from tests.e2e.test_resume import FAST, FIRST, search, sweep_dir
from tests.helpers import live, need_memory_cgroups, wait_for

ID_VAR = launch.TRIAL_ID_VAR


def cgroups_of(trial_id: str) -> list[Path]:
    """Every trial cgroup whose name ends in the trial's id, anywhere in the hierarchy."""
    return [p for p in ROOT.rglob(f"ladder-*{trial_id}") if p.is_dir()]


def alive(trial_id: str) -> list[int]:
    return [p.pid for p in live(launch.leftovers(trial_id))]


# torchrun and two ranks: what outlives a SIGKILLed orchestrator and its supervisor
TWO_RANKS = [o for o in FAST if not o.startswith("workload.nproc=")] + ["workload.nproc=2"]


def running_trial(orchestrator: int) -> tuple[psutil.Process, str] | None:
    """The orchestrator's trial supervisor and the trial's id, once the supervisor, torchrun and both ranks run."""
    for child in psutil.Process(orchestrator).children():
        with contextlib.suppress(psutil.Error, KeyError):
            if "ladder.runner.trialexec" in child.cmdline() and len(alive(trial_id := child.environ()[ID_VAR])) >= 4:
                return child, trial_id
    return None


def reap_zombies(keep: set[int]) -> None:
    """Reap the orphans that re-parented to this process (when an earlier test made it a subreaper), but not the
    children this test still waits on through Popen."""
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error, ChildProcessError):
            if child.pid not in keep and child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)


@pytest.fixture
def memory_cgroups() -> None:
    need_memory_cgroups()


def test_a_dead_orchestrators_trial_and_its_cgroup_are_found_by_the_trial_id(memory_cgroups: None) -> None:
    """The cgroup carries the pid of the orchestrator that made it; the one cleaning up after it has only the id.

    The owner dies only once the trial is inside its cgroup: an empty cgroup of a dead owner is stale, and any
    orchestrator starting meanwhile (another test's) may remove it, as it should."""
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    trial_id = uuid.uuid4().hex[:12]
    group = MemCgroup.create(f"ladder-{owner.pid}-{trial_id}", None)
    assert group is not None
    sleeper = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ladder.runner.trialexec", "--cgroup", str(group.path), "--", *sleeper],
        env={**os.environ, ID_VAR: trial_id},
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        owner.kill()
        owner.wait()
        assert len(group.pids()) == 2  # the supervisor and its program
        assert len(procs.kill_trial(trial_id, timeout_s=10.0)) == 2
        proc.wait(timeout=30)  # already reaped by the kill (its code is lost to Popen then)
        assert alive(trial_id) == [] and cgroups_of(trial_id) == []
    finally:
        for leftover in (owner, proc):
            with contextlib.suppress(ProcessLookupError):
                leftover.kill()
            leftover.wait()
        wait_for(lambda: not group.pids(), 15)
        group.remove()


def test_a_sigkilled_orchestrators_trial_is_ended_by_the_next_one_and_leaves_no_cgroup(
    tmp_path: Path, memory_cgroups: None
) -> None:
    """`python -m ladder.search` on the demo case is SIGKILLed mid-trial together with the trial's supervisor (as
    when a machine-wide OOM kill or `kill -9` takes both), so that nothing stops the trial: torchrun and its ranks
    run on in the trial's cgroup. Started again on the same sweep, ladder kills them and removes that cgroup."""
    cut = search(tmp_path, f"case={FIRST}", *TWO_RANKS, "sweep=cut")
    progress = str(sweep_dir(tmp_path, "cut") / "trials" / "*" / "default_e64_*" / "progress.jsonl")  # the fit
    wait_for(lambda: any(Path(p).read_text().strip() for p in glob.glob(progress)), timeout_s=180)
    wait_for(lambda: running_trial(cut.pid), timeout_s=60)
    supervisor, trial_id = running_trial(cut.pid) or (None, "")
    assert supervisor is not None
    os.kill(cut.pid, signal.SIGSTOP)  # frozen: it cannot react to its supervisor's death
    supervisor.kill()
    cut.kill()
    cut.communicate(timeout=30)
    try:
        assert len(alive(trial_id)) >= 3, "torchrun and its two ranks outlive both"
        assert len(cgroups_of(trial_id)) == 1

        again = search(tmp_path, f"case={FIRST}", *TWO_RANKS, "sweep=cut")
        deadline = time.monotonic() + 300
        while again.poll() is None and time.monotonic() < deadline:
            reap_zombies(keep={again.pid})
            time.sleep(0.2)
        out, _ = again.communicate(timeout=30)
        assert again.returncode == 0, out
        reap_zombies(keep=set())
        assert alive(trial_id) == [], out
        assert cgroups_of(trial_id) == [], out
    finally:
        for proc in launch.leftovers(trial_id):
            with contextlib.suppress(psutil.Error):
                proc.kill()
        for path in cgroups_of(trial_id):  # only where the test failed
            with contextlib.suppress(OSError):
                path.rmdir()
