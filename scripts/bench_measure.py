"""What measuring costs and how reproducible it is, on real 2-rank proxy runs (torchrun, gloo, CPU).

1. The host sampler's own cost: CPU seconds its thread uses per second sampled, at 10 Hz, while a 2-rank proxy
   trains (target ≤ 0.005).
2. Agreement of repeats: one proxy configuration measured N times as a trial measures it (the window opens by the
   stable-step rule, samples/s over the window with its 95% interval); the spread is (max - min) / mean of the
   repeats' samples/s (target ≤ 0.05), and `repeats.repeat_verdict` says stable or unstable.

The last line is `sampler_cpu_per_s=<x> repeat_spread=<fraction>`.

    python scripts/bench_measure.py [--sample-s 30] [--window-s 20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ladder.core.measure.rates import Rate
from ladder.core.measure.repeats import repeat_verdict
from ladder.core.measure.usage import figures
from ladder.core.measure.window import Rule, close_window, open_window
from ladder.core.records import Point
from ladder.core.spec import TrialSpec
from ladder.runner import launch
from ladder.runner.host import HostSampler
from ladder.runner.monitor import Monitor
from ladder.workloads.progress import JsonlProgress

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "tests" / "data" / "agents" / "amp_pi_plus_agent.yaml"
RULE = Rule(warmup_iters=3, stable_k=3, stable_tol=0.35)  # conf/measure/demo.yaml
POLL_S = 0.1
GRACE_S = 5.0  # SIGTERM to SIGKILL, as a trial


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample-s", type=float, default=30.0, help="seconds the sampler's cost is measured over")
    p.add_argument("--hz", type=float, default=10.0)
    p.add_argument("--window-s", type=float, default=20.0, help="each repeat's measured window")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--num-envs", type=int, default=64)
    return p.parse_args(argv)


def start_proxy(num_envs: int, trial_dir: Path, seconds: float) -> launch.Running:
    """amp_pi_plus's proxy shape at the demo's width, 2 ranks under torchrun, started as ladder starts a trial."""
    argv = (
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "ladder.workloads.proxy",
        "--agent-config",
        str(AGENT),
        "--method",
        "amp",
        "--num-envs",
        str(num_envs),
        "--obs-dim",
        "180",
        "--act-dim",
        "22",
        "--disc-obs-dim",
        "450",
        "--sim-state-dim",
        "4096",
        "--width-factor",
        "0.125",
        "--max-seconds",
        str(round(seconds)),
        "--progress",
        str(trial_dir / "progress.jsonl"),
    )
    spec = TrialSpec(argv=argv, env={"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    return launch.start(spec, trial_dir, f"bench-{trial_dir.name}-{uuid.uuid4().hex[:8]}", None)


def wait_for_points(reader: JsonlProgress, points: list[Point], n: int, run: launch.Running) -> None:
    while len(points) < n:
        if run.proc.poll() is not None:
            raise SystemExit(f"bench_measure: the proxy ended early with code {run.proc.returncode}")
        points += reader.read_new()
        time.sleep(POLL_S)


def sampler_cost(args: argparse.Namespace, folder: Path) -> float:
    run = start_proxy(args.num_envs, folder / "cost", args.sample_s + 120)
    try:
        wait_for_points(JsonlProgress(folder / "cost" / "progress.jsonl"), [], 2, run)  # both ranks train
        monitor = Monitor(HostSampler(run.proc.pid), args.hz).start()
        began = time.monotonic()
        time.sleep(args.sample_s)
        samples = monitor.stop()
        sampled = time.monotonic() - began
    finally:
        launch.stop(run, GRACE_S)
    ranks = sorted({s.index for s in samples})
    cost = monitor.cpu_s / sampled
    print(
        f"sampler: host at {args.hz:g} Hz on a 2-rank proxy run: {cost:.4f} CPU-s per sampled s over {sampled:.1f} s"
        f" ({len({s.t for s in samples})} ticks, ranks {ranks})"
    )
    return cost


def measure_once(args: argparse.Namespace, folder: Path, n: int) -> dict[str, float]:
    """One trial's measurement: launch, follow progress, open the window by the rule, close it, figures."""
    launch_t = time.time()
    run = start_proxy(args.num_envs, folder / f"repeat{n}", args.window_s + 180)
    monitor = Monitor(HostSampler(run.proc.pid), args.hz).start()
    reader, points, window = JsonlProgress(folder / f"repeat{n}" / "progress.jsonl"), list[Point](), None
    try:
        while (closed := close_window(window, points) if window is not None else None) is None:
            wait_for_points(reader, points, len(points) + 1, run)
            window = window or open_window(points, time.time(), args.window_s, RULE, timeout_s=120)
    finally:
        launch.stop(run, GRACE_S)
        samples = monitor.stop()
    return figures(samples, points, closed, launch_t)


def describe(n: int, f: dict[str, float]) -> str:
    def g(key: str, fmt: str = ".1f") -> str:
        return format(f[key], fmt) if key in f else "-"

    return (
        f"repeat {n}: samples/s {g('samples_per_s')} [{g('samples_per_s_lo')}, {g('samples_per_s_hi')}] over "
        f"{g('window_s')} s, {g('n_iters', '.0f')} iterations, opened at {g('window_start_s')} s, "
        f"{'gated' if f.get('gated') else 'ungated'}, step p50 {g('step_time_p50', '.3f')} s, "
        f"CPU per rank {g('min_avg_util', '.0f')}%"
    )


def per_cpu_s(f: dict[str, float]) -> float | None:
    """Samples per CPU-second the ranks got (their window-average CPU% summed): on a shared CPU machine, the rate
    with the other tenants' share taken out."""
    cores = sum(v for k, v in f.items() if k.startswith("avg_util")) / 100
    return f["samples_per_s"] / cores if "samples_per_s" in f and cores > 0 else None


def repeats(args: argparse.Namespace, folder: Path) -> float:
    rates, efficiencies = [], []
    for n in range(1, args.repeats + 1):
        f = measure_once(args, folder, n)
        print(describe(n, f), flush=True)
        rate, eff = Rate.of(f), per_cpu_s(f)
        if rate is not None and eff is not None:
            rates.append(rate)
            efficiencies.append(eff)
    verdict = repeat_verdict(rates)
    print(
        f"verdict: {'stable' if verdict.stable else 'unstable: ' + verdict.why} "
        f"(spread {verdict.spread:.2%}, widest 95% interval {verdict.ci_frac:.2%} of samples/s)"
    )
    if efficiencies:
        spread = (max(efficiencies) - min(efficiencies)) / (sum(efficiencies) / len(efficiencies))
        print(f"samples per rank CPU-second: {', '.join(f'{e:.0f}' for e in efficiencies)} (spread {spread:.2%})")
    return verdict.spread


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    launch.become_subreaper()  # torchrun's workers run in their own sessions: orphans come back to us
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    with tempfile.TemporaryDirectory(prefix="bench_measure_") as tmp:
        cost = sampler_cost(args, Path(tmp))
        spread = repeats(args, Path(tmp))
    print(f"machine: load average {os.getloadavg()[0]:.1f} at the end (the repeats share the cores with it)")
    print(f"sampler_cpu_per_s={cost:.4f} repeat_spread={spread:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
