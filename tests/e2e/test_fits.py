"""A fit outlives its memory peak, end to end (`python -m ladder.search` on small real trainers): a rung that dies at
its first update is stepped down from, never picked, however short the window; a rung that survives at its cap runs
once more, then the walk steps down, and the pick is a rung clear of its cap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.helpers import DATA, SHORT_WINDOW, need_memory_cgroups

QUICK = [
    "profile=[default]",
    "device=cpu",
    *SHORT_WINDOW,
    "measure.trial_timeout_s=60",
]


def search(tmp_path: Path, sweep: str, *overrides: str) -> tuple[int, str, list[dict[str, str]]]:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "workload.kind=command",
        f"case={sweep}",
        f"sweep={sweep}",
        f"output_root={tmp_path}/out",
        *QUICK,
        *overrides,
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    trials = read_tsv(tmp_path / "out" / f"case_gpu_bench_{sweep}" / "trials.tsv")
    return done.returncode, done.stdout + done.stderr, trials


# (the trainer's arguments, the window): a rollout of 0.4 s, well inside the three windows (0.9 s) after which even
# lines are taken for no rollout, also on a loaded machine; and one of 2 s that the machine stalls for half a second
# halfway through, as a loaded machine does (long enough to read as a pause, short enough that the settling rule
# alone would let a window that holds it close before the update)
ROLLOUTS = {
    "steady": ("--steps 20", "measure.window_s=0.3"),
    "stalled_mid_rollout": ("--steps 50 --step-s 0.04 --stall-s 0.5", "measure.window_s=1"),
}


@pytest.mark.parametrize(("rollout", "window"), ROLLOUTS.values(), ids=ROLLOUTS.keys())
def test_a_rung_that_fits_its_rollout_but_not_its_first_update_is_stepped_down_from(
    tmp_path: Path, rollout: str, window: str
) -> None:
    """Also where the machine stalls the trainer inside its first rollout: that one pause is not its update (a
    cadence is a pause that recurs), so a window that holds it is no fit."""
    need_memory_cgroups()
    code, out, trials = search(
        tmp_path,
        "bursty",
        f'workload.cmd="python {DATA / "trainers" / "bursty_update.py"} {{num_envs}} {rollout}"',
        "workload.progress_regex='global_step=(?P<samples>\\d+)'",
        "ladder.rungs=[400,16]",
        "workload.host_mem_limit_gb=0.3",
        window,
    )
    assert [(t["num_envs"], t["status"], t["reason"]) for t in trials] == [
        ("400", "oom_or_nccl", "host_oom"),
        ("16", "ok", ""),
    ], out
    assert code == ExitCode.PICK_FOUND and "best: bursty" in out and " e16 " in out.split("best: ")[1], out


def test_a_rung_at_its_cap_runs_once_more_then_the_walk_steps_down(tmp_path: Path) -> None:
    code, out, trials = search(
        tmp_path,
        "capped",
        f'workload.cmd="python {DATA / "trainers" / "near_cap.py"} {{num_envs}} progress.jsonl --cap-mb 640"',
        "workload.progress=jsonl",
        "ladder.rungs=[63,32]",
    )
    assert [(t["num_envs"], t["status"], t["reason"], t["confidence"]) for t in trials] == [
        ("63", "oom_or_nccl", "near_cap", "low"),
        ("63", "oom_or_nccl", "near_cap", "low"),
        ("32", "ok", "", "high"),
    ], out
    assert "630/640 MiB of its emulated card" in trials[0]["evidence"]
    (best,) = read_tsv(tmp_path / "out" / "case_gpu_bench_capped" / "best_by_case.tsv")
    assert (best["num_envs"], best["status"]) == ("32", "ok")
    assert code == ExitCode.PICK_FOUND, out


def test_an_unstable_pick_gets_a_second_window_before_it_counts(tmp_path: Path) -> None:
    """The pick's first window is wide (its trainer's lines came unevenly), so it is launched once more (not run
    on: more steps that uneven would not narrow it); the
    second, steady, window agrees and the pick stands as the two windows' median, stable once pooled."""
    code, out, trials = search(
        tmp_path,
        "noisy",
        f'workload.cmd="python {DATA / "trainers" / "noisy_once.py"} {{num_envs}} progress.jsonl {tmp_path}"',
        "workload.progress=jsonl",
        "ladder.rungs=[16]",
        "measure.window_s=3",
        "measure.max_ci_frac=0.2",
        "measure.recheck_unstable=true",
    )
    assert [(t["num_envs"], t["status"], t["unstable"], t["repeats"]) for t in trials] == [
        ("16", "ok", "1", ""),
        ("16", "ok", "0", "2"),
    ], out
    # its first window was so rough that no extension could have narrowed it: straight to the second launch
    assert trials[1]["step"] == "recheck" and trials[0]["window_futile"] == "1" and not trials[0].get("window_extended")
    (best,) = read_tsv(tmp_path / "out" / "case_gpu_bench_noisy" / "best_by_case.tsv")
    assert (best["num_envs"], best["unstable"], best["repeats"]) == ("16", "0", "2")
    assert code == ExitCode.PICK_FOUND and "unstable" not in out.split("best: ")[1].splitlines()[0], out


