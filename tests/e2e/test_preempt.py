"""A scheduler's preemption, injected for real: SIGTERM to every process of the job at once and SIGKILL after a grace
(what SLURM sends), and submitit's own preemption signal to a job of the submitit launcher's local executor, whose
requeue runs the job again. The trial that was running is recorded `interrupted` within the grace, nothing is left
running, and the same command (or the requeued job) resumes the sweep: no finished trial runs twice."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.helpers import LIGHT_PROXY, live, need_module, wait_for

GRACE_S = 30.0  # SLURM's default KillWait: SIGTERM, then SIGKILL this long after
MEASURE = ["measure.window_s=10", "measure.warmup_iters=2", "measure.stable_tol=0.5", "device=cpu", LIGHT_PROXY]


def progressing(trial: Path) -> bool:
    log = trial / "progress.jsonl"
    return log.exists() and b'"iter"' in log.read_bytes()


def rows(root: Path) -> list[tuple[str, str, str]]:
    return sorted((t["variant"], t["num_envs"], t["status"]) for t in read_tsv(root / "trials.tsv"))


def family(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    return []


def preempt_like_slurm(pid: int) -> tuple[int | None, list[psutil.Process]]:
    """SIGTERM to every process of the job at once (SLURM signals the whole step, the trial's sessions included),
    SIGKILL to whatever is left after the grace. The job's exit code (negative: the signal that ended it) and the
    processes signalled, for the check that none is left."""
    everyone = family(pid)
    for proc in everyone:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(everyone, timeout=GRACE_S)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=GRACE_S)
    return everyone[0].returncode, everyone  # type: ignore[attr-defined]  # set by wait_procs


def test_sigterm_to_the_whole_job_then_sigkill_after_the_grace_is_an_orderly_stop_that_resumes(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "case=amp_pi_plus",
        "profile=[default]",
        "ladder.rungs=[64]",
        "workload.nproc=2",  # torchrun and two workers, each in a session of its own
        "workload.proxy_ranks=torchrun",  # (ladder's rank launcher keeps its ranks in the trial's group)
        *MEASURE,
        "sweep=pre",
        f"output_root={tmp_path}/out",
    ]
    root = tmp_path / "out" / "case_gpu_bench_pre"
    with open(tmp_path / "console.txt", "w") as console:
        sweep = subprocess.Popen(argv, cwd=tmp_path, stdout=console, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: progressing(root / "trials" / "amp_pi_plus" / "default_e64_probe_1"), timeout_s=240)
        code, signalled = preempt_like_slurm(sweep.pid)  # reaped there: its own exit, or the SIGKILL after the grace
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    console = (tmp_path / "console.txt").read_text()
    assert code == ExitCode.TERMINATED, console  # its own exit within the grace (a SIGKILL would read -9)
    assert "stopped (SIGTERM: a scheduler's preemption or a kill)" in console and "resume with" in console
    assert rows(root) == [("default", "64", "interrupted")]  # not `oom_or_nccl`: the trial died of the same SIGTERM
    assert not live(signalled)

    again = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == ExitCode.PICK_FOUND, again.stdout + again.stderr
    assert rows(root) == [("default", "64", "interrupted"), ("default", "64", "ok")]


def submit_process(multirun: subprocess.Popen[str]) -> psutil.Process | None:
    """The submitit task running the job (`python -m submitit.core._submit`), under the local executor's controller."""
    for proc in family(multirun.pid)[1:]:
        with contextlib.suppress(psutil.Error):
            if "submitit.core._submit" in " ".join(proc.cmdline()):
                return proc
    return None


def test_submitits_preemption_requeues_the_job_and_the_requeued_job_resumes_the_sweep_exactly(tmp_path: Path) -> None:
    need_module("hydra_plugins.hydra_submitit_launcher")
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "-m",
        "case=add_pi_plus",
        "profile=[default,hiutil]",
        "ladder.rungs=[64]",
        "workload.nproc=1",
        *MEASURE,
        "hydra/launcher=submitit_local",
        "sweep=req",
        f"output_root={tmp_path}/out",
        f"hydra.sweep.dir={tmp_path}/multirun",
    ]
    root = tmp_path / "out" / "case_gpu_bench_req"
    multirun = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        second = root / "trials" / "add_pi_plus" / "hiutil_e64_probe_1"
        wait_for(lambda: progressing(second), timeout_s=300)  # the default profile's trial has finished
        job = submit_process(multirun)
        assert job is not None
        first_pid = job.pid
        job.send_signal(signal.SIGUSR2)  # what submitit's LocalJob._interrupt sends: a preemption
        out, _ = multirun.communicate(timeout=400)
    finally:
        if multirun.poll() is None:
            multirun.kill()
            multirun.wait()
    assert multirun.returncode == ExitCode.PICK_FOUND, out
    job_log = "".join(p.read_text() for p in (tmp_path / "multirun" / ".submitit").glob("*/*_0_log.*"))
    assert "this job is preempted" in job_log and "Requeued job" in job_log, job_log  # submitit's own requeue ran
    # the preempted job stopped and recorded its trial itself before the requeue: the requeued job (on a cluster,
    # maybe another host, later) has no trial left running to find
    assert "preempted (SIGUSR2 from the launcher" in job_log and "left running by a stopped sweep" not in job_log
    assert not psutil.pid_exists(first_pid) or psutil.Process(first_pid).status() == psutil.STATUS_ZOMBIE
    assert rows(root) == [("default", "64", "ok"), ("hiutil", "64", "interrupted"), ("hiutil", "64", "ok")]
    (best,) = read_tsv(root / "best_by_case.tsv")
    assert (best["case"], best["status"], best["num_envs"]) == ("add_pi_plus", "ok", "64")
