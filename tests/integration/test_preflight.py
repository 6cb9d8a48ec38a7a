"""Pre- and post-flight: busy GPUs by policy (wait, refuse, ignore), memory back at baseline, no leftovers.

There is no GPU here, so NVML is a stand-in (`StandInNvml`): a small stateful model of GPUs whose processes end
after a given number of readings, answering the three NVML calls `preflight.read_gpus` makes. Time is a clock
the gate's own `sleep` advances, so waiting is driven by the test, never slept through. Post-flight runs on
real processes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from ladder.runner import launch, preflight
from tests.helpers import wait_for

# ---- the stand-in NVML and clock


# ---- the pure core


# ---- reading NVML


# ---- the gate, by policy


# ---- post-flight, on real processes


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    launch.become_subreaper()


def test_check_leftovers_kills_and_reaps_what_carries_the_trial_id() -> None:
    env = {**os.environ, launch.TRIAL_ID_VAR: "t-preflight-leftover"}
    argv = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # blocks until killed: stdin never closes
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, start_new_session=True)
    try:
        # until the child has exec'd, /proc shows the parent's environment (no trial id): wait for its own
        wait_for(lambda: launch.leftovers("t-preflight-leftover") != [], timeout_s=60)
        assert preflight.check_leftovers("t-preflight-leftover") == (proc.pid,)
        proc.wait(timeout=5)  # already reaped by check_leftovers: returns at once
        assert not psutil.pid_exists(proc.pid)
        assert launch.leftovers("t-preflight-leftover") == []
        assert preflight.check_leftovers("t-preflight-leftover") == ()
    finally:
        proc.kill()
        proc.wait()
