"""A Hydra-configured third-party trainer with env-worker processes, from PyPI: sheeprl's PPO on CartPole
(`sheeprl exp=ppo env=gym ...`, `env.num_envs` as the knob, gymnasium's AsyncVectorEnv: one worker process per
env), run by `python -m ladder.search workload.kind=command` under a real memory cgroup, read by the `sheeprl`
progress preset."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.helpers import need_memory_cgroups, need_module

need_module("sheeprl", "pip install sheeprl (the test extra)")

# An env that holds `grab_mb` MiB once it has stepped (as an env whose state grows with use would): each env lives
# in its own AsyncVectorEnv worker process. The workers grow together, each smaller than the parent (~440 MiB RSS),
# so each marks itself as the kernel's first pick, as Ray's workers do: the kernel kills a worker, not the parent (seen
# in the kernel log: the process killed had oom_score_adj 1000); ladder stops the trial at that first evidence, before
# the parent's own ending. Without a cap the cgroup peaked at 412 MiB at e2 with 48 MiB each, 1210 at e16.
CAP_MB, GRAB_MB = 768, 48

GRAB_ENV = textwrap.dedent(
    """
    import gymnasium as gym
    import numpy as np


    class Grab(gym.Wrapper):
        def __init__(self, env, mb):
            super().__init__(env)
            self.mb, self.held = mb, None

        def step(self, action):
            if self.held is None and self.mb:
                with open("/proc/self/oom_score_adj", "w") as fh:  # the kernel's first pick, as Ray's workers are
                    fh.write("1000")
                self.held = np.ones(int(self.mb * 2**20), dtype=np.uint8)  # written: charged to the cgroup
            return self.env.step(action)


    def make(id, render_mode=None, grab_mb=0.0):
        return Grab(gym.make(id, render_mode=render_mode), grab_mb)
    """
)
# a short run: small rollouts and updates, no video, no checkpoints, no evaluation at the end
SHEEPRL = [
    "exp=ppo",
    "env=gym",
    "env.id=CartPole-v1",
    "fabric.accelerator=cpu",
    "env.capture_video=False",
    "algo.rollout_steps=32",
    "algo.update_epochs=1",
    "checkpoint.every=1000000000",
    "checkpoint.save_last=False",
    "algo.run_test=False",
]
QUICK = [
    "device=cpu",
    "profile=[default]",
    "workload.progress=regex",
    "workload.progress_regex=sheeprl",
    "measure.window_s=4",
    "measure.warmup_iters=2",
    "measure.stable_k=2",
    "measure.stable_tol=5.0",
    "measure.warmup_timeout_s=60",
    "measure.startup_timeout_s=120",
    "measure.trial_timeout_s=240",
    "measure.extend_unstable=false",
    "workload.env.OMP_NUM_THREADS=1",
]


def search(tmp_path: Path, sweep: str, *overrides: str, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    program = shutil.which("sheeprl") or str(Path(sys.executable).with_name("sheeprl"))
    command = shlex.join([program, *SHEEPRL, "env.num_envs={num_envs}", *extra])
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "workload.kind=command",
        "case=sheeprl_cartpole",
        f"output_root={tmp_path}/out",
        f"sweep={sweep}",
        f'workload.cmd="{command}"',
        *QUICK,
        *overrides,
    ]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)


def rows(tmp_path: Path, sweep: str) -> dict[str, dict[str, str]]:
    return {r["num_envs"]: r for r in read_tsv(tmp_path / "out" / f"case_gpu_bench_{sweep}" / "trials.tsv")}


def test_a_fitting_rung_is_measured_and_a_worker_killed_by_the_cap_is_host_oom(tmp_path: Path) -> None:
    need_memory_cgroups()
    (tmp_path / "grab_env.py").write_text(GRAB_ENV)
    done = search(
        tmp_path,
        "capped",
        "ladder.rungs=[16,2]",
        "objective=samples_per_s",
        f"workload.host_mem_limit_gb={CAP_MB / 1024}",
        f"workload.env.PYTHONPATH={tmp_path}",
        extra=("env.wrapper._target_=grab_env.make", f"+env.wrapper.grab_mb={GRAB_MB}"),
    )
    out = done.stdout + done.stderr
    got = rows(tmp_path, "capped")
    assert set(got) == {"16", "2"}, out
    over, fits = got["16"], got["2"]
    assert fits["status"] == "ok", out
    assert float(fits["samples_per_s"]) > 0 and fits["rate_reported"] == "0"  # counted from policy_step
    assert 0 <= float(fits["samples_per_s_lo"]) <= float(fits["samples_per_s"]) <= float(fits["samples_per_s_hi"])
    assert float(fits["cgroup_peak_mb"]) <= CAP_MB

    assert (over["status"], over["reason"]) == ("oom_or_nccl", "host_oom"), out
    assert "OOM kill" in over["evidence"], over["evidence"]
    assert "memory cgroup ladder-" in over["evidence"] and over.get("samples_per_s", "") == ""
    assert done.returncode == ExitCode.PICK_FOUND, out


def test_a_typo_in_a_hydra_override_is_a_broken_configuration_with_hydras_own_message(tmp_path: Path) -> None:
    """`algo.rollout_stepz=32`: sheeprl's Hydra refuses it before training; the trial is `error` (never a step-down),
    its evidence is what Hydra said was wrong (not its HYDRA_FULL_ERROR hint), and the exit code says so."""
    done = search(tmp_path, "typo", "ladder.rungs=[4,2]", extra=("algo.rollout_stepz=32",))
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.BROKEN_CONFIG, out
    got = rows(tmp_path, "typo")
    assert list(got) == ["4"], out  # a broken configuration is not stepped down
    row = got["4"]
    assert row["status"] == "error", out
    assert "rollout_stepz" in row["evidence"] and "HYDRA_FULL_ERROR" not in row["evidence"], row["evidence"]
    log = (tmp_path / "out" / "case_gpu_bench_typo" / row["trial_dir"] / "stdout.log").read_text()
    assert "Set the environment variable HYDRA_FULL_ERROR=1" in log  # the hint was there, and not taken
