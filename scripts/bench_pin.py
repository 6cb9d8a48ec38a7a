"""What pinning the proxy's ranks does to its steps: `workload.pin_ranks` true against false, alternating.

Each run is a real trial start as a sweep makes it (`launch.start`: the supervisor, a memory cgroup where the
machine allows one, ladder's rank launcher with or without `--pin`, the warm starter): the built-in proxy trainer,
two ranks on CPU with gloo, amp_pi_plus at one rung, stopped after `--iters` iterations. Its steps after the first
`--skip` (the warm-up) give the spread of its step times (sd over mean) and its samples/s. The two ways alternate,
so both see the same load; the machine's own noise moves from minute to minute, so compare medians.

    python scripts/bench_pin.py [--n 6] [--iters 16] [--skip 3] [--num-envs 64]

Last line: `median_step_sd_free=<a> median_step_sd_pinned=<b> ratio=<a/b> median_sps_free=<c> median_sps_pinned=<d>`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from hydra import compose, initialize_config_dir

from ladder.runner import launch, warm
from ladder.settings.config import register, settings_from
from ladder.workloads.builtin import Placement, plan_proxy

CONF = str(Path(__file__).resolve().parent.parent / "conf")
WAYS = {"free": False, "pinned": True}


def points(progress: Path) -> list[dict[str, float]]:
    if not progress.exists():
        return []
    lines = [json.loads(line) for line in progress.read_text().splitlines() if '"iter"' in line]
    return [p for p in lines if "iter" in p]


def once(pin: bool, args: argparse.Namespace, root: Path) -> tuple[float, float]:
    """(step sd over mean, samples/s) over one run's steps after the warm-up."""
    register()
    with initialize_config_dir(config_dir=CONF, version_base=None):
        cfg = compose(config_name="config", overrides=["case=amp_pi_plus", "device=cpu"])
    settings = settings_from(cfg)
    place = Placement("cpu", 2, launch.free_port(), sys.executable, pin_ranks=pin)
    trial_dir = root / f"{'pinned' if pin else 'free'}_{uuid.uuid4().hex[:6]}"
    spec = plan_proxy(
        settings.case, settings.profiles[0], args.num_envs, settings.workload, place, str(trial_dir), 600, {}
    )
    run = launch.start(spec, trial_dir, uuid.uuid4().hex[:12], None)
    progress = trial_dir / "progress.jsonl"
    deadline = time.monotonic() + 600
    try:
        while len(points(progress)) < args.iters and run.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        launch.stop(run, 5.0)
    seen = points(progress)[: args.iters]
    if len(seen) < args.iters:
        raise SystemExit(f"fewer than {args.iters} iterations; see {trial_dir}/stdout.log")
    kept = seen[args.skip :]
    steps = [b["t"] - a["t"] for a, b in zip(kept, kept[1:], strict=False)]
    samples = kept[-1]["samples"] - kept[0]["samples"]
    return statistics.stdev(steps) / statistics.fmean(steps), samples / sum(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=6, help="runs each way")
    parser.add_argument("--iters", type=int, default=16, help="iterations per run")
    parser.add_argument("--skip", type=int, default=3, help="first iterations left out (the warm-up)")
    parser.add_argument("--num-envs", type=int, default=64)
    args = parser.parse_args()
    launch.become_subreaper()
    if warm.STARTERS.get(sys.executable) is None:
        raise SystemExit("the warm starter did not get ready")
    got: dict[str, list[tuple[float, float]]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory(prefix="bench_pin_") as tmp:
        for i in range(args.n):
            for way in list(WAYS) if i % 2 == 0 else list(WAYS)[::-1]:
                got[way].append(once(WAYS[way], args, Path(tmp)))
                spread, rate = got[way][-1]
                print(f"{way:6s} #{i + 1}: step sd {spread:.1%}, {rate:.0f} samples/s", flush=True)
    warm.STARTERS.close()
    sd = {w: statistics.median(s for s, _ in got[w]) for w in WAYS}
    sps = {w: statistics.median(r for _, r in got[w]) for w in WAYS}
    print(
        f"median_step_sd_free={sd['free']:.4f} median_step_sd_pinned={sd['pinned']:.4f} "
        f"ratio={sd['free'] / sd['pinned']:.2f} median_sps_free={sps['free']:.0f} median_sps_pinned={sps['pinned']:.0f}"
    )


if __name__ == "__main__":
    main()
