"""The recipes of docs/recipes.md, as written there, on the real trainers installed from PyPI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ladder.storage.tsv import read_tsv
from tests.helpers import need_module, recipe


def run_recipe(tmp_path: Path, title: str, *small: str) -> tuple[Path, list[dict[str, str]], str]:
    """Runs the recipe in `tmp_path` (its script written there) with `small` settings for a short test; returns the
    sweep folder, its trials and the console."""
    script, overrides = recipe(title)
    if script:
        name = re.search(r"# (\S+\.py)", script)
        assert name is not None
        (tmp_path / name.group(1)).write_text(script)
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        *overrides,
        "device=cpu",
        f"output_root={tmp_path}/out",
        "sweep=r",
        "workload.env.OMP_NUM_THREADS=1",
        *small,
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    sweep = tmp_path / "out" / "case_gpu_bench_r"
    return sweep, read_tsv(sweep / "trials.tsv"), out


# short: a small rung or two, a 6 s window of at least 5 progress points (the suite is long enough)
SHORT = [
    "measure.window_s=6",
    "measure.warmup_iters=2",
    "measure.stable_k=2",
    "measure.stable_tol=5.0",
    "measure.warmup_timeout_s=120",
    "measure.startup_timeout_s=300",
    "measure.stall_timeout_s=300",
    "measure.trial_timeout_s=600",
    "measure.extend_unstable=false",
]


def test_rsl_rl_recipe(tmp_path: Path) -> None:
    """rsl_rl's real OnPolicyRunner on the recipe's point-mass VecEnv: its `Total steps` count gives samples/s."""
    need_module("rsl_rl")
    sweep, rows, out = run_recipe(tmp_path, "rsl_rl", "ladder.rungs=[64]", *SHORT)
    assert [(r["case"], r["knob"], r["num_envs"], r["status"]) for r in rows] == [
        ("rsl_point_mass", "num_envs", "64", "ok")
    ], out
    fit = rows[0]
    assert float(fit["samples_per_s"]) > 0 and fit["rate_reported"] == "0"  # counted, not its printed rate
    assert float(fit["n_iters"]) >= 4
    log = (sweep / fit["trial_dir"] / "stdout.log").read_text()
    assert "Learning iteration" in log and "Total steps:" in log and "Steps per second:" in log


def test_sheeprl_recipe(tmp_path: Path) -> None:
    """sheeprl's Hydra CLI with AsyncVectorEnv workers, as the recipe writes it: measured by its policy_step lines."""
    need_module("sheeprl")
    sweep, rows, out = run_recipe(tmp_path, "sheeprl", "ladder.rungs=[4]", *SHORT)
    assert [(r["case"], r["knob"], r["num_envs"], r["status"]) for r in rows] == [
        ("sheeprl_cartpole", "num_envs", "4", "ok")
    ], out
    fit = rows[0]
    assert float(fit["samples_per_s"]) > 0 and fit["rate_reported"] == "0"
    assert "Rank-0: policy_step=" in (sweep / fit["trial_dir"] / "stdout.log").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # its logs/ stayed in the trial folder


def test_stable_baselines3_recipe(tmp_path: Path) -> None:
    need_module("stable_baselines3")
    sweep, rows, out = run_recipe(tmp_path, "stable-baselines3", "ladder.rungs=[4]", *SHORT)
    assert [(r["case"], r["knob"], r["num_envs"], r["status"]) for r in rows] == [
        ("sb3_cartpole", "num_envs", "4", "ok")
    ], out
    fit = rows[0]
    assert float(fit["samples_per_s"]) > 0 and fit["rate_reported"] == "0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "train_sb3.py"]  # nothing written beside it
    assert "total_timesteps" in (sweep / fit["trial_dir"] / "stdout.log").read_text()


def test_torchrun_lightning_recipe_as_users_write_it_steps_down_on_its_own_oom(tmp_path: Path) -> None:
    """Lightning's DDP over two gloo ranks under torchrun, the command written `python train_lightning.py ...` as a
    user runs it alone: under a 1.5 GiB memory cgroup the top rung runs out of memory at its first update and is
    stepped down from; the rung below is measured from rank 0's lines."""
    need_module("lightning")
    sweep, rows, out = run_recipe(tmp_path, "torchrun DDP with Lightning", "workload.host_mem_limit_gb=1.5", *SHORT)
    by_rung = {r["num_envs"]: r for r in rows}
    assert list(by_rung) == ["16384", "256"], out
    top, fit = by_rung["16384"], by_rung["256"]
    assert (top["status"], top["launcher"]) == ("oom_or_nccl", "torchrun"), out
    assert fit["status"] == "ok" and float(fit["samples_per_s"]) > 0 and fit["n_gpus"] == "2", out
    cmd = (sweep / fit["trial_dir"] / "cmd.txt").read_text()
    assert "--no-python" in cmd and "train_lightning.py" in cmd
    assert "can't open file" not in (sweep / top["trial_dir"] / "stdout.log").read_text()
