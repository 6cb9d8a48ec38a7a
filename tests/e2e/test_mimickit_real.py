"""The real MimicKit, end to end (`tests/e2e/mimickit_sweeps.py` says how it runs): a sweep under a memory cgroup, whose
top rung the kernel kills and whose lower one is measured, and what it records; the `hiutil` profile reaching
MimicKit's own agent config."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.e2e.mimickit_sweeps import (
    CASE,
    MK,
    SAMPLES_PER_ITER,
    SWAY,
    Sweep,
    finish,
    mimickit_table,
    run_search,
    search,
)
from tests.helpers import wait_for

pytestmark = pytest.mark.usefixtures("mimickit_ready")  # skipped with the reason where MimicKit cannot run


# ---- a sweep under a memory cgroup: the top rung is killed by the kernel, a lower one fits and is measured --------


@pytest.fixture(scope="module")
def cgroup_sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    out = tmp_path_factory.mktemp("mk_cgroup") / "output"
    return run_search(
        out,
        "cg",
        "profile=[default]",
        "ladder.rungs=[4096,4]",
        "workload.nproc=1",
        "workload.host_mem_limit_gb=1.5",
    )


def test_the_kernel_kills_the_top_rung_and_the_lower_one_is_measured(cgroup_sweep: Sweep) -> None:
    assert cgroup_sweep.code == ExitCode.PICK_FOUND, cgroup_sweep.out
    trials = [t for t in cgroup_sweep.trials() if t["variant"] == "default"]
    assert [(t["num_envs"], t["status"], t["reason"]) for t in trials] == [
        ("4096", "oom_or_nccl", "host_oom"),
        ("4", "ok", ""),
    ], cgroup_sweep.out
    top = cgroup_sweep.trial_dir(trials[0])
    assert trials[0]["exit_code"] == "-9"  # the kernel's SIGKILL
    assert "Iteration" not in (top / "stdout.log").read_text(errors="replace")  # killed while it built its envs
    (best,) = read_tsv(cgroup_sweep.dir / "best_by_case.tsv")
    assert (best["num_envs"], best["status"]) == ("4", "ok")
    assert float(best["max_mem0"]) > 300  # MimicKit's RSS: torch, warp, newton and 4 envs
    assert "best: " in cgroup_sweep.out and "e4" in cgroup_sweep.out.split("best: ")[1].splitlines()[0]


def test_the_top_rungs_evidence_is_the_cgroups_oom_kill(cgroup_sweep: Sweep) -> None:
    top = cgroup_sweep.trial("default", 4096)
    assert top["evidence"].startswith("memory cgroup ladder-") and "OOM kill" in top["evidence"], top["evidence"]


def test_the_env_patch_reaches_mimickit_and_the_checkout_is_untouched(cgroup_sweep: Sweep) -> None:
    trial = cgroup_sweep.trial_dir(cgroup_sweep.trial("default", 4))
    ours = yaml.safe_load((trial / "env.yaml").read_text())
    assert ours["motion_file"] == SWAY
    assert yaml.safe_load((trial / "env_config.yaml").read_text()) == ours  # MimicKit's own copy of what it ran
    assert f"Loaded motion file: {SWAY}" in (trial / "stdout.log").read_text(errors="replace")
    shipped = yaml.safe_load((MK / "data/envs/deepmimic_humanoid_env.yaml").read_text())
    assert shipped["motion_file"] != SWAY and {k: v for k, v in ours.items() if k != "motion_file"} == {
        k: v for k, v in shipped.items() if k != "motion_file"
    }
    assert f"--env_config {trial}/env.yaml" in (trial / "cmd.txt").read_text()


def agent_reached_mimickit(trial: Path) -> dict[str, Any] | None:
    """The agent config MimicKit itself copied to its out_dir (the trial folder) once it equals ladder's own (the case's
    agent with the profile applied); None before that."""
    written, ours = trial / "agent_config.yaml", trial / "agent.yaml"
    if not (written.is_file() and ours.is_file()):
        return None
    config = yaml.safe_load(written.read_text())
    return config if config == yaml.safe_load(ours.read_text()) else None


def test_the_default_profile_reaches_mimickits_own_agent_config(cgroup_sweep: Sweep) -> None:
    written = agent_reached_mimickit(cgroup_sweep.trial_dir(cgroup_sweep.trial("default", 4)))
    assert written is not None
    assert written["model"]["actor_net"] == written["model"]["critic_net"] == "fc_2layers_1024units"
    assert (written["actor_epochs"], written["actor_batch_size"]) == (5, 4)


def test_the_hiutil_profile_reaches_mimickits_own_agent_config(tmp_path: Path) -> None:
    """MimicKit copies its agent config once it has built its env and agent: the sweep is stopped there, since the
    `hiutil` profile's iterations (four times the default's update epochs) cost minutes here."""
    out = tmp_path / "output"
    proc = search(out, "hi", "profile=[hiutil]", "ladder.rungs=[4]", "workload.nproc=1")
    trial = out / "case_gpu_bench_hi" / "trials" / CASE / "hiutil_e4_probe_1"
    try:
        wait_for(lambda: agent_reached_mimickit(trial) is not None or proc.poll() is not None, 1500, 0.5)
        written = agent_reached_mimickit(trial)
        proc.send_signal(signal.SIGINT)
    finally:
        stopped = finish(proc, out, "hi", timeout_s=120)
    assert written is not None, stopped.out
    assert written["model"]["actor_net"] == written["model"]["critic_net"] == "fc_3layers_1024units"
    assert (written["actor_epochs"], written["actor_batch_size"]) == (20, 2)
    assert stopped.code == ExitCode.INTERRUPTED and [t["status"] for t in stopped.trials()] == ["interrupted"]


def test_progress_comes_from_the_stdout_table_and_samples_per_s_agrees_with_mimickit(cgroup_sweep: Sweep) -> None:
    trial_row = cgroup_sweep.trial("default", 4)
    best = trial_row
    table = mimickit_table((cgroup_sweep.trial_dir(trial_row) / "stdout.log").read_text(errors="replace"))
    assert len(table) >= 3, table
    per_iter = SAMPLES_PER_ITER * 4
    assert {b["Samples"] - a["Samples"] for a, b in zip(table, table[1:], strict=False)} == {per_iter}
    rate, window_s, iters = float(best["samples_per_s"]), float(best["window_s"]), int(float(trial_row["n_iters"]))
    # whole iterations; the rate is recorded to 0.1 (off by 0.05 at most) and window_s to 0.01 s (0.005)
    assert iters >= 1 and abs(iters * per_iter / window_s - rate) <= 0.05 + rate * 0.005 / window_s + 1e-9
    # The trial is stopped once its window is measured: the window is the table's last `iters` iterations.
    # MimicKit's Wall_Time is in hours at 3 significant digits: a reading is off by at most half its last digit.
    first, last = table[-1 - iters], table[-1]
    wall_s = (last["Wall_Time"] - first["Wall_Time"]) * 3600
    rounding_s = sum(_half_last_digit(row["Wall_Time"]) for row in (first, last)) * 3600
    theirs = (last["Samples"] - first["Samples"]) / wall_s
    assert abs(rate - theirs) <= 0.05 * theirs + rate * rounding_s / wall_s + 0.05, (rate, theirs, wall_s, rounding_s)


def _half_last_digit(value: float) -> float:
    """Half a unit in the last place of `%8.3g`: the most a printed value is off by."""
    exponent = int(f"{value:.2e}".split("e")[1])
    return 0.5 * 10.0 ** (exponent - 2)


def test_settings_that_do_not_apply_are_neither_shown_nor_recorded(cgroup_sweep: Sweep) -> None:
    banner = next(line for line in cgroup_sweep.out.splitlines() if line.startswith("sweep cg:"))
    assert "1 x cpu" in banner and "emulated card" not in banner  # the config's 0.6 GB default is the proxy's
    (best,) = read_tsv(cgroup_sweep.dir / "best_by_case.tsv")
    assert (best["gpu_name"], best["gpu_mem_total"], best["emulate_gpu_mem_gb"]) == ("cpu", "", "")
    assert best["class"] == "unclassified" and best["action"].startswith("no class on CPU")
    assert "class: unclassified -> no class on CPU" in cgroup_sweep.out
