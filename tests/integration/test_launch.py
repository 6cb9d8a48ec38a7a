"""Launch and stop real process trees: nothing survives, the cgroup sees the OOM kill."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from ladder.core.spec import TrialSpec
from ladder.runner import launch, procs
from ladder.runner.cgroup import ROOT, MemCgroup, parents
from tests.helpers import live, wait_for

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


@pytest.fixture(scope="module", autouse=True)
def subreaper() -> None:
    launch.become_subreaper()


def test_stop_kills_the_whole_tree(tmp_path: Path) -> None:
    spec = TrialSpec(argv=(sys.executable, "-c", STUBBORN), env={"X_MARK": "1"})
    run = launch.start(spec, tmp_path, "t-stubborn", None)
    wait_for(lambda: b"child up" in (tmp_path / "stdout.log").read_bytes())
    assert len(launch.leftovers("t-stubborn")) >= 2
    code = launch.stop(run, grace_s=0.5)
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
    launch.stop(run, grace_s=0.5)
    assert run.cgroup_usage is not None  # read by the stop, before the cgroup went
    assert code == -9 and run.cgroup_usage.oom_kills >= 1
    assert 128 * 1024 * 1024 < run.cgroup_usage.peak_bytes <= 256 * 1024 * 1024
    assert not run.cgroup.path.exists()


def test_a_killed_orchestrator_takes_its_trial_with_it(tmp_path: Path) -> None:
    """SIGKILL cannot be handled, so the trial's launcher is asked to die with its parent (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess

    (tmp_path / "agent.yaml").write_text(AGENT)
    trial_dir = tmp_path / "trial"
    orch = subprocess.Popen([sys.executable, "-c", ORCHESTRATOR, str(trial_dir), str(tmp_path / "agent.yaml")])
    progress = trial_dir / "progress.jsonl"
    wait_for(lambda: progress.exists() and b'"iter"' in progress.read_bytes(), timeout_s=60)
    assert len(launch.leftovers("t-orphan")) >= 3  # torchrun and two ranks
    orch.send_signal(signal.SIGKILL)
    orch.wait()
    wait_for(lambda: not live(launch.leftovers("t-orphan")), 15)

    def stale() -> list[Path]:
        return [p for p, _ in parents(ROOT) for p in p.glob(f"ladder-{orch.pid}-t-orphan")]

    def cleaned() -> bool:
        procs.reap_orphans()  # they re-parented to this test process, a subreaper: zombies keep a cgroup busy
        procs.remove_stale()  # its orchestrator is dead, so its cgroup is stale; live orchestrators' ones are kept
        return not stale()

    wait_for(cleaned, 15)
