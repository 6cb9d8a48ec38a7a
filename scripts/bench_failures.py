"""How long a failed trial takes to reach a verdict under ladder, next to what torchrun alone would wait.

`python scripts/bench_failures.py [--stall-timeout-s 20] [--torchrun-wait-s 60] [--crash oom] [--out DIR]`

Four real runs of the proxy trainer (2 gloo ranks on CPU, rank 1 fails at the start of iteration 2 through the
proxy's fault injection, rank 0 then waits in its all-reduce):

* crash, ladder: `trial.run` (the sweep's code path); from the fault to `trial.run` returning its verdict (an
  out-of-memory crash is stopped at its first line, which may come before the rank has exited).
* crash, torchrun alone: the same command; from the fault to torchrun's own exit (it gives no verdict).
* hang, ladder: `trial.run` with `stall_timeout_s`; from the moment rank 1 hangs to the verdict. trial.py runs the
  stall clock from the launch until the first progress line, so it must exceed torchrun's start-up to iteration 1
  (8-10 s on 2 idle cores, over 15 s when other test runs share them): hence 20 s.
* hang, torchrun alone: the same command with torch's default collective timeout (gloo: 1800 s), waited on for
  `--torchrun-wait-s` after the hang, then killed.

A rank's exit is seen by polling its process every 10 ms (exited = zombie or gone) and shown beside; the fault's
moment is the unix time the proxy logs when it injects it. The last line reads
`crash_to_verdict_s=<x> hang_to_verdict_s=<y> stall_timeout_s=<z>`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

from ladder.core.records import Verdict
from ladder.core.spec import TrialSpec
from ladder.runner import launch, trial
from ladder.runner.host import HostSampler
from ladder.settings.config import CaseConf, MeasureConf, Profile, ProxyShape, WorkloadConf
from ladder.workloads.builtin import Placement, plan_proxy

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "tests" / "data" / "agents" / "deepmimic_humanoid_ppo_agent.yaml"  # MimicKit's, as shipped
CASE = CaseConf("bench_failures", "deepmimic", "", "", yaml.safe_load(AGENT.read_text()), ProxyShape(32, 8, 64, 256))
NUM_ENVS = 8
FAULT_RANK, FAULT_ITER = 1, 2
GLOO_TIMEOUT_S = 1800  # torch's default process-group timeout for gloo
POLL_S = 0.01
CRASH_STALL_TIMEOUT_S = 120.0  # the crash runs must end by the crash, never by the stall watch
FAULT_LINE = re.compile(r"injecting fault (\w+) at iteration \d+ on rank \d+ \(t=([\d.]+)\)")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One run: when its faulty rank failed, and when the run ended (verdict or launcher exit)."""

    fault_t: float  # unix time the proxy injected the fault
    rank_exit_t: float | None  # unix time rank 1 was seen exited (None: it never exited on its own)
    end_t: float  # unix time ladder returned its verdict, or torchrun exited, or we gave up waiting
    ended_by_itself: bool
    verdict: Verdict | None  # ladder's; None under torchrun alone


# ---- watching a rank die


class ExitWatch:
    """A thread that finds a trial's rank by its environment and notes when it has exited."""

    def __init__(self, trial_id: str, local_rank: int) -> None:
        self.exit_t: float | None = None
        self._want = {launch.TRIAL_ID_VAR: trial_id, "LOCAL_RANK": str(local_rank)}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ExitWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        proc = self._find()
        while proc is not None and not self._done.is_set():
            if not _alive(proc):
                self.exit_t = time.time()
                return
            self._done.wait(POLL_S)

    def _find(self) -> psutil.Process | None:
        while not self._done.is_set():
            for proc in psutil.process_iter():
                with contextlib.suppress(psutil.Error):
                    env = proc.environ()
                    if all(env.get(k) == v for k, v in self._want.items()):
                        return proc
            self._done.wait(0.05)
        return None


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def fault_time(trial_dir: Path) -> float:
    match = FAULT_LINE.search((trial_dir / "stdout.log").read_text(errors="replace"))
    if match is None:
        why = "a stall before the first progress line needs a larger --stall-timeout-s"
        raise SystemExit(f"bench_failures: the run in {trial_dir} ended before its fault (see verdict.json): {why}")
    return float(match.group(2))


# ---- the runs


def plan(trial_dir: Path, fault: str, collective_timeout_s: float) -> TrialSpec:
    workload = WorkloadConf(
        width_factor=0.125, nproc=2, emulate_gpu_mem_gb=0.2, collective_timeout_s=collective_timeout_s
    )
    place = Placement("cpu", 2, launch.free_port(), sys.executable)
    spec = plan_proxy(CASE, Profile("default", {}), NUM_ENVS, workload, place, str(trial_dir), 600.0, {})
    flags = ("--fault", fault, "--fault-rank", str(FAULT_RANK), "--fault-iter", str(FAULT_ITER))
    return dataclasses.replace(spec, argv=spec.argv + flags)


