"""A small real trainer for the command workload's tests, configured by Hydra-style `key=value` overrides.

    python fake_trainer.py trainer.update_interval=10 trainer.num_envs=16 trainer.iters=6 trainer.mem_budget=250 \
        [trainer.progress=DIR/progress.jsonl]

Each iteration does a little real work and prints `iter N samples S update_interval U`; with `trainer.progress`
it also appends a JSON line per iteration. The rollout it keeps is update_interval × num_envs rows: when that
exceeds mem_budget it fails the way torch does on a full card (torch's CUDA OOM message, exit code 1).
"""

from __future__ import annotations

import json
import sys
import time
from typing import IO

DEFAULTS = {"update_interval": "1", "num_envs": "16", "iters": "6", "mem_budget": str(1 << 30), "progress": ""}
STEPS_PER_ITER = 8


def overrides(argv: list[str]) -> dict[str, str]:
    out = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or not key.startswith("trainer."):
            sys.exit(f"fake_trainer: expected trainer.<key>=<value>, got {arg!r}")
        out[key.removeprefix("trainer.")] = value
    return out


def train(interval: int, envs: int, iters: int, progress: IO[str] | None) -> None:
    rollout = [0.0] * (interval * envs)
    for it in range(1, iters + 1):
        started = time.monotonic()
        rollout = [x + 1.0 for x in rollout]
        time.sleep(0.02)  # the "env step" this trainer waits on
        samples = it * STEPS_PER_ITER * envs
        print(f"iter {it} samples {samples} update_interval {interval}", flush=True)
        if progress is not None:
            record = {"t": time.time(), "iter": it, "samples": samples, "step_time_s": time.monotonic() - started}
            progress.write(json.dumps(record) + "\n")
            progress.flush()


def main() -> int:
    cfg = {**DEFAULTS, **overrides(sys.argv[1:])}
    interval, envs, budget = int(cfg["update_interval"]), int(cfg["num_envs"]), int(cfg["mem_budget"])
    print(f"fake_trainer: update_interval={interval} num_envs={envs}", flush=True)
    if interval * envs > budget:
        print(
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
            "of 23.99 GiB of which 1.12 GiB is free.",
            flush=True,
        )
        return 1
    if cfg["progress"]:
        with open(cfg["progress"], "a") as progress:
            train(interval, envs, int(cfg["iters"]), progress)
    else:
        train(interval, envs, int(cfg["iters"]), None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
