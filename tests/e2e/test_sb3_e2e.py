"""End to end with a real third-party trainer from PyPI: stable-baselines3 PPO (tests/data/trainers/sb3_ppo.py,
`--n-envs` as the knob) through `python -m ladder.search ... workload.kind=command` and the `sb3` progress preset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ladder.runner.cgroup import MemCgroup
from ladder.storage.tsv import read_tsv
from tests.helpers import DATA, need_module

need_module("stable_baselines3", "pip install stable-baselines3 (the test extra)")

TRAINER = DATA / "trainers" / "sb3_ppo.py"
QUICK = [
    "profile=[default]",
    "measure.window_s=2",
    "measure.warmup_iters=2",
    "measure.stable_k=2",
    "measure.stable_tol=1.0",
    "measure.warmup_timeout_s=8",
    "measure.extend_unstable=false",
]


def search(
    tmp_path: Path, sweep: str, trainer_args: list[str], *overrides: str, trainer: Path = TRAINER
) -> tuple[str, list[dict[str, str]]]:
    command = ",".join(["'{python}'", str(trainer), "--n-envs", "'{num_envs}'", *trainer_args])
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "case=amp_pi_plus",
        "device=cpu",
        f"output_root={tmp_path}/out",
        "workload.kind=command",
        f"workload.command=[{command}]",
        "workload.progress=regex",
        "workload.progress_regex=sb3",
        f"sweep={sweep}",
        *QUICK,
        *overrides,
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    out = done.stdout + done.stderr
    return out, read_tsv(tmp_path / "out" / f"case_gpu_bench_{sweep}" / "trials.tsv")


def test_a_rung_that_dies_in_its_first_update_is_never_ok_and_the_preset_gives_samples_per_s(tmp_path: Path) -> None:
    """Each env makes the trainer hold 48 MiB at its first update: under a 1 GiB memory cgroup, 32 envs (1.5 GiB)
    are killed there, 4 envs (192 MiB) run and are measured by sb3's own `total_timesteps` count."""
    probe = MemCgroup.create("ladder-probe-sb3", None)
    if probe is None:
        pytest.skip("no writable memory cgroup on this machine")
    probe.remove()
    out, trials = search(
        tmp_path,
        "oom",
        ["--grab-mb-per-env", "48"],
        "ladder.rungs=[32,4]",
        "objective=samples_per_s",
        "workload.host_mem_limit_gb=1",
    )
    by_rung = {t["num_envs"]: t for t in trials}
    assert set(by_rung) == {"32", "4"}, out
    assert by_rung["32"]["status"] not in ("ok", "unmeasured"), out  # it died in its first update
    assert by_rung["32"].get("samples_per_s", "") == ""
    fit = by_rung["4"]
    assert fit["status"] == "ok", out
    assert float(fit["samples_per_s"]) > 0 and fit["rate_reported"] == "0"  # counted from total_timesteps
    assert 0 <= float(fit["samples_per_s_lo"]) <= float(fit["samples_per_s"]) <= float(fit["samples_per_s_hi"])
    assert float(fit["n_iters"]) >= 4  # min_window_iters (5) points: 4 intervals at least
    assert "best: " in out and "e4" in out.split("best: ")[1].splitlines()[0] and "none" not in out.split("best: ")[1]


def test_a_trainer_that_prints_rarely_is_unmeasured_or_measured_never_ok_without_figures(tmp_path: Path) -> None:
    """sb3 prints its table every 30 iterations: within a 30 s trial it shows few points. It must come out
    `unmeasured` (no figures, the summary says so and what to try) or `ok` with a real measurement."""
    out, trials = search(
        tmp_path,
        "rare",
        ["--log-interval", "30"],
        "ladder.rungs=[4]",
        "measure.trial_timeout_s=30",
        "measure.budget_s=30",
        "measure.startup_timeout_s=60",
    )
    assert len(trials) == 1, out
    row = trials[0]
    assert row["status"] in ("ok", "unmeasured", "error"), out
    if row["status"] == "ok":
        assert float(row["samples_per_s"]) > 0 and float(row["n_iters"]) >= 4 * 30
    elif row["status"] == "unmeasured":
        assert row["reason"] == "few_points" and row.get("samples_per_s", "") == ""
        assert "measure.budget_s" in row["evidence"]
        assert "survived but is unmeasured" in out and "none of the rungs fits" not in out
    else:  # not one table in 30 s on a loaded machine: nothing matched, said as such (never a step-down)
        assert row["reason"] == "no_progress_match" and "total_timesteps" in row["evidence"], out


def test_a_rung_whose_training_goes_nan_is_diverged_never_the_pick_and_not_a_step_down(tmp_path: Path) -> None:
    """sb3's DQN keeps running when its loss goes NaN and prints `| loss | nan |` in its table. Above 4 envs it is
    given a learning rate that sends it there (tests/data/trainers/sb3_dqn.py): 8 envs fits in memory but is
    `diverged`, shown with its line, and the walk goes on to 2 envs, which trains and is the pick."""
    out, trials = search(
        tmp_path,
        "nan",
        ["--diverge-above", "4"],
        "ladder.rungs=[8,2]",
        "objective=samples_per_s",
        trainer=DATA / "trainers" / "sb3_dqn.py",
    )
    by_rung = {t["num_envs"]: t for t in trials}
    assert set(by_rung) == {"8", "2"}, out
    assert by_rung["8"]["status"] == "diverged", out
    assert "loss" in by_rung["8"]["evidence"] and "nan" in by_rung["8"]["evidence"].lower()
    assert by_rung["2"]["status"] == "ok", out
    shown = next(line for line in out.splitlines() if "diverged in default e8" in line)
    assert "loss" in shown and "nan" in shown, out
    best = out.split("best: ")[1].splitlines()[0]
    assert "none" not in best and "e2" in best, out


def test_a_rung_whose_training_goes_nan_is_stopped_at_that_line_not_measured_for_its_window(tmp_path: Path) -> None:
    """With a window far longer than the trainer takes to go NaN, the trial can only end early by ladder's stop at the
    line sb3 prints (`| loss | nan |`): no window makes a diverged rung an answer. The sweep says none is."""
    out, trials = search(
        tmp_path,
        "nanstop",
        ["--diverge-above", "4"],
        "ladder.rungs=[8]",
        "measure.window_s=600",
        "measure.trial_timeout_s=900",
        trainer=DATA / "trainers" / "sb3_dqn.py",
    )
    (row,) = trials
    assert row["status"] == "diverged" and "nan" in row["evidence"].lower(), out
    trial_dir = tmp_path / "out" / "case_gpu_bench_nanstop" / row["trial_dir"]
    assert json.loads((trial_dir / "verdict.json").read_text())["stopped_by"] == "diverged", out
    assert "trained to NaN or inf" in out, out
