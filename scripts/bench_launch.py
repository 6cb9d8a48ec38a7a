"""What a trial's launch costs: torchrun and its agent, or the ranks started without it with torchrun's variables
(one rank: the trainer itself, `workload.single_rank`; several: ladder's rank launcher, `workload.proxy_ranks`),
launch to the first progress point, alternating so both see the same load. With `--start`, the proxy's ranks
started cold against forked from the warm starter (`workload.proxy_start`, `ladder.runner.warm`), both direct: the
starter is started (and timed) before the first launch, once, as a sweep starts it. With `--client`, warm ranks
either way: each warm client started as an interpreter of its own (`ranks --no-fork`) against forked from the rank
launcher (the default).

Each launch is a real trial start as a sweep makes it (`launch.start`: the supervisor, a memory cgroup where the
machine allows one, the trial's id): the built-in proxy trainer, `--nproc` ranks on CPU with gloo, amp_pi_plus at a
small rung. The clock runs from `launch.start` to the first `iter` line in progress.jsonl, then the trial is stopped and
reaped (`launch.stop`) and the stop is timed too. A rung too big for the card (`--num-envs 65536` under the case's
emulated card) times a failing probe instead: the clock runs to the trainer's own exit.

    python scripts/bench_launch.py [--n 6] [--num-envs 64] [--nproc 1] [--device cpu|cuda]
        [--start | --client]

Last line: `median_torchrun_s=<a> median_direct_s=<b> saved_s=<a-b> ratio=<a/b>` (with `--start`:
`median_cold_s=<a> median_warm_s=<b> saved_s=<a-b> ratio=<a/b> starter_ready_s=<c>`; with `--client`:
`median_exec_s=<a> median_fork_s=<b> ...`).
"""

from __future__ import annotations

import argparse
import dataclasses
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
LAUNCHERS = ("torchrun", "direct")
STARTS = ("cold", "warm")
CLIENTS = ("exec", "fork")


def first_iter(progress: Path, run: launch.Running, timeout_s: float) -> float | None:
    """Seconds from the start to the first progress point; None if the trial ended or timed out first."""
    deadline = run.started_mono + timeout_s
    while time.monotonic() < deadline and run.proc.poll() is None:
        if progress.exists() and any('"iter"' in line for line in progress.read_text().splitlines()):
            return time.monotonic() - run.started_mono
        time.sleep(0.02)
    return None


def once(way: str, num_envs: int, root: Path, device: str = "cpu", nproc: int = 1) -> tuple[float, float]:
    register()
    with initialize_config_dir(config_dir=CONF, version_base=None):
        cfg = compose(config_name="config", overrides=["case=amp_pi_plus", f"device={device}"])
    settings = settings_from(cfg)
    if way in STARTS or way in CLIENTS:
        start = way if way in STARTS else "warm"
        place = Placement(device, nproc, launch.free_port(), sys.executable, proxy_start=start)
    else:
        place = Placement(  # the launchers alone: cold ranks either way, as before the warm starter
            device, nproc, launch.free_port(), sys.executable, single_rank=way, proxy_ranks=way, proxy_start="cold"
        )
    trial_dir = root / f"{way}_{uuid.uuid4().hex[:6]}"
    spec = plan_proxy(settings.case, settings.profiles[0], num_envs, settings.workload, place, str(trial_dir), 120, {})
    if way == "exec":  # each warm client an interpreter of its own, as the rank launcher did before it forked them
        at = spec.argv.index("--")
        spec = dataclasses.replace(spec, argv=(*spec.argv[:at], "--no-fork", *spec.argv[at:]))
    run = launch.start(spec, trial_dir, uuid.uuid4().hex[:12], None)
    seen = first_iter(trial_dir / "progress.jsonl", run, 120.0)
    if seen is None and run.proc.poll() is not None:  # a failing probe: the trainer's own exit
        seen = time.monotonic() - run.started_mono
    stop_at = time.monotonic()
    launch.stop(run, 5.0)
    stopped = time.monotonic() - stop_at
    if seen is None:
        raise SystemExit(f"{way}: no progress point within 120 s; see {trial_dir}/stdout.log")
    return seen, stopped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=6, help="launches each way")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--nproc", type=int, default=1, help="ranks per trial")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--start", action="store_true", help="cold against warm ranks, instead of the launchers")
    parser.add_argument("--client", action="store_true", help="warm clients started against forked (--nproc > 1)")
    args = parser.parse_args()
    launch.become_subreaper()
    ways = STARTS if args.start else CLIENTS if args.client else LAUNCHERS
    ready_s = None
    if args.start or args.client:
        starter = warm.STARTERS.get(sys.executable)
        if starter is None:
            raise SystemExit("the warm starter did not get ready")
        ready_s = starter.ready_s
        print(f"warm starter ready in {ready_s:.2f} s (once)", flush=True)
    times: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
    with tempfile.TemporaryDirectory(prefix="bench_launch_") as tmp:
        for i in range(args.n):
            for way in ways if i % 2 == 0 else ways[::-1]:
                times[way].append(once(way, args.num_envs, Path(tmp), args.device, args.nproc))
                print(
                    f"{way:9s} #{i + 1}: first progress point (or exit) {times[way][-1][0]:.2f} s, "
                    f"stop {times[way][-1][1]:.2f} s",
                    flush=True,
                )
    med = {w: statistics.median(t for t, _ in times[w]) for w in ways}
    stop = {w: statistics.median(s for _, s in times[w]) for w in ways}
    print(
        json.dumps(
            {
                "n": args.n,
                "num_envs": args.num_envs,
                "nproc": args.nproc,
                "device": args.device,
                "median_first_point_s": med,
                "median_stop_s": stop,
            }
        )
    )
    a, b = med[ways[0]], med[ways[1]]
    tail = f" starter_ready_s={ready_s:.2f}" if ready_s is not None else ""
    print(f"median_{ways[0]}_s={a:.2f} median_{ways[1]}_s={b:.2f} saved_s={a - b:.2f} ratio={a / b:.2f}{tail}")


if __name__ == "__main__":
    main()
