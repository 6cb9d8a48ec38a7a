"""A trainer whose progress counts vector steps, from PyPI: skrl's PPO on a gymnasium vector CartPole, trained by
skrl's SequentialTrainer (its tqdm bar counts timesteps, each one step of all `num_envs` envs), read by the `tqdm`
preset with `workload.samples_per_point="{num_envs}"`: samples/s is the trainer's own rate times its envs. Its
updates (16 steps of 32 envs) are too short to show between the bar's redraws: a bar only counts, so its window
stands once it has run its budget (kept short here), an `ok` of low confidence that says `cycle_unseen`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ladder.storage.tsv import read_tsv
from tests.helpers import DATA, need_module

need_module("skrl", "pip install skrl (the test extra)")

NUM_ENVS = 32
BAR = re.compile(r"\| (\d+)/\d+ \[(\d+):(\d\d)<")  # tqdm's bar: its count of timesteps and its elapsed mm:ss


def test_a_vector_step_counter_gives_samples_per_s_of_every_env(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "device=cpu",
        "reuse=false",
        f"output_root={tmp_path}/out",
        "case=amp_pi_plus",
        "profile=[default]",
        f"ladder.rungs=[{NUM_ENVS}]",
        "workload.kind=command",
        f'workload.command=["{sys.executable}","{DATA / "trainers" / "skrl_ppo.py"}","{{num_envs}}","10000000"]',
        "workload.progress_regex=tqdm",
        'workload.samples_per_point="{num_envs}"',
        "measure.window_s=3",
        "measure.trial_timeout_s=20",
        "measure.budget_s=25",
        "sweep=skrl",
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    (row,) = read_tsv(tmp_path / "out" / "case_gpu_bench_skrl" / "trials.tsv")
    assert (row["status"], row["reason"], row["confidence"]) == ("ok", "cycle_unseen", "low"), out
    assert "samples_per_s" in row, out
    bar = (tmp_path / "out" / "case_gpu_bench_skrl" / row["trial_dir"] / "stdout.log").read_text(errors="replace")
    marks = ticks([(int(c), 60 * int(m) + int(sec)) for c, m, sec in BAR.findall(bar)])
    assert len(marks) >= 10, bar[-2000:]
    (c0, t0), (c1, t1) = marks[len(marks) // 4], marks[-1]
    own = (c1 - c0) / (t1 - t0) * NUM_ENVS  # its own count over its own clock, past its start, times its envs
    measured = float(row["samples_per_s"])
    assert abs(measured - own) <= 0.1 * own, (measured, own)
    assert row["rate_reported"] == "0"  # counted from the bar's count, not its rate


def ticks(records: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The bar's records at which its elapsed second turned over (count, seconds): there its clock is exact to
    within one redraw. Its printed it/s is no reference on a busy machine: it is redrawn only while the trainer
    runs, so the stalls a loaded machine imposes weigh nothing in it."""
    return [(c, t) for (_, prev), (c, t) in zip(records, records[1:], strict=False) if t > prev]
