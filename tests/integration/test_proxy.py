"""The proxy trainer as real processes: alone, under torchrun, under an emulated memory cap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ladder.core.torchenv import rank_env
from ladder.runner.launch import free_port
from tests.helpers import DATA, REPO, wait_for

ROOT = REPO
AGENTS = DATA / "agents"
STEPS_PER_ITER = 32  # every agent YAML used here
FLOAT_BYTES = 4
SHAPE = {"obs": 32, "act": 8, "disc_obs": 64}  # small, so a test run takes a second or two


def proxy_args(agent: str | Path, method: str, num_envs: int, sim_state_dim: int = 256) -> list[str]:
    return [
        "--agent-config",
        str(AGENTS / agent),
        "--method",
        method,
        "--num-envs",
        str(num_envs),
        "--obs-dim",
        str(SHAPE["obs"]),
        "--act-dim",
        str(SHAPE["act"]),
        "--disc-obs-dim",
        str(SHAPE["disc_obs"]),
        "--sim-state-dim",
        str(sim_state_dim),
        "--width-factor",
        "0.125",
    ]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def run_proxy(args: list[str], nproc: int = 0, torchrun_args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """Run the proxy alone (nproc 0) or under torchrun with nproc ranks; always reaped."""
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *torchrun_args]
    argv = [sys.executable, *(launcher if nproc else []), "-m", "ladder.workloads.proxy", *args]
    return subprocess.run(argv, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120)


def read_progress(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    start, *iters = [json.loads(line) for line in path.read_text().splitlines()]
    return start, iters


def write_agent(tmp_path: Path, source: str, **model: str) -> Path:
    text = (AGENTS / source).read_text()
    for key, value in model.items():
        text = "\n".join(
            f'  {key}: "{value}"' if line.strip().startswith(f"{key}:") else line for line in text.splitlines()
        )
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return path


def test_single_process_writes_start_and_three_iterations(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    args = [*proxy_args("amp_pi_plus_agent.yaml", "amp", 8), "--max-iters", "3", "--progress", str(progress)]
    done = run_proxy(args)
    assert done.returncode == 0, done.stderr
    start, iters = read_progress(progress)
    assert (start["event"], start["world_size"], start["device"]) == ("start", 1, "cpu")
    assert start["nets"] == {"actor": [128, 128], "critic": [128, 128], "disc": [128, 128]}
    assert [r["iter"] for r in iters] == [1, 2, 3]
    assert [r["samples"] for r in iters] == [8 * STEPS_PER_ITER * i for i in (1, 2, 3)]
    assert all(len(r["peak_mem_mb"]) == 1 and r["step_time_s"] > 0 for r in iters)


def test_torchrun_two_ranks_on_gloo(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    args = [*proxy_args("amp_pi_plus_agent.yaml", "amp", 8), "--max-iters", "2", "--progress", str(progress)]
    done = run_proxy(args, nproc=2)
    assert done.returncode == 0, done.stderr
    start, iters = read_progress(progress)
    assert start["world_size"] == 2
    assert [(r["world_size"], len(r["peak_mem_mb"])) for r in iters] == [(2, 2), (2, 2)]
    assert [r["samples"] for r in iters] == [8 * STEPS_PER_ITER * 2 * i for i in (1, 2)]


def test_a_rank_started_before_rank_0_waits_for_its_store_and_the_two_train_as_one_group(tmp_path: Path) -> None:
    """Without torchrun's agent, rank 0 hosts the rendezvous store: rank 1, started first, waits until it listens
    (torch's own client, refused, would back off for most of a second), then both ranks train together."""
    progress = tmp_path / "progress.jsonl"
    args = [*proxy_args("amp_pi_plus_agent.yaml", "amp", 8), "--max-iters", "2", "--progress", str(progress)]
    port = free_port()

    def rank(r: int) -> subprocess.Popen[str]:
        env = child_env() | rank_env(r, 2, port, str(tmp_path / "ranks"))
        argv = [sys.executable, "-m", "ladder.workloads.proxy", *args]
        return subprocess.Popen(argv, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)

    said: list[str] = []
    waiting = "waiting for rank 0's rendezvous store"
    first = rank(1)
    try:
        threading.Thread(target=lambda: said.extend(first.stderr or ()), daemon=True).start()
        wait_for(lambda: any(waiting in line for line in said) or first.poll() is not None)
        assert first.poll() is None, "".join(said)
        zero = rank(0)
        _, err0 = zero.communicate(timeout=120)
        assert zero.returncode == 0, err0
        assert first.wait(timeout=120) == 0, "".join(said)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    start, iters = read_progress(progress)
    assert start["world_size"] == 2 and [(r["iter"], r["world_size"]) for r in iters] == [(1, 2), (2, 2)]
    assert f"waiting for rank 0's rendezvous store at 127.0.0.1:{port}" in "".join(said)


def test_peak_memory_grows_by_at_least_sim_state_and_rollout_buffer(tmp_path: Path) -> None:
    small, large, sim_state_dim = 16, 1024, 8192
    peaks = {}
    for num_envs in (small, large):
        progress = tmp_path / f"progress_{num_envs}.jsonl"
        args = [*proxy_args("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", num_envs, sim_state_dim)]
        done = run_proxy([*args, "--max-iters", "1", "--progress", str(progress)])
        assert done.returncode == 0, done.stderr
        peaks[num_envs] = read_progress(progress)[1][-1]["peak_mem_mb"][0]
    # obs, actions and six per-step scalars (logp, reward, value, done, return, advantage) per env and step
    buffer_floats = STEPS_PER_ITER * (SHAPE["obs"] + SHAPE["act"] + 6)
    expected_mb = (large - small) * (sim_state_dim + buffer_floats) * FLOAT_BYTES / 2**20
    assert peaks[large] - peaks[small] >= expected_mb


@pytest.mark.parametrize(
    ("cap_mb", "expect_ok"), [(8, False), (1024, True)], ids=["tight-cap-fails-in-allocator", "generous-cap-runs"]
)
def test_emulated_memory_cap(cap_mb: int, expect_ok: bool) -> None:
    # 256 envs × 16384 floats: the sim state alone is 16 MiB
    args = proxy_args("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", 256, 16384)
    done = run_proxy([*args, "--max-iters", "1", "--emulate-mem-mb", str(cap_mb)])
    assert (done.returncode == 0) == expect_ok, done.stderr
    assert ("DefaultCPUAllocator" in done.stderr) != expect_ok


def test_a_capped_rank_with_adam_never_imports_torch_dynamo() -> None:
    """The proxy steps its own optimizers: no torch._dynamo (2 s of CPU at each cold rank's start) is imported, so no
    import happens late, under the emulated cap, either (`python -X importtime` lists every import)."""
    args = proxy_args("ase_humanoid_agent.yaml", "ase", 16)  # Adam, whose moments appear at the first update
    argv = [sys.executable, "-X", "importtime", "-m", "ladder.workloads.proxy", *args, "--max-iters", "2"]
    done = subprocess.run(
        [*argv, "--emulate-mem-mb", "1024"], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "torch" in imported and "ladder.workloads.proxy.trainer" in imported  # what the listing shows
    assert not [m for m in imported if m.startswith(("torch._dynamo", "sympy"))]


def test_cap_under_torchrun_leaves_error_files(tmp_path: Path) -> None:
    args = [*proxy_args("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", 256, 16384), "--emulate-mem-mb", "8"]
    done = run_proxy([*args, "--max-iters", "1"], nproc=2, torchrun_args=("--log-dir", str(tmp_path / "logs")))
    assert done.returncode != 0
    error_files = sorted((tmp_path / "logs").glob("*/attempt_0/*/error.json"))
    assert error_files, done.stderr
    assert any("DefaultCPUAllocator" in path.read_text() for path in error_files)


@pytest.mark.parametrize(
    ("agent", "method", "nets"),
    [
        (
            "ase_humanoid_agent.yaml",
            "ase",
            {"actor": [128, 128, 64], "critic": [128, 128, 64], "disc": [128, 128, 64], "enc": [128, 128]},
        ),
        ("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", {"actor": [128, 128], "critic": [128, 128]}),
    ],
    ids=["ase-disc-and-encoder", "deepmimic-no-disc"],
)
def test_method_decides_disc_and_encoder(tmp_path: Path, agent: str, method: str, nets: dict[str, list[int]]) -> None:
    progress = tmp_path / "progress.jsonl"
    done = run_proxy([*proxy_args(agent, method, 8), "--max-iters", "1", "--progress", str(progress)])
    assert done.returncode == 0, done.stderr
    start, iters = read_progress(progress)
    assert start["nets"] == nets
    assert len(iters) == 1


def test_unknown_net_exits_2_naming_known_nets(tmp_path: Path) -> None:
    agent = write_agent(tmp_path, "amp_pi_plus_agent.yaml", actor_net="fc_9layers_64units")
    done = run_proxy([*proxy_args(agent, "amp", 8), "--max-iters", "1"])
    assert done.returncode == 2
    assert "fc_9layers_64units" in done.stderr
    assert "fc_2layers_1024units" in done.stderr and "fc_3layers_1024units" in done.stderr


def test_max_seconds_ends_cleanly(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    args = [*proxy_args("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", 8), "--max-seconds", "1"]
    done = run_proxy([*args, "--progress", str(progress)])
    assert done.returncode == 0, done.stderr
    assert read_progress(progress)[1][-1]["wall_s"] >= 1.0


def test_sigterm_ends_a_run_without_limits() -> None:
    argv = [sys.executable, "-m", "ladder.workloads.proxy", *proxy_args("deepmimic_humanoid_ppo_agent.yaml", "ppo", 8)]
    proc = subprocess.Popen(argv, cwd=ROOT, env=child_env(), stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # blocks until the trainer reports that setup finished
            if "proxy started" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize(
    ("fault", "extra", "expect_in_stderr"),
    [
        ("exit", [], ""),
        ("keyerror", [], "KeyError: 'ladder_fault_injection_missing_key'"),
        ("oom", ["--emulate-mem-mb", "256"], "DefaultCPUAllocator: can't allocate memory"),
    ],
    ids=["exit", "keyerror", "oom-under-cap"],
)
def test_fault_injection_fails_at_the_given_iteration(
    tmp_path: Path, fault: str, extra: list[str], expect_in_stderr: str
) -> None:
    progress = tmp_path / "progress.jsonl"
    args = [*proxy_args("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", 8), "--progress", str(progress), *extra]
    done = run_proxy([*args, "--fault", fault, "--fault-rank", "0", "--fault-iter", "3"])
    assert done.returncode == 1, done.stderr
    assert f"injecting fault {fault} at iteration 3 on rank 0" in done.stderr
    assert expect_in_stderr in done.stderr
    assert [r["iter"] for r in read_progress(progress)[1]] == [1, 2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fault", "oom"], "--fault oom needs --emulate-mem-mb"),
        (["--fault", "exit", "--fault-rank", "1"], "--fault-rank 1 is not a rank of 1"),
    ],
    ids=["oom-without-cap", "rank-outside-the-job"],
)
def test_fault_that_could_not_fire_as_asked_exits_2(args: list[str], message: str) -> None:
    done = run_proxy([*proxy_args("deepmimic_humanoid_ppo_agent.yaml", "deepmimic", 8), "--max-iters", "1", *args])
    assert done.returncode == 2
    assert message in done.stderr
