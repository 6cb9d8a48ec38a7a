"""What ending a trial costs once its window has closed: killed at once, next to SIGTERM and a grace period.

`python scripts/bench_stop.py [--runs 5]`

Real proxy trials (2 gloo ranks under torchrun, CPU) through `trial.run`, the sweep's code path, with a 2 s window.
Runs alternate between the two ways of ending the group once the window is measured:

* at once (ladder's): SIGKILL to the group, then every process carrying the trial's id, then the reap;
* graceful (before): SIGTERM to the group, up to `kill_grace_s` for torchrun to stop its workers, then the same.

The cost of one run is from the trainer's last progress line (the one that closed the window; its time is the
trainer's own clock) to `trial.run` returning, with its verdict written. Every run must end `ok` with no process of
the trial alive. Last line: `window_end_to_return_s at_once=<x> graceful=<y> saved=<y-x>` (medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_failures import CASE  # a small proxy case (this folder: scripts/ is on the path of a script run)

from ladder.core.records import Status, StopCause
from ladder.runner import launch, trial
from ladder.runner.host import HostSampler
from ladder.settings.config import MeasureConf, Profile, WorkloadConf
from ladder.workloads import progress
from ladder.workloads.builtin import Placement, plan_proxy

MEASURE = MeasureConf(
    warmup_iters=1,
    stable_k=2,
    stable_tol=0.5,
    window_s=2.0,
    warmup_timeout_s=120.0,
    stall_timeout_s=120.0,
    trial_timeout_s=300.0,
    kill_grace_s=5.0,
)
GRACEFUL = frozenset({StopCause.OUT_OF_MEMORY})  # before: only an out-of-memory stop skipped the grace


def one(root: Path, n: int, at_once: bool) -> float:
    trial_dir = root / f"run{n}_{'at_once' if at_once else 'graceful'}"
    workload = WorkloadConf(width_factor=0.125, nproc=2, emulate_gpu_mem_gb=64.0)
    place = Placement("cpu", 2, launch.free_port(), sys.executable)
    spec = plan_proxy(CASE, Profile("default", {}), 16, workload, place, str(trial_dir), 300.0, {})
    trial_id, kept = f"bench-stop-{os.getpid()}-{n}", trial.KILL_AT_ONCE
    trial.KILL_AT_ONCE = kept if at_once else GRACEFUL
    try:
        result = trial.run(trial.TrialRequest(spec, trial_dir, trial_id, MEASURE), HostSampler)
        returned = time.time()
    finally:
        trial.KILL_AT_ONCE = kept
    if result.verdict.status is not Status.OK or result.leftovers or launch.leftovers(trial_id):
        raise SystemExit(f"bench_stop: run {n} ended {result.verdict} with {result.leftovers} leftovers ({trial_dir})")
    points = progress.read_all(trial_dir / spec.progress_file)
    return returned - points[-1].t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each way, alternating")
    args = parser.parse_args()
    launch.become_subreaper()
    costs: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="ladder-bench-stop-") as tmp:
        for n in range(2 * args.runs):
            at_once = n % 2 == 0
            costs[at_once].append(one(Path(tmp), n, at_once))
            print(f"  run {n}: {'at once ' if at_once else 'graceful'} {costs[at_once][-1]:.2f} s", flush=True)
    fast, slow = statistics.median(costs[True]), statistics.median(costs[False])
    print(f"window_end_to_return_s at_once={fast:.2f} graceful={slow:.2f} saved={slow - fast:.2f}")


if __name__ == "__main__":
    main()
