"""A 60 s window summary of the GPUs as they run now (as the manual routine's 60 s helper did), by ladder's NVML
sampler.

Prints per-GPU average util, the average and p50 over GPUs, active/idle seconds and the average over active
seconds, as the manual routine reported them (`gpu0_avg=82.62 gpu1_avg=80.85 both_avg=81.73 both_p50=96.75 ...`), plus
peak device memory. With `--progress FILE`, it first waits for the trainer's steady state by ladder's window rule
(e.g. `--warmup-iters 120 --stable-k 5 --data-time-max-s 0.02` on a metrics.jsonl), and says `gated=0` if
that never came within `--wait-s`. On a machine without an NVIDIA GPU it says so and exits 2.

    python scripts/gpu_window.py --seconds 60
    python scripts/gpu_window.py --progress experiments/exp076/logs/metrics.jsonl --warmup-iters 120 --stable-k 5
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

from ladder.core.measure.usage import figures, per_second
from ladder.core.measure.window import Rule, stable_start
from ladder.core.records import Point, Sample
from ladder.runner.monitor import Monitor
from ladder.runner.nvml import NvmlSampler, nvml_gpu_count
from ladder.workloads.progress import KINDS, reader_for

EXIT_NO_GPU = 2
POLL_S = 1.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="window length")
    p.add_argument("--hz", type=float, default=10.0, help="sampling rate")
    p.add_argument("--gpus", default="", help="comma-separated GPU indices; default: all")
    p.add_argument("--progress", type=Path, default=None, help="wait for this trainer log's steady state first")
    p.add_argument("--kind", default="jsonl", choices=KINDS, help="format of --progress")
    p.add_argument("--warmup-iters", type=int, default=120)
    p.add_argument("--stable-k", type=int, default=5)
    p.add_argument("--stable-tol", type=float, default=0.25)
    p.add_argument("--data-time-max-s", type=float, default=None)
    p.add_argument("--wait-s", type=float, default=600.0, help="give up waiting for the steady state after this")
    return p.parse_args(argv)


def wait_steady(args: argparse.Namespace) -> bool:
    """Follow the trainer's log until the window rule holds; False when --wait-s passed first."""
    reader, points = reader_for(args.kind, args.progress), list[Point]()
    rule = Rule(args.warmup_iters, args.stable_k, args.stable_tol, args.data_time_max_s)
    deadline = time.monotonic() + args.wait_s
    while time.monotonic() < deadline:
        points += reader.read_new()
        if stable_start(points, *rule) is not None:
            return True
        time.sleep(POLL_S)
    return False


def summary(samples: list[Sample], seconds: float) -> str:
    f = figures(samples, [], None, 0.0)
    gpus = sorted({s.index for s in samples})
    both, n = ("both" if len(gpus) == 2 else "all"), len(per_second(samples))
    parts = [f"gpu{i}_avg={f[f'avg_util{i}']:.2f}" for i in gpus]
    parts += [
        f"{both}_avg={statistics.fmean(f[f'avg_util{i}'] for i in gpus):.2f}",
        f"{both}_p50={f['p50_util']:.2f}",
        f"active_seconds={f['active_s']:.0f}/{n}",
        f"idle_seconds={f['idle_s']:.0f}/{n}",
        f"{both}_avg_active={f.get('avg_active_util', 0.0):.2f}",
        f"min_avg_util={f['min_avg_util']:.2f}",
    ]
    parts += [f"max_mem{i}={f[f'max_mem{i}']:.0f}" for i in gpus]
    return " ".join(parts) + f" window_s={seconds:g}"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args(argv)
    count = nvml_gpu_count()
    if count == 0:
        print("gpu_window: no NVIDIA GPU visible through NVML on this machine; nothing to measure", file=sys.stderr)
        return EXIT_NO_GPU
    gated = wait_steady(args) if args.progress is not None else True
    gpus = [int(g) for g in args.gpus.split(",") if g.strip()] or list(range(count))
    monitor = Monitor(NvmlSampler(gpus), args.hz).start()
    time.sleep(args.seconds)
    samples = monitor.stop()
    print(summary(samples, args.seconds) + ("" if args.progress is None else f" gated={int(gated)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
