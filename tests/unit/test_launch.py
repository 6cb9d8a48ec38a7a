"""Launch and stop real process trees: nothing survives, the cgroup sees the OOM kill."""

from __future__ import annotations

import textwrap

import psutil
import pytest

from ladder.runner import launch

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


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    launch.become_subreaper()


def test_free_port_is_bindable() -> None:
    import socket

    port = launch.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_no_orphans_left_by_this_module() -> None:
    mine = [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert mine == []


ORCHESTRATOR = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from ladder.runner import launch
    from ladder.core.spec import TrialSpec
    trial_dir = Path(sys.argv[1])
    argv = (sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
            "--master-addr", "127.0.0.1", "--master-port", str(launch.free_port()),
            "-m", "ladder.workloads.proxy", "--agent-config", sys.argv[2], "--method", "ppo", "--num-envs", "8",
            "--obs-dim", "16", "--act-dim", "4", "--sim-state-dim", "64", "--width-factor", "0.05",
            "--progress", str(trial_dir / "progress.jsonl"))
    launch.start(TrialSpec(argv=argv, env={"OMP_NUM_THREADS": "1"}), trial_dir, "t-orphan", None)
    import threading  # threads that die with it: the kernel re-sends the parent-death signal for each
    for _ in range(3):
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    time.sleep(600)  # the test SIGKILLs this process once the trial reports progress
    """
)

AGENT = textwrap.dedent(
    """
    model: {actor_net: fc_2layers_1024units, critic_net: fc_2layers_1024units}
    actor_optimizer: {type: SGD, learning_rate: 1e-4}
    critic_optimizer: {type: SGD, learning_rate: 1e-4}
    discount: 0.99
    steps_per_iter: 4
    actor_epochs: 1
    actor_batch_size: 2
    critic_epochs: 1
    critic_batch_size: 2
    td_lambda: 0.95
    ppo_clip_ratio: 0.2
    """
)
