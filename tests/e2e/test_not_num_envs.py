"""A failure that is not num_envs': real torchrun, two gloo ranks whose collectives stop completing after their first
iterations, whatever the rung (as a rank stuck in a driver call, or a collective on a bad network path, hangs): rank 1
stops taking part at its third iteration and rank 0 waits in that all-reduce. Each trial is stopped at
`measure.stall_timeout_s` (`timeout`, `stalled`: a step-down, as a rung too big to keep up would be, and no line names
memory); after two such failures the walk tries the ladder's lowest rung, and its failing the same way ends the sweep
as a broken configuration: three launches, not one per rung, and no advice to step num_envs down."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv

# the torchrun DDP recipe's trainer (docs/recipes.md), with a rank that never takes part in a collective
HANGING_RANK = textwrap.dedent(
    """
    import argparse, threading
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser()
    parser.add_argument("--num-envs", type=int, required=True)
    num_envs = parser.parse_args().num_envs
    dist.init_process_group("gloo")
    steps, it = 32, 0
    while True:
        it += 1
        if it == 3 and dist.get_rank() == 1:
            threading.Event().wait()  # stuck, whatever num_envs is: no rung helps
        obs = torch.randn(steps, num_envs, 32)
        dist.all_reduce(obs.sum().reshape(1))
        if dist.get_rank() == 0:
            print(f"iter {it} samples {it * steps * num_envs * 2}", flush=True)
    """
)
RUNGS = [1024, 512, 256, 128, 64, 32]


def test_a_collective_that_hangs_at_every_rung_is_a_broken_configuration_after_the_lowest_rung(tmp_path: Path) -> None:
    (tmp_path / "train_ddp.py").write_text(HANGING_RANK)
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        "workload.kind=command",
        "case=my_ddp",
        "workload.launcher=torchrun",
        "workload.nproc=2",
        "device=cpu",
        'workload.cmd="python train_ddp.py --num-envs {num_envs}"',
        r"workload.progress_regex='iter (?P<iter>\d+) samples (?P<samples>\d+)'",
        f"ladder.rungs=[{','.join(map(str, RUNGS))}]",
        "profile=[default]",
        "measure.stall_timeout_s=6",  # rank 0 prints a line every few milliseconds while its peer takes part
        f"output_root={tmp_path}/out",
        "sweep=hang",
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == ExitCode.BROKEN_CONFIG, out
    sweep = tmp_path / "out" / "case_gpu_bench_hang"
    trials = read_tsv(sweep / "trials.tsv")
    assert [(t["num_envs"], t["status"], t["reason"]) for t in trials] == [
        ("1024", "timeout", "stalled"),
        ("512", "timeout", "stalled"),
        ("32", "timeout", "stalled"),  # the lowest rung next: 3 launches, not 6
    ], out
    assert "default: not num_envs: it failed at e32, the lowest rung" in out
    assert "num_envs is not the cause" in out and "step num_envs down (a lower ladder)" not in out
    (row,) = read_tsv(sweep / "best_by_case.tsv")
    assert (row["num_envs"], row["status"], row["class"]) == ("32", "timeout", "broken configuration"), row
    assert "stepping num_envs down will not help" in row["action"] and "default_e32" in row["action"]