def with_ladder(trial_dir: Path, fault: str, stall_timeout_s: float) -> Outcome:
    measure = MeasureConf(
        warmup_timeout_s=600.0, window_s=600.0, stall_timeout_s=stall_timeout_s, trial_timeout_s=600.0, kill_grace_s=2.0
    )
    trial_id = f"bench-{fault}-{os.getpid()}"
    with ExitWatch(trial_id, FAULT_RANK) as watch:
        result = trial.run(trial.TrialRequest(plan(trial_dir, fault, 60.0), trial_dir, trial_id, measure), HostSampler)
        end_t = time.time()
    return Outcome(fault_time(trial_dir), watch.exit_t, end_t, True, result.verdict)


def torchrun_alone(trial_dir: Path, fault: str, wait_s: float) -> Outcome:
    """The same command with nothing watching it; given up `wait_s` after the fault (then killed and reaped)."""
    trial_id = f"bench-alone-{fault}-{os.getpid()}"
    with ExitWatch(trial_id, FAULT_RANK) as watch:
        running = launch.start(plan(trial_dir, fault, 0.0), trial_dir, trial_id, None)
        ended = _wait_after_fault(running, trial_dir, wait_s)
        end_t = time.time()
    launch.stop(running, grace_s=2.0)
    return Outcome(fault_time(trial_dir), watch.exit_t, end_t, ended, None)


def _wait_after_fault(running: launch.Running, trial_dir: Path, wait_s: float) -> bool:
    """True when torchrun exited by itself within `wait_s` of the fault (and within 10 minutes of its launch)."""
    deadline = time.time() + 600.0
    while running.proc.poll() is None:
        with contextlib.suppress(SystemExit, OSError):
            deadline = min(deadline, fault_time(trial_dir) + wait_s)
        if time.time() >= deadline:
            return False
        time.sleep(0.05)
    return True


# ---- report


def crash_row(name: str, run: Outcome) -> str:
    what = f"{run.verdict.status}/{run.verdict.reason}" if run.verdict else "torchrun's exit, no verdict"
    died = "never seen exiting" if run.rank_exit_t is None else f"exited {run.rank_exit_t - run.fault_t:.2f} s after"
    return f"{name:<22} {run.end_t - run.fault_t:7.2f} s  ({what}; rank {FAULT_RANK} {died})"


def hang_row(name: str, run: Outcome, wait_s: float) -> str:
    if not run.ended_by_itself:
        return f"{name:<22} > {wait_s:.0f} s    (still hung, then killed; gloo default timeout {GLOO_TIMEOUT_S} s)"
    what = f"{run.verdict.status}/{run.verdict.reason}" if run.verdict else "torchrun's exit"
    return f"{name:<22} {run.end_t - run.fault_t:7.2f} s  ({what})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_failures", description=__doc__.splitlines()[0])
    parser.add_argument("--stall-timeout-s", type=float, default=20.0, help="ladder's stall watch for the hang")
    parser.add_argument("--torchrun-wait-s", type=float, default=60.0, help="how long to wait on torchrun's hang")
    parser.add_argument("--crash", choices=("oom", "exit", "keyerror"), default="oom", help="how rank 1 crashes")
    parser.add_argument("--out", type=Path, default=None, help="trial folders (default: a new temporary folder)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench_failures_"))
    launch.become_subreaper()
    crash = with_ladder(out / "crash_ladder", args.crash, CRASH_STALL_TIMEOUT_S)
    crash_alone = torchrun_alone(out / "crash_torchrun", args.crash, args.torchrun_wait_s)
    hang = with_ladder(out / "hang_ladder", "hang", args.stall_timeout_s)
    hang_alone = torchrun_alone(out / "hang_torchrun", "hang", args.torchrun_wait_s)
    print(f"trial folders: {out}")
    print(f"crash ({args.crash} on rank {FAULT_RANK}), from the fault:")
    print("  " + crash_row("ladder -> verdict", crash))
    print("  " + crash_row("torchrun alone -> exit", crash_alone))
    print(f"hang (rank {FAULT_RANK} blocks outside collectives), from the moment it hangs:")
    print("  " + hang_row(f"ladder (stall {args.stall_timeout_s:g} s)", hang, args.torchrun_wait_s))
    print("  " + hang_row("torchrun alone", hang_alone, args.torchrun_wait_s))
    print(
        f"crash_to_verdict_s={crash.end_t - crash.fault_t:.2f} hang_to_verdict_s={hang.end_t - hang.fault_t:.2f} "
        f"stall_timeout_s={args.stall_timeout_s:g}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
