"""Launch and stop real process trees: nothing survives, the cgroup sees the OOM kill."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from ladder import launch
from ladder.cgroup import MemCgroup
from ladder.workloads.spec import TrialSpec

# A parent that ignores SIGTERM and a child that escapes into its own session (as torchrun's workers do).
STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('child up', flush=True); time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    print("parent up", child.pid, flush=True)
    time.sleep(600)
    """
)

HOG = "x = []\nwhile True:\n    x.append(bytearray(32 * 1024 * 1024))\n"


def wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    launch.become_subreaper()


def test_stop_kills_the_whole_tree(tmp_path: Path) -> None:
    spec = TrialSpec(argv=(sys.executable, "-c", STUBBORN), env={"X_MARK": "1"})
    run = launch.start(spec, tmp_path, "t-stubborn", None)
    wait_for(lambda: b"child up" in (tmp_path / "stdout.log").read_bytes())
    assert len(launch.leftovers("t-stubborn")) >= 2
    t0 = time.monotonic()
    code = launch.stop(run, grace_s=0.5)
    assert time.monotonic() - t0 < 5.0
    assert code == -9
    assert launch.leftovers("t-stubborn") == []
    assert (tmp_path / "env.txt").read_text() == "X_MARK=1\n"
    assert "-c" in (tmp_path / "cmd.txt").read_text()


def test_memory_cgroup_limit_is_a_real_kernel_oom_kill(tmp_path: Path) -> None:
    probe = MemCgroup.create("ladder-probe", None)
    if probe is None:
        pytest.skip("no writable memory cgroup on this machine: the launcher falls back to the process tree")
    probe.remove()
    run = launch.start(TrialSpec(argv=(sys.executable, "-c", HOG), env={}), tmp_path, "t-hog", 256 * 1024 * 1024)
    assert run.cgroup is not None
    code = run.proc.wait(timeout=60)
    oom_kills, peak = run.cgroup.oom_kills(), run.cgroup.peak_bytes()
    launch.stop(run, grace_s=0.5)
    assert code == -9 and oom_kills >= 1
    assert 128 * 1024 * 1024 < peak <= 256 * 1024 * 1024
    assert not run.cgroup.path.exists()


def test_free_port_is_bindable() -> None:
    import socket

    port = launch.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_no_orphans_left_by_this_module() -> None:
    mine = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert mine == []
