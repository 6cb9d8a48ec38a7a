"""Samplers: NVML against a stateful stand-in for the driver (no GPU here), host on real process trees."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import psutil
import pytest

from ladder.core.measure.usage import figures
from ladder.core.records import Sample, Source
from ladder.runner.host import HostSampler
from ladder.runner.monitor import JointSampler, Monitor
from ladder.runner.nvml import NvmlSampler, sampler_for
from ladder.runner.procs import _psutil_tree, process_tree
from tests.helpers import DATA, REPO, wait_for
from tests.nvml_fake import FakeGpu, FakeNvml
from tests.unit.test_monitor import NO_DRIVER, run_ticks

ROOT = REPO


# A launcher (like torchrun) starts two ranks; each waits for SIGUSR1 to work (rank 0 also starts a helper that
# has no LOCAL_RANK of its own), for a second SIGUSR1 to rest again, and reports each phase on stdout.
RANK = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    phase = 0
    def bump(*_):
        global phase
        phase += 1
    signal.signal(signal.SIGUSR1, bump)
    rank = os.environ["LOCAL_RANK"]
    say = lambda line: os.write(1, f"{line}\\n".encode())  # one write: both ranks share the pipe
    say(f"ready {rank} {os.getpid()}")
    while phase == 0:
        time.sleep(0.02)
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_RANK"}
    helper = subprocess.Popen([sys.executable, "-c", "import time; x = b'1' * (96 << 20); time.sleep(600)"], env=env)
    held = b"2" * (256 << 20)
    say(f"working {rank}")
    while phase == 1:
        sum(range(1000))
    helper.kill()
    helper.wait()
    del held
    say(f"resting {rank}")
    while phase == 2:
        time.sleep(0.02)
    """
)


LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys
    ranks = [subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={**os.environ, "LOCAL_RANK": str(r)})
             for r in range(2)]
    for p in ranks:
        p.wait()
    """
)


ORPHAN_WAIT = "import sys; sys.stdin.read()"

# ---------------------------------------------------------------- a stand-in for the NVML library


# ---------------------------------------------------------------- NVML sampler


def test_memory_of_the_trials_own_processes_once_a_second(trial_tree: dict[str, int]) -> None:
    gpu = FakeGpu()
    gpu.procs = {
        trial_tree["root"]: 410.0,
        trial_tree["worker"]: 3000.0,
        trial_tree["orphan"]: 900.0,
        trial_tree["stranger"]: 7000.0,
    }
    nvml = FakeNvml(gpu)
    sampler = NvmlSampler([0], root_pid=trial_tree["root"], trial_id="t-own", nvml=nvml)
    series = run_ticks(nvml, sampler, 3.0)
    listed = [s for s in series if s.proc_mem_mb is not None]
    assert len(listed) in (3, 4)  # ~1 Hz, not 10 Hz: the process list takes the driver's global lock
    assert {s.proc_mem_mb for s in listed} == {410.0 + 3000.0 + 900.0}  # the stranger's 7000 MiB is not ours
    assert {s.mem_mb for s in series} == {530.0 + 410.0 + 3000.0 + 900.0 + 7000.0}  # device level: everything
    f = figures(series, [], None, 0.0)
    assert (f["max_mem0"], f["proc_mem_max0"]) == (11840, 4310)


def test_gpu_trials_record_the_host_alongside(trial_tree: dict[str, int]) -> None:
    nvml = FakeNvml(FakeGpu())
    nvml.gpus[0].util = 70.0
    sampler = sampler_for([0], trial_tree["root"], nvml=nvml)
    assert isinstance(sampler, JointSampler) and sampler.source is Source.NVML
    series = run_ticks(nvml, sampler, 3.0)
    host = [s for s in series if s.source is Source.HOST]
    assert 3 <= len(host) <= 4 and {s.index for s in host} == {0}  # ~1 Hz alongside; the tree is one series
    f = figures(series, [], None, 0.0)
    assert f["min_avg_util"] > 60 and "host_cpu_avg0" in f and f["host_rss_max0"] > 5  # root and worker
    assert isinstance(sampler_for([], trial_tree["root"]), HostSampler)


# ---------------------------------------------------------------- host sampler on real processes


class Launched:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.pids: dict[int, int] = {}
        self._said: set[tuple[str, int]] = set()

    def expect(self, word: str, rank: int) -> None:
        """Blocks until the rank has said `word` on stdout."""
        assert self.proc.stdout is not None
        while (word, rank) not in self._said:
            parts = self.proc.stdout.readline().split()
            assert parts, f"the ranks ended before rank {rank} said {word}"
            self._said.add((parts[0], int(parts[1])))
            if parts[0] == "ready":
                self.pids[int(parts[1])] = int(parts[2])

    def signal(self, rank: int) -> None:
        os.kill(self.pids[rank], signal.SIGUSR1)


@pytest.fixture
def launched() -> Iterator[Launched]:
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, RANK], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        yield Launched(proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


def rank_series(monitor: Monitor, rank: int) -> list[Sample]:
    return [s for s in list(monitor.samples) if s.index == rank]


def cpu_over(monitor: Monitor, pids: dict[int, int], ticks: int) -> tuple[dict[int, float], dict[int, float]]:
    """Per rank over the next `ticks` samples: the CPU% the kernel's own counters give (the truth), and the mean
    the sampler reported."""
    procs = {rank: psutil.Process(pid) for rank, pid in pids.items()}
    before, t0, w0 = {r: sum(p.cpu_times()[:2]) for r, p in procs.items()}, time.time(), time.monotonic()
    wait_for(lambda: len([s for s in rank_series(monitor, 0) if s.t > t0]) >= ticks)
    after, t1, w1 = {r: sum(p.cpu_times()[:2]) for r, p in procs.items()}, time.time(), time.monotonic()
    truth = {r: 100 * (after[r] - before[r]) / (w1 - w0) for r in procs}
    reported = {r: statistics.fmean(s.util for s in rank_series(monitor, r) if t0 < s.t <= t1) for r in procs}
    return truth, reported


def test_host_sampler_tracks_what_each_rank_does(launched: Launched) -> None:
    launched.expect("ready", 0)
    launched.expect("ready", 1)
    monitor = Monitor(HostSampler(launched.proc.pid), hz=10).start()
    try:
        wait_for(lambda: len(rank_series(monitor, 0)) >= 10 and len(rank_series(monitor, 1)) >= 10)
        rest_rss = rank_series(monitor, 0)[-1].mem_mb
        assert statistics.fmean(s.util for s in rank_series(monitor, 0)[-5:]) < 20
        launched.signal(0)
        launched.expect("working", 0)
        # 256 MiB in the rank and 96 MiB in its helper (which inherits the rank from its parent)
        wait_for(lambda: rank_series(monitor, 0)[-1].mem_mb > rest_rss + 300)
        truth, reported = cpu_over(monitor, launched.pids, ticks=20)
        assert truth[0] > 10  # it spins: as much of a core as this (shared) machine gives it
        assert reported[0] == pytest.approx(truth[0], abs=15)  # percent of a core, as the kernel counted it
        assert reported[1] == pytest.approx(truth[1], abs=5) and reported[1] < 10
        assert rank_series(monitor, 1)[-1].mem_mb < rest_rss + 50
        launched.signal(0)
        launched.expect("resting", 0)
        wait_for(lambda: rank_series(monitor, 0)[-1].mem_mb < rest_rss + 50)
        wait_for(lambda: statistics.fmean(s.util for s in rank_series(monitor, 0)[-5:]) < 20)
    finally:
        samples = monitor.stop()
    assert {s.source for s in samples} == {Source.HOST} and {s.index for s in samples} == {0, 1}
    assert monitor.cpu_s > 0


def test_process_tree_finds_every_descendant_with_its_parent(launched: Launched) -> None:
    launched.expect("ready", 0)
    launched.expect("ready", 1)
    tree = process_tree(launched.proc.pid)
    assert sorted(tree) == sorted((launched.pids[r], launched.proc.pid) for r in (0, 1))
    assert sorted(_psutil_tree(launched.proc.pid)) == sorted(tree)  # the fallback where /proc has no children files
    assert process_tree(2**22 + 1) == []  # no such process


# ---------------------------------------------------------------- the scripts


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_nvsmi_aggregate_per_case_from_a_seed_001_monitor_log() -> None:
    done = run_script("scripts/nvsmi_aggregate.py", str(DATA / "progress" / "nvsmi_monitor.log"))
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split("\t") for line in done.stdout.splitlines()]
    table = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert list(table) == ["amp_pi_plus", "add_go2", "ase_humanoid"]
    amp = table["amp_pi_plus"]
    assert (amp["n"], amp["avg_util0"], amp["avg_util1"], amp["min_avg_util"]) == ("3", "32.67", "34", "32.67")
    assert (amp["p50_util"], amp["active_s"], amp["idle_s"], amp["max_mem0"], amp["max_mem1"]) == (
        "48",
        "2",
        "1",
        "23190",
        "22900",
    )
    assert (table["add_go2"]["avg_util0"], table["add_go2"]["avg_util1"]) == ("33", "28")


@NO_DRIVER
def test_gpu_window_says_there_is_no_gpu_and_exits_2() -> None:
    done = run_script("scripts/gpu_window.py", "--seconds", "1")
    assert done.returncode == 2
    assert "no NVIDIA GPU" in done.stderr and done.stdout == ""


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def trial_tree() -> Iterator[dict[str, int]]:
    """A trial's root with a worker under it, an orphaned worker outside the tree that still carries the trial's
    id (as a worker re-parented to the sweep does), and a stranger: all real, all waiting on stdin."""
    root = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', sys.argv[1]]);"
            " print(p.pid, flush=True); sys.stdin.read()",
            ORPHAN_WAIT,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    orphan = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_WAIT], stdin=subprocess.PIPE, env={**os.environ, "LADDER_TRIAL_ID": "t-own"}
    )
    stranger = subprocess.Popen(
        [sys.executable, "-c", ORPHAN_WAIT], stdin=subprocess.PIPE, env={**os.environ, "LADDER_TRIAL_ID": "t-other"}
    )
    try:
        assert root.stdout is not None
        worker = int(root.stdout.readline())
        yield {"root": root.pid, "worker": worker, "orphan": orphan.pid, "stranger": stranger.pid}
    finally:
        for proc in (orphan, stranger):
            proc.kill()
            proc.wait()
        os.killpg(root.pid, signal.SIGKILL)
        root.communicate()


def test_a_rank_killed_and_not_yet_reaped_gives_no_sample_not_zero() -> None:
    """A killed process stays a zombie until its parent reaps it; its /proc stat then reads 0 RSS and no CPU, which
    is no measurement: the sampler shows no figure for it (`-` on the console), as for a rank never seen."""
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(60)"])
    try:
        sampler = HostSampler(child.pid)
        wait_for(lambda: bool(sampler.sample(time.monotonic())) and sampler.sample(time.monotonic())[0].mem_mb > 32)
        os.kill(child.pid, signal.SIGKILL)
        wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE)  # not reaped: we have not waited
        assert sampler.sample(time.monotonic() + 10.0) == []
    finally:
        child.kill()
        child.wait()
