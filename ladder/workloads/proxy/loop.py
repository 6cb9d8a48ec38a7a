"""The command line, rank 0's progress lines and the training loop (`main`: ``python -m ladder.workloads.proxy``)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from ladder.core.errors import ConfigError
from ladder.workloads.proxy.agent import METHODS, AgentSpec, load_agent
from ladder.workloads.proxy.buffers import Dims
from ladder.workloads.proxy.device import Comm, cap_memory, init_comm, peak_mem_mb, sync
from ladder.workloads.proxy.faults import FAULTS, check_fault, maybe_fault
from ladder.workloads.proxy.trainer import Trainer

log = logging.getLogger(__name__)
DESCRIPTION = "The built-in proxy workload: a stand-in for a MimicKit PPO-style trainer, run under torchrun or alone."


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def _above_zero(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not above 0")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ladder.workloads.proxy", description=DESCRIPTION)
    p.add_argument("--agent-config", type=Path, required=True, help="MimicKit agent YAML")
    p.add_argument("--method", choices=METHODS, default="ppo")
    p.add_argument("--num-envs", type=_at_least_one, default=64)
    p.add_argument("--obs-dim", type=_at_least_one, default=180)
    p.add_argument("--act-dim", type=_at_least_one, default=22)
    p.add_argument("--disc-obs-dim", type=_at_least_one, default=450)
    p.add_argument("--sim-state-dim", type=_at_least_one, default=4096, help="floats of simulator state per env")
    p.add_argument("--width-factor", type=_above_zero, default=1.0, help="scales every hidden layer")
    p.add_argument("--max-iters", type=int, default=0, help="0 = until killed")
    p.add_argument("--max-seconds", type=float, default=0.0, help="training-loop seconds; 0 = no limit")
    p.add_argument("--progress", type=Path, default=None, help="JSON lines, appended by rank 0")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--emulate-mem-mb", type=int, default=0, help="cap each rank's memory (MiB); 0 = off")
    p.add_argument("--collective-timeout-s", type=float, default=0.0, help="process-group timeout; 0 = torch's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fault", choices=FAULTS, default=None, help="TESTING ONLY: make one rank fail (module doc)")
    p.add_argument("--fault-rank", type=int, default=0, help="the rank that fails (--fault)")
    p.add_argument("--fault-iter", type=_at_least_one, default=1, help="the iteration at whose start it fails")
    args = p.parse_args(argv)
    if args.fault == "oom" and args.emulate_mem_mb <= 0:
        p.error("--fault oom needs --emulate-mem-mb: without a cap it would exhaust the whole machine")
    return args


class Progress:
    """Rank 0's JSON-lines heartbeat; other ranks write nothing."""

    def __init__(self, path: Path | None, enabled: bool) -> None:
        self._file: IO[str] | None = path.open("a") if path is not None and enabled else None

    def write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def start_record(trainer: Trainer, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "event": "start",
        "t": time.time(),
        "world_size": trainer.comm.world_size,
        "device": str(trainer.comm.device),
        "nets": trainer.widths(),
        "num_envs": args.num_envs,
        "method": args.method,
        "params": sum(p.numel() for p in trainer.nets.parameters()),
        "emulate_mem_mb": args.emulate_mem_mb,
        "cap_mb": args.emulate_mem_mb or None,
        "width_factor": args.width_factor,
    }


def iteration(trainer: Trainer, it: int, loop_start: float) -> dict[str, Any]:
    """Run one iteration and return its progress record (every rank joins the peak-memory gather)."""
    dev, started = trainer.comm.device, time.monotonic()
    trainer.rollout()
    sync(dev)
    rolled = time.monotonic()
    trainer.note_cap_used()
    trainer.update()
    sync(dev)
    ended, world, n = time.monotonic(), trainer.comm.world_size, trainer.dims.num_envs
    trainer.note_cap_used()
    return {
        "t": time.time(),
        "iter": it,
        "samples": n * trainer.spec.steps_per_iter * world * it,
        "wall_s": ended - loop_start,
        "step_time_s": ended - started,
        "rollout_time_s": rolled - started,
        "update_time_s": ended - rolled,
        "peak_mem_mb": trainer.comm.gather(peak_mem_mb(dev)),
        "cap_used_mb": None if trainer.cap_base_kib is None else trainer.comm.gather(trainer.cap_used_mb),
        "num_envs": n,
        "world_size": world,
    }


def should_stop(it: int, wall_s: float, args: argparse.Namespace, comm: Comm) -> bool:
    """Stop when any rank hits a limit, so no rank is left alone in a collective."""
    done = (args.max_iters > 0 and it >= args.max_iters) or (0 < args.max_seconds <= wall_s)
    return max(comm.gather(float(done))) > 0


def train(trainer: Trainer, args: argparse.Namespace, progress: Progress) -> None:
    loop_start, it = time.monotonic(), 0
    while True:
        it += 1
        maybe_fault(args, trainer.comm.rank, it, trainer.comm.device)
        record_ = iteration(trainer, it, loop_start)
        progress.write(record_)
        if should_stop(it, record_["wall_s"], args, trainer.comm):
            return


def load_agent_or_exit(args: argparse.Namespace) -> AgentSpec:
    """A broken agent config exits 2, as a bad command line does: no rung would ever run it."""
    try:
        return load_agent(args.agent_config, args.method, args.width_factor)
    except ConfigError as e:
        sys.stderr.write(f"ladder.workloads.proxy: config error: {e}\n")
        raise SystemExit(2) from e


@record
def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(argv)
    spec = load_agent_or_exit(args)
    dims = Dims(args.num_envs, args.obs_dim, args.act_dim, args.disc_obs_dim, args.sim_state_dim)
    comm = init_comm(args.device, args.collective_timeout_s)
    check_fault(args, comm.world_size)
    trainer = Trainer(spec, dims, comm, args.seed, cap_base_kib=cap_memory(args.emulate_mem_mb, comm.device))
    progress, start = Progress(args.progress, comm.rank == 0), start_record(trainer, args)
    progress.write(start)
    if comm.rank == 0:
        log.info("proxy started: %s", json.dumps(start))
    try:
        train(trainer, args, progress)
    finally:
        progress.close()
    if dist.is_initialized():
        dist.destroy_process_group()