def test_a_lower_rung_that_wins_once_by_a_little_gets_a_second_window_and_the_largest_fit_stays_the_pick(
    tmp_path: Path,
) -> None:
    """On a plateau, e16's first run lands in a calm moment and beats e32 by 15% (more than the pick's 5% run-to-run
    allowance, less than four times it); its second window runs 10% slower. It stands as the lower of its two
    windows, and the pick is e32, where one window of e16 would have made it the pick."""
    code, out, trials = search(
        tmp_path,
        "lucky",
        f'workload.cmd="python {DATA / "trainers" / "lucky_once.py"} {{num_envs}} progress.jsonl {tmp_path}"',
        "workload.progress=jsonl",
        "ladder.rungs=[32,16]",
        "measure.window_s=3",
        "objective=samples_per_s",
    )
    assert [(t["num_envs"], t["status"], t["step"], t["repeats"]) for t in trials] == [
        ("32", "ok", "walk", ""),
        ("16", "ok", "descent", ""),
        ("16", "ok", "descent", "2"),
    ], out
    first, second = (float(t["samples_per_s"]) for t in trials[1:])
    assert second < float(trials[0]["samples_per_s"]) < first, out
    (best,) = read_tsv(tmp_path / "out" / "case_gpu_bench_lucky" / "best_by_case.tsv")
    assert best["num_envs"] == "32" and code == ExitCode.PICK_FOUND, out
    assert "16 envs beat 32 by" in trials[2]["why"] and "a second window before it counts" in trials[2]["why"]


def test_a_largest_fit_whose_window_was_wide_is_measured_again_before_a_lower_rung_takes_over(tmp_path: Path) -> None:
    """e32's first run lands in a slow stretch of the machine: its steps come unevenly, its window is wide and its
    mean half its rate, so e16 (10% slower in truth) beats it. Before the descent trusts that, e32 gets a second
    window; that one is narrow, it outweighs the wide one (set aside, and the best line says so), and e32 stays the
    pick, where the first window alone would have handed the pick to e16."""
    code, out, trials = search(
        tmp_path,
        "stretch",
        f'workload.cmd="python {DATA / "trainers" / "slow_once.py"} {{num_envs}} progress.jsonl {tmp_path}"',
        "workload.progress=jsonl",
        "ladder.rungs=[32,16]",
        "measure.window_s=2",
        "objective=samples_per_s",
    )
    assert [(t["num_envs"], t["status"], t["step"], t["window_unstable"]) for t in trials] == [
        ("32", "ok", "walk", "1"),
        ("16", "ok", "descent", "0"),
        ("32", "ok", "descent", "0"),
    ], out
    wide, lower, calm = (float(t["samples_per_s"]) for t in trials)
    assert wide < lower < calm, out
    assert "16 envs beat 32, whose one window was wide" in trials[2]["why"]
    (best,) = read_tsv(tmp_path / "out" / "case_gpu_bench_stretch" / "best_by_case.tsv")
    assert (best["num_envs"], best["repeats"], best["unstable"]) == ("32", "2", "0") and code == ExitCode.PICK_FOUND
    assert "1 of 2 windows (1 wide set aside)" in out.split("best: ")[1].splitlines()[0], out
    assert "note: 1 of the pick's 2 windows ran whole and stayed wide" in out, out
