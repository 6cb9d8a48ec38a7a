"""Fault injection, for ladder's own tests and benchmark only (``--fault KIND --fault-rank R --fault-iter I``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Callable

import torch

from ladder.workloads.proxy.agent import read_yaml

log = logging.getLogger(__name__)


FAULTS = ("oom", "hang", "keyerror", "exit")  # --fault kinds (tests and benchmark only)
FAULT_MISSING_KEY = "ladder_fault_injection_missing_key"  # what --fault keyerror looks up in the agent config
FAULT_FIRST_ALLOC_FLOATS = 1 << 20  # --fault oom starts at 4 MiB and doubles until the allocator fails


def check_fault(args: argparse.Namespace, world_size: int) -> None:
    """A fault aimed at a rank that does not exist would never fire: refuse it, as a bad command line."""
    if args.fault is not None and not 0 <= args.fault_rank < world_size:
        sys.stderr.write(f"ladder.workloads.proxy: --fault-rank {args.fault_rank} is not a rank of {world_size}\n")
        raise SystemExit(2)


def maybe_fault(args: argparse.Namespace, rank: int, it: int, device: torch.device) -> None:
    if args.fault is None or (rank, it) != (args.fault_rank, args.fault_iter):
        return
    log.warning("injecting fault %s at iteration %d on rank %d (t=%.3f)", args.fault, it, rank, time.time())
    FAULT_ACTIONS[args.fault](args, device)


def exhaust_memory(args: argparse.Namespace, device: torch.device) -> None:
    """Hold ever larger, filled tensors until the real allocator fails under the emulated cap (never returns)."""
    held, floats = [], FAULT_FIRST_ALLOC_FLOATS
    while True:
        held.append(torch.ones(floats, device=device))
        floats *= 2


def hang(args: argparse.Namespace, device: torch.device) -> None:
    """Stop taking part in collectives and block forever; the other ranks wait in their next all-reduce."""
    threading.Event().wait()


def missing_key(args: argparse.Namespace, device: torch.device) -> None:
    """A real KeyError from the agent config dict, as a trainer reading a key its config lacks raises."""
    log.info("agent config value: %s", read_yaml(args.agent_config)[FAULT_MISSING_KEY])


def exit_at_once(args: argparse.Namespace, device: torch.device) -> None:
    """The rank vanishes with code 1 and no traceback, as a crash in native code does."""
    os._exit(1)


FAULT_ACTIONS: dict[str, Callable[[argparse.Namespace, torch.device], None]] = {
    "oom": exhaust_memory,
    "hang": hang,
    "keyerror": missing_key,
    "exit": exit_at_once,
}
