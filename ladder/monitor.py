"""Samplers of util and memory per device, behind one small protocol, on a background thread.

`NvmlSampler` reads each visible GPU through NVML (nvidia-ml-py, imported lazily); `HostSampler` reads the CPU%
and RSS of each rank's process tree (psutil), which is what a machine without NVIDIA's driver gets. Both return
`Sample`s: (time, device index, util %, memory MiB); the index is the GPU for NVML and the local rank for host.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True)
class Sample:
    t: float  # unix time (aligned with the trainer's progress lines)
    index: int  # GPU index (nvml) or local rank (host)
    util: float  # percent
    mem_mb: float  # MiB


class Sampler(Protocol):
    source: str

    def sample(self, now: float) -> list[Sample]: ...


# ---------------------------------------------------------------- NVML


def nvml_gpu_count() -> int:
    """Visible NVIDIA GPUs; 0 (said once in the log) where there is no driver."""
    try:
        pynvml = _nvml()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception as exc:  # no library, no driver, no device: all mean "no GPU here"
        log.info("no NVIDIA GPU (%s): measuring host CPU%% and RSS instead", exc.__class__.__name__)
        return 0


def _nvml() -> Any:
    import pynvml

    pynvml.nvmlInit()
    return pynvml


class NvmlSampler:
    source = "nvml"

    def __init__(self, indices: list[int]) -> None:
        self._nvml = _nvml()
        self._handles = [(i, self._nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]

    def sample(self, now: float) -> list[Sample]:
        out = []
        for index, handle in self._handles:
            util = self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            used = self._nvml.nvmlDeviceGetMemoryInfo(handle).used
            out.append(Sample(now, index, float(util), used / MIB))
        return out

    def describe(self) -> dict[str, str]:
        """GPU name, total memory and driver, for the records."""
        index, handle = self._handles[0]
        name = self._nvml.nvmlDeviceGetName(handle)
        total = self._nvml.nvmlDeviceGetMemoryInfo(handle).total
        return {
            "gpu_name": name.decode() if isinstance(name, bytes) else str(name),
            "gpu_mem_total": str(round(total / MIB)),
            "driver": str(self._nvml.nvmlSystemGetDriverVersion()),
        }


# ---------------------------------------------------------------- host


class HostSampler:
    """CPU% and RSS of each rank's process tree; ranks found by LOCAL_RANK in their environment."""

    source = "host"
    RESCAN_S = 1.0  # walking the tree reads every process: once a second, not every tick (FACTS.md)

    def __init__(self, root_pid: int) -> None:
        self._root_pid = root_pid
        self._ranks: dict[int, list[psutil.Process]] = {}
        self._next_scan = 0.0

    def sample(self, now: float) -> list[Sample]:
        if now >= self._next_scan:
            self._rescan()
            self._next_scan = now + self.RESCAN_S
        return [Sample(now, rank, *self._tree_figures(procs)) for rank, procs in sorted(self._ranks.items())]

    def _rescan(self) -> None:
        try:
            procs = psutil.Process(self._root_pid).children(recursive=True)
        except psutil.Error:
            return
        known = {p.pid: p for tree in self._ranks.values() for p in tree}  # keep cpu_percent's state
        ranks: dict[int, list[psutil.Process]] = {}
        for proc in procs:
            rank = _local_rank(proc)
            if rank is not None:
                tree = [proc, *_children(proc)]
                ranks[rank] = [known.get(p.pid, p) for p in tree]
        self._ranks = ranks

    @staticmethod
    def _tree_figures(procs: list[psutil.Process]) -> tuple[float, float]:
        cpu, rss = 0.0, 0.0
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                cpu += proc.cpu_percent(interval=None)
                rss += proc.memory_info().rss / MIB
        return cpu, rss


def _local_rank(proc: psutil.Process) -> int | None:
    try:
        value = proc.environ().get("LOCAL_RANK")
    except psutil.Error:
        return None
    return int(value) if value is not None and value.isdigit() else None


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


# ---------------------------------------------------------------- the thread


class Monitor:
    """Runs a sampler on a background thread from start() to stop(); keeps every sample."""

    def __init__(self, sampler: Sampler, hz: float, clock: Callable[[], float] = time.time) -> None:
        self.sampler = sampler
        self.samples: list[Sample] = []
        self._period = 1.0 / hz
        self._clock = clock
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ladder-monitor", daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._done.set()
        self._thread.join()
        return list(self.samples)

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                self.samples.extend(self.sampler.sample(self._clock()))
            except Exception as exc:  # a sampler failure must not kill the trial; it shows in the log
                log.warning("sampler %s failed: %s", self.sampler.source, exc)
            self._done.wait(self._period)


def write_samples(samples: list[Sample], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["t", "index", "util", "mem_mb"])
        writer.writerows((f"{s.t:.3f}", s.index, f"{s.util:.1f}", f"{s.mem_mb:.1f}") for s in samples)
