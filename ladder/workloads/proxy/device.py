"""Ranks, devices, memory: this rank's place in the job, the emulated memory cap and what it measures."""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


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
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}") if device_kind == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if "WORLD_SIZE" in os.environ:  # started by torchrun: MASTER_ADDR/PORT are set
        timeout = timedelta(seconds=timeout_s) if timeout_s > 0 else None
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=timeout)
    return Comm(int(os.environ.get("RANK", "0")), world_size, device)


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
    data segment's growth since the cap was set, as of now (the caller keeps the maximum; transients inside an
    iteration escape it, so it never overstates: a memory model built on it can skip no rung that fits)."""
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
