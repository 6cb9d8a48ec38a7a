"""Memory as the cap sees it: a trial under `workload.host_mem_limit_gb` (a real memory cgroup, a real kernel OOM
kill) gets the verdict and the figures of that cgroup, read before the cgroup is removed."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from ladder.storage.tsv import read_tsv
from tests.e2e.test_resume import FIRST, finish, search, sweep_dir
from tests.helpers import need_memory_cgroups

CAP_MB = 256


# A trainer shaped like those with env-worker processes: the parent steps a worker through a pipe, and the worker
# holds `num_envs` x 8 MiB once warmed up (64 MiB at e8, 512 MiB at e64: over the cap). When the kernel kills the
# worker, the parent sees its pipe close and exits 1 with its own message, as such trainers do.
WORKER = textwrap.dedent(
    """
    import sys
    envs, held = int(sys.argv[1]), []
    for line in sys.stdin:
        if len(held) < 8:
            held.append(b"x" * (envs << 20))  # written, so every page is charged to the cgroup
        sys.stdout.write("ok\\n")
        sys.stdout.flush()
    """
)


TRAINER = textwrap.dedent(
    """
    import subprocess, sys, time
    worker_py, envs = sys.argv[1], int(sys.argv[2])
    worker = subprocess.Popen([sys.executable, worker_py, str(envs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for i in range(1, 10**6):
            worker.stdin.write(b"step\\n")
            worker.stdin.flush()
            if not worker.stdout.readline():
                raise EOFError("the env worker closed its pipe")
            print(f"iter {i} samples {i * envs}", flush=True)
            time.sleep(0.05)
    except (EOFError, BrokenPipeError) as exc:
        print(f"env worker lost: {exc!r}", flush=True)
        sys.exit(1)
    """
)


@pytest.fixture
def memory_cgroups() -> None:
    need_memory_cgroups()


def test_a_worker_oom_killed_in_the_trials_cgroup_is_host_oom_whatever_its_parent_did(
    tmp_path: Path, memory_cgroups: None
) -> None:
    trainer, worker = tmp_path / "trainer.py", tmp_path / "worker.py"
    trainer.write_text(TRAINER)
    worker.write_text(WORKER)
    command = f'workload.command=["{sys.executable}","{trainer}","{worker}","{{num_envs}}"]'
    out = finish(
        search(
            tmp_path,
            f"case={FIRST}",
            "profile=[default]",
            "ladder.rungs=[64,8]",
            "workload.kind=command",
            command,
            f"workload.host_mem_limit_gb={CAP_MB / 1024}",
            "measure.window_s=2",
            "measure.warmup_iters=2",
            "measure.stable_tol=0.5",
            "sweep=capped",
        )
    )
    rows = {r["num_envs"]: r for r in read_tsv(sweep_dir(tmp_path, "capped") / "trials.tsv")}
    over, fits = rows["64"], rows["8"]

    assert (over["status"], over["reason"]) == ("oom_or_nccl", "host_oom"), out
    assert "OOM kill" in over["evidence"] and "memory cgroup ladder-" in over["evidence"], over["evidence"]
    log = (sweep_dir(tmp_path, "capped") / over["trial_dir"] / "stdout.log").read_text()
    # the parent's own output says nothing of memory: its ending (if ladder, stopping the trial at the cgroup's first
    # OOM kill, let it print one) is the pipe's EOFError
    assert "memory" not in log.lower() and "killed" not in log.lower(), log
    assert "env worker lost:" not in log or "env worker lost: EOFError" in log, log
    verdict = json.loads((sweep_dir(tmp_path, "capped") / over["trial_dir"] / "verdict.json").read_text())
    assert verdict["reason"] == "host_oom"

    assert fits["status"] == "ok", out
    assert 64 < float(fits["cgroup_peak_mb"]) <= CAP_MB  # the worker's 64 MiB and the rest, all under the cap
    assert 0 < float(over["cgroup_peak_mb"]) <= CAP_MB
    assert float(over["cgroup_limit_mb"]) == float(fits["cgroup_limit_mb"]) == CAP_MB
    best = read_tsv(sweep_dir(tmp_path, "capped") / "best_by_case.tsv")
    assert [r["cgroup_peak_mb"] for r in best] == [fits["cgroup_peak_mb"]]
    assert f"cgroup={round(float(fits['cgroup_peak_mb']))}/{CAP_MB} MiB" in out  # the capped figure on the console
    assert float(fits["max_mem0"]) == round(float(fits["cgroup_peak_mb"]))  # one rank: its memory is the cgroup's
    assert "rss(sum)=" not in out and "mem=" not in out  # shown once, as the cap counts it


# A trainer whose workers share its pages: the parent fills a 200 MiB buffer, then forks 3 workers that only read it
# (as forked env workers and DataLoader workers do). Each process's RSS counts the buffer: their sum is four times
# it, while the kernel holds (and a cgroup charges) it once. The parent prints the RSS sum it sees beside its progress.
SHARING = textwrap.dedent(
    """
    import os, sys, time
    envs, buf = int(sys.argv[1]), bytearray(200 << 20)
    buf[::4096] = b"\\x01" * len(range(0, len(buf), 4096))  # every page written: 200 MiB resident
    workers = []
    for _ in range(3):
        if (pid := os.fork()) == 0:
            while True:
                sum(buf[::4096])  # read, never written: the pages stay shared
                time.sleep(0.05)
        workers.append(pid)

    def rss_mb(pid):
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024

    for i in range(1, 10**6):
        if i % 10 == 1:
            print(f"rss_sum_mb {sum(rss_mb(p) for p in (os.getpid(), *workers)):.0f}", flush=True)
        print(f"iter {i} samples {i * envs}", flush=True)
        time.sleep(0.05)
    """
)


@pytest.mark.parametrize("capped", [True, False], ids=["cgroup", "no-cap"])
def test_memory_shared_between_a_trainers_processes_counts_once(
    tmp_path: Path, memory_cgroups: None, capped: bool
) -> None:
    """Under a capped cgroup the recorded max_mem0 is the cgroup's own peak; without a cap it is the process tree's
    PSS. Either way the buffer the four processes share counts once: far below their RSS summed."""
    trainer = tmp_path / "sharing.py"
    trainer.write_text(SHARING)
    name = "shared" if capped else "uncapped"
    out = finish(
        search(
            tmp_path,
            f"case={FIRST}",
            "profile=[default]",
            "ladder.rungs=[8]",
            "workload.kind=command",
            f'workload.command=["{sys.executable}","{trainer}","{{num_envs}}"]',
            *([f"workload.host_mem_limit_gb={1536 / 1024}"] if capped else []),
            "measure.window_s=2",
            "measure.warmup_iters=2",
            "measure.stable_tol=0.5",
            f"sweep={name}",
        )
    )
    (row,) = read_tsv(sweep_dir(tmp_path, name) / "trials.tsv")
    log = (sweep_dir(tmp_path, name) / row["trial_dir"] / "stdout.log").read_text()
    rss_sum = max(float(line.split()[1]) for line in log.splitlines() if line.startswith("rss_sum_mb"))
    recorded = float(row["max_mem0"])
    assert row["status"] == "ok", out
    assert rss_sum > 4 * 200  # four processes, each with the buffer resident
    if capped:
        peak = float(row["cgroup_peak_mb"])
        assert recorded == round(peak) and "cgroup=" in out and "pss=" not in out
        sampled = float(row["pss_max0"])  # the sampler's own figure of the tree, kept beside it
        assert abs(sampled - peak) < 0.25 * peak  # the tree's PSS and the cgroup's charge agree
    else:
        assert "cgroup_peak_mb" not in row or not row.get("cgroup_limit_mb")
        assert "pss=" in out and "pss_max0" not in row
    assert 200 < recorded < 0.5 * rss_sum  # the shared buffer once, not four times
