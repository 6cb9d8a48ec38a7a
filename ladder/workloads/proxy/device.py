"""Ranks, devices, memory: this rank's place in the job, the emulated memory cap and what it measures."""

from __future__ import annotations

import logging
import os
import resource
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger(__name__)

STORE_WAIT_S = 60.0  # the most a rank waits for rank 0's rendezvous store to listen (then torch's own connect runs)
STORE_POLL_S = 0.002


@dataclass(frozen=True)
class Comm:
    """This rank's place in the job; collectives are no-ops for a single process."""

    rank: int
    world_size: int
    device: torch.device

    def average_grads(self, params: Sequence[nn.Parameter]) -> None:
        if self.world_size == 1:
            return
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        for g, chunk in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(chunk.view_as(g))

    def gather(self, value: float) -> list[float]:
        if self.world_size == 1:
            return [value]
        parts = [torch.zeros(1, device=self.device) for _ in range(self.world_size)]
        dist.all_gather(parts, torch.tensor([value], device=self.device))
        return [float(t.item()) for t in parts]


def init_comm(device_kind: str, timeout_s: float) -> Comm:
    world_size, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}") if device_kind == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if "WORLD_SIZE" in os.environ:  # started with torchrun's variables (by torchrun, or ladder's rank launcher)
        timeout = timedelta(seconds=timeout_s) if timeout_s > 0 else None
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT", "")
        if world_size > 1 and rank > 0 and not _agent_store() and addr and port.isdigit():
            await_store(addr, int(port), STORE_WAIT_S)  # torch's own connect then says what is missing, if anything
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timeout)
    return Comm(rank, world_size, device)


def _agent_store() -> bool:
    return os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() in ("1", "true")


def await_store(addr: str, port: int, limit_s: float) -> bool:
    """Wait until rank 0's rendezvous store listens at `addr`:`port` (True), or `limit_s` passed (False).

    Without torchrun's agent, which hosts the store before any rank starts (`TORCHELASTIC_USE_AGENT_STORE`), rank 0
    hosts it, and a rank whose store client connects a few milliseconds before rank 0 listens is refused and backs
    off 0.3-0.7 s before its next try (torch 2.13, measured here): a fifth to a half of the launches of two ranks
    started at once (16 of 72 failing probes in one measurement, 4 of 9 in another), their start and a failing probe's
    whole life slower by that much. A plain connection, closed at once, tells when it listens; the store takes it as a
    client that left."""
    end, said = time.monotonic() + limit_s, False
    while True:
        try:
            with socket.create_connection((addr, port), timeout=max(0.01, min(1.0, end - time.monotonic()))):
                return True
        except OSError:
            if time.monotonic() >= end:
                return False
            if not said:
                log.info("waiting for rank 0's rendezvous store at %s:%d (up to %.0f s)", addr, port, limit_s)
                said = True
            time.sleep(STORE_POLL_S)  # a refused connect returns at once: poll, without taking rank 0's CPU


def proc_status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def cap_memory(mb: int, device: torch.device) -> int | None:
    """Emulate a smaller device: allocations past ``mb`` MiB more than now fail in the real allocator.
    Returns this process's size (KiB) at that moment, which `cap_used_mb` counts from; None without a cap."""
    if mb <= 0:
        return None
    base_kib = proc_status_kib("VmData")
    if device.type == "cuda":
        total_mb = torch.cuda.get_device_properties(device).total_memory / 2**20
        torch.cuda.set_per_process_memory_fraction(min(1.0, mb / total_mb), device)
        return base_kib
    soft = proc_status_kib("VmData") * 1024 + mb * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    return base_kib


def cap_used_mb(device: torch.device, base_kib: int) -> float:
    """Use of what the emulated cap limits, in MiB: the caching allocator's peak reservation on CUDA; on CPU the
    data segment's growth since the cap was set, as of now (the caller keeps the maximum, read after each update
    forward too: a reading at an iteration's end misses the update's activations, and a memory model built on it
    predicted a rung to fit a card it did not)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_reserved(device) / 2**20
    return (proc_status_kib("VmData") - base_kib) / 1024


def peak_mem_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return proc_status_kib("VmHWM") / 1024


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
