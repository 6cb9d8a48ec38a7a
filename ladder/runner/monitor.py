"""Samplers of util and memory per device, behind one small protocol, on a background thread.

`NvmlSampler` reads each GPU through NVML (nvidia-ml-py, imported lazily): util from the driver's buffered samples
(`nvmlDeviceGetSamples`, falling back to `nvmlDeviceGetUtilizationRates`), device memory used, and at ~1 Hz the
memory of the trial's own processes and, on Hopper, GPM SM util. `HostSampler` reads the CPU% and RSS of each
rank's process tree; it is what a machine without NVIDIA's driver gets, and runs alongside NVML where there is one.
Both return `Sample`s; the index is the GPU for NVML and the local rank for host.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from ladder.core import ballast
from ladder.core.records import Sample, Source
from ladder.runner import warm
from ladder.runner.procs import TRIAL_ID_VAR, python_module

log = logging.getLogger(__name__)

MIB = 1024 * 1024
SLOW_S = 1.0  # process lists, tree walks and GPM once a second: they cost ms, not µs (measured)


class Sampler(Protocol):
    source: Source

    def sample(self, now: float) -> list[Sample]: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------- process trees


def process_tree(root_pid: int) -> list[tuple[int, int]]:
    """(pid, parent pid) of every descendant of root_pid, parents first; [] once the root is gone.

    Walks `/proc/<pid>/task/<tid>/children`, which reads only the tree; psutil's `children()` reads every
    process on the machine (3-6 ms), kept as the fallback where those files do not exist. A rank forked by the warm
    starter (`ladder.runner.warm`) is listed as its client's child."""
    if not os.path.exists(f"/proc/{root_pid}/task/{root_pid}/children"):  # no /proc, or no CONFIG_PROC_CHILDREN
        return _psutil_tree(root_pid)
    out, todo = [], [root_pid]
    while todo:
        parent = todo.pop(0)
        kids = _proc_children(parent)
        if (rank := warm.linked(parent)) is not None:  # a rank forked by the warm starter: its client's child here
            kids.append(rank)
        out += [(kid, parent) for kid in kids]
        todo += kids
    return out


# What starts a trial's ranks: ladder's supervisor and rank launcher, torchrun's agent (`launches`)
LAUNCHER_MODULES = (b"ladder.runner.trialexec", b"ladder.runner.ranks", b"torch.distributed.run")


def launches(pid: int) -> bool:
    """Is this process one that starts ranks rather than one (ladder's trial supervisor, its rank launcher,
    torchrun's agent, a warm client standing in for a rank forked elsewhere: `warm.stands_in`)? Its few MiB are
    ladder's or torchrun's, not the trainer's; a rank that ended before the sampler saw it has no figure rather
    than its launcher's. A process gone says no."""
    run = python_module(pid)
    if run is None:
        return False
    module, _, args = run
    torchrun = any(os.path.basename(a) == b"torchrun" for a in args[:2])
    return module in LAUNCHER_MODULES or torchrun or warm.is_client(run)


def _proc_children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
    return kids


def _psutil_tree(root_pid: int) -> list[tuple[int, int]]:
    try:
        procs = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            out.append((proc.pid, proc.ppid()))
    return out


def _environ(pid: int) -> dict[str, str]:
    try:
        return psutil.Process(pid).environ()
    except psutil.Error:
        return {}


class TrialPids:
    """Which pids belong to the trial: its process tree (walked on refresh), or any process carrying its id."""

    def __init__(self, root_pid: int, trial_id: str = "") -> None:
        self._root, self._trial_id = root_pid, trial_id
        self._tree: set[int] = {root_pid}
        self._marked: dict[int, bool] = {}

    def refresh(self) -> None:
        self._tree = {self._root, *(pid for pid, _ in process_tree(self._root))}

    def __contains__(self, pid: object) -> bool:
        if pid in self._tree:
            return True
        if not self._trial_id or not isinstance(pid, int):
            return False
        if pid not in self._marked:  # workers orphaned to the sweep leave the tree but keep the trial's id
            self._marked[pid] = _environ(pid).get(TRIAL_ID_VAR) == self._trial_id
        return self._marked[pid]


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


VALUE_FIELDS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")  # by NVML_VALUE_TYPE_*


@dataclass
class _Device:
    index: int
    handle: Any
    last_seen_us: int | None = None  # newest driver sample taken; None until the first read primes it
    last_util: float = 0.0
    last_fresh: float = float("-inf")  # caller time of the last read that brought new driver samples
    buffered: bool = True  # False once the driver says it keeps no samples for this device
    gpm: _Gpm | None = None


class NvmlSampler:
    source = Source.NVML
    IDLE_GAP_S = 1.0  # no new driver sample for this long: the GPU is idle, ask the current rate instead

    def __init__(
        self,
        indices: Sequence[int],
        root_pid: int | None = None,
        trial_id: str = "",
        nvml: Any = None,
        ballast_mb: Mapping[int, float] | None = None,
    ):
        self._nvml = nvml if nvml is not None else _nvml()
        self._ballast = dict(ballast_mb or {})  # MiB ladder's holder holds per GPU: not the trial's memory
        self._devices = [_Device(i, self._nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
        for dev in self._devices:
            dev.gpm = _Gpm.open(self._nvml, dev.handle)
        self._trial = TrialPids(root_pid, trial_id) if root_pid is not None else None
        self._next_slow = float("-inf")

    def sample(self, now: float) -> list[Sample]:
        slow = now >= self._next_slow
        if slow:
            self._next_slow = now + SLOW_S
            if self._trial is not None:
                self._trial.refresh()
        return [self._one(dev, now, slow) for dev in self._devices]

    def _one(self, dev: _Device, now: float, slow: bool) -> Sample:
        used = ballast.net_mb(
            self._nvml.nvmlDeviceGetMemoryInfo(dev.handle).used / MIB, self._ballast.get(dev.index, 0)
        )
        util = self._util(dev, now)
        if not slow:
            return Sample(now, dev.index, util, used)
        sm = dev.gpm.sm_util() if dev.gpm is not None else None
        return Sample(now, dev.index, util, used, Source.NVML, self._proc_mem(dev), sm)

    def _util(self, dev: _Device, now: float) -> float:
        """The mean of the driver's samples since the last read; held while they keep coming (the driver samples
        every 1/6-1 s, we read at 10 Hz); once they stop (an idle GPU), the current rate."""
        fresh = self._buffered(dev) if dev.buffered else None
        if fresh:
            dev.last_util, dev.last_fresh = statistics.fmean(fresh), now
        elif now - dev.last_fresh >= self.IDLE_GAP_S:
            dev.last_util = float(self._nvml.nvmlDeviceGetUtilizationRates(dev.handle).gpu)
        return dev.last_util

    def _buffered(self, dev: _Device) -> list[float] | None:
        """New driver samples since the last seen timestamp; None when there are none (or on the first read,
        which only learns where the driver's buffer ends: what it holds from before the trial is not ours)."""
        nvml, primed = self._nvml, dev.last_seen_us is not None
        try:
            since = dev.last_seen_us or 0
            kind, samples = nvml.nvmlDeviceGetSamples(dev.handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since)
        except nvml.NVMLError as exc:
            if exc.value == nvml.NVML_ERROR_NOT_FOUND:  # nothing newer: an idle GPU (or not yet sampled again)
                dev.last_seen_us = dev.last_seen_us or 0
            else:
                log.info("GPU %d keeps no utilization samples (%s): reading the current rate", dev.index, exc)
                dev.buffered = False
            return None
        dev.last_seen_us = max([dev.last_seen_us or 0, *(s.timeStamp for s in samples)])
        field = VALUE_FIELDS[kind]
        return [float(getattr(s.sampleValue, field)) for s in samples] if primed else None

    def _proc_mem(self, dev: _Device) -> float | None:
        """MiB the trial's processes hold on the device. NVML lists host pids: in a container without the host's
        pid namespace none of them is ours, and this reads 0 while the device's memory says otherwise."""
        if self._trial is None:
            return None
        try:
            procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(dev.handle)
        except self._nvml.NVMLError as exc:
            log.debug("GPU %d: no process list (%s)", dev.index, exc)
            return None
        return sum((p.usedGpuMemory or 0) for p in procs if p.pid in self._trial) / MIB

    def describe(self) -> dict[str, str]:
        """GPU name, total memory and driver, for the records."""
        handle = self._devices[0].handle
        name = self._nvml.nvmlDeviceGetName(handle)
        total = self._nvml.nvmlDeviceGetMemoryInfo(handle).total
        return {
            "gpu_name": name.decode() if isinstance(name, bytes) else str(name),
            "gpu_mem_total": str(round(total / MIB)),
            "driver": _text(self._nvml.nvmlSystemGetDriverVersion()),
            "gpm": "yes" if all(d.gpm is not None for d in self._devices) else "no",
        }

    def close(self) -> None:
        for dev in self._devices:
            if dev.gpm is not None:
                dev.gpm.close()
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _Gpm:
    """Hopper's GPM SM util: the metric between two GPM samples of the device, the older one reused next time."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml, self._handle = nvml, handle
        self._prev, self._cur = nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()
        self._primed = False

    @classmethod
    def open(cls, nvml: Any, handle: Any) -> _Gpm | None:
        try:
            supported = bool(nvml.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)
            return cls(nvml, handle) if supported else None
        except (AttributeError, nvml.NVMLError):  # an older driver or library: no GPM
            return None

    def sm_util(self) -> float | None:
        nvml = self._nvml
        try:
            nvml.nvmlGpmSampleGet(self._handle, self._cur)
            value = self._metric() if self._primed else None
        except nvml.NVMLError as exc:
            log.debug("GPM read failed: %s", exc)
            return None
        self._prev, self._cur, self._primed = self._cur, self._prev, True
        return value

    def _metric(self) -> float | None:
        nvml = self._nvml
        get = nvml.c_nvmlGpmMetricsGet_t()
        get.version, get.numMetrics = nvml.NVML_GPM_METRICS_GET_VERSION, 1
        get.sample1, get.sample2 = self._prev, self._cur
        get.metrics[0].metricId = nvml.NVML_GPM_METRIC_SM_UTIL
        nvml.nvmlGpmMetricsGet(get)
        metric = get.metrics[0]
        return float(metric.value) if metric.nvmlReturn == 0 else None  # NVML_SUCCESS: this metric is valid

    def close(self) -> None:
        for sample in (self._prev, self._cur):
            with contextlib.suppress(Exception):
                self._nvml.nvmlGpmSampleFree(sample)


# ---------------------------------------------------------------- host


CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


DEAD = (b"Z", b"X")  # /proc/<pid>/stat's state of a process that exited (a zombie) or is being removed


class _ProcStat:
    """CPU% and RSS of one process from one `pread` of /proc/<pid>/stat on a descriptor kept open (a few µs;
    psutil takes ~90 µs for both); psutil where there is no /proc."""

    def __init__(self, pid: int) -> None:
        self._fd: int | None = None
        self._proc: psutil.Process | None = None
        if os.path.exists(f"/proc/{pid}/stat"):
            with contextlib.suppress(OSError):
                self._fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        else:
            with contextlib.suppress(psutil.Error):
                self._proc = psutil.Process(pid)
        self._prev: tuple[float, float] | None = None  # (cpu seconds, monotonic time)

    def read(self) -> tuple[float, float] | None:
        """(CPU % since the last read, RSS MiB); None once the process is gone."""
        got = self._raw()
        if got is None:
            return None
        cpu_s, rss_mb = got
        now, prev = time.monotonic(), self._prev
        self._prev = (cpu_s, now)
        pct = 100.0 * (cpu_s - prev[0]) / (now - prev[1]) if prev is not None and now > prev[1] else 0.0
        return max(0.0, pct), rss_mb

    def _raw(self) -> tuple[float, float] | None:
        if self._fd is not None:
            try:
                stat = os.pread(self._fd, 4096, 0)
            except OSError:
                return None
            fields = stat[stat.rindex(b")") + 2 :].split()  # after "pid (comm) ": state is field 3
            if fields[0] in DEAD:  # killed, not yet reaped: its RSS reads 0, which is no measurement
                return None
            return (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[21]) * PAGE / MIB
        try:
            assert self._proc is not None
            times = self._proc.cpu_times()
            return times.user + times.system, self._proc.memory_info().rss / MIB
        except (psutil.Error, AssertionError):
            return None

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class HostSampler:
    """CPU% and RSS of each rank's process tree. A process's rank is the LOCAL_RANK in its environment (torchrun
    sets it; children inherit it), else its parent's; a tree with no LOCAL_RANK at all (MimicKit spawns its own
    ranks) is one series, index 0, root included. The processes that start ranks (`launches`: ladder's supervisor
    and rank launcher, torchrun's agent, a warm client) are never counted: before the first rank is up there is no
    sample, rather than one of a launcher's few MiB."""

    source = Source.HOST

    def __init__(self, root_pid: int, every_s: float = 0.0) -> None:
        self._root_pid = root_pid
        self._every_s = every_s  # at most one reading per this many seconds (when it rides along with NVML)
        self._last = float("-inf")
        self._next_scan = float("-inf")
        self._rank_of: dict[int, int] = {}
        self._stats: dict[int, _ProcStat] = {}
        self._env_rank: dict[int, int | None] = {}
        self._not_launcher: set[int] = set()

    def sample(self, now: float) -> list[Sample]:
        if now - self._last < self._every_s:
            return []
        self._last = now
        if now >= self._next_scan:
            self._rescan()
            self._next_scan = now + SLOW_S  # the tree walk once a second, not every tick (measured)
        totals: dict[int, list[float]] = {}
        for pid, rank in self._rank_of.items():
            got = self._stats[pid].read()
            if got is not None:
                acc = totals.setdefault(rank, [0.0, 0.0])
                acc[0], acc[1] = acc[0] + got[0], acc[1] + got[1]
        return [Sample(now, rank, cpu, rss, Source.HOST) for rank, (cpu, rss) in sorted(totals.items())]

    def _rescan(self) -> None:
        tree = process_tree(self._root_pid)
        ranks = {pid: rank for pid, rank in self._ranks(tree).items() if not self._launches(pid)}
        for pid in set(self._stats) - set(ranks):
            self._stats.pop(pid).close()
        for pid in set(ranks) - set(self._stats):
            self._stats[pid] = _ProcStat(pid)
        self._rank_of = ranks

    def _ranks(self, tree: list[tuple[int, int]]) -> dict[int, int]:
        ranks: dict[int, int] = {}
        for pid, parent in tree:
            own = self._env_rank[pid] if pid in self._env_rank else self._read_rank(pid, parent)
            rank = own if own is not None else ranks.get(parent)
            if rank is not None:
                ranks[pid] = rank
        return ranks or {pid: 0 for pid in (self._root_pid, *(pid for pid, _ in tree)) if not self._launches(pid)}

    def _launches(self, pid: int) -> bool:
        """One of the processes that start a trial's ranks, not a rank (`launches`): not sampled, so that a rank's
        figures are its own. A process that is none never becomes one (it is remembered); a warm client may become
        its rank cold (exec), so it is looked at again."""
        if pid in self._not_launcher:
            return False
        if launches(pid):
            return True
        self._not_launcher.add(pid)
        return False

    def _read_rank(self, pid: int, parent: int) -> int | None:
        """Its LOCAL_RANK: from its environment, or, for a rank forked by the warm starter (whose environment in
        /proc is the starter's), from its client's link (`warm.link`)."""
        value = _environ(pid).get("LOCAL_RANK")
        rank = int(value) if value is not None and value.isdigit() else None
        if rank is None and (got := warm.link(parent)) is not None and got[0] == pid:
            rank = got[1]
        self._env_rank[pid] = rank
        return rank

    def close(self) -> None:
        for stat in self._stats.values():
            stat.close()
        self._stats.clear()


# ---------------------------------------------------------------- together


class JointSampler:
    """NVML for the figures, with the host's CPU/RSS recorded alongside (at ~1 Hz)."""

    def __init__(self, primary: Sampler, *others: Sampler) -> None:
        self.source = primary.source
        self._all = (primary, *others)

    def sample(self, now: float) -> list[Sample]:
        return [s for sampler in self._all for s in sampler.sample(now)]

    def close(self) -> None:
        for sampler in self._all:
            sampler.close()


def sampler_for(
    gpus: Sequence[int],
    root_pid: int,
    trial_id: str = "",
    nvml: Any = None,
    ballast_mb: Mapping[int, float] | None = None,
) -> Sampler:
    """NVML (with host alongside) where the trial has GPUs, host alone where it has none; a GPU's memory net of
    the ballast held on it (`ballast_mb`, by NVML index)."""
    if not gpus:
        return HostSampler(root_pid)
    nvml_sampler = NvmlSampler(gpus, root_pid, trial_id, nvml, ballast_mb)
    return JointSampler(nvml_sampler, HostSampler(root_pid, every_s=SLOW_S))


# ---------------------------------------------------------------- the thread


class Monitor:
    """Runs a sampler on a background thread from start() to stop(); keeps every sample. `cpu_s` is the CPU
    time the sampling thread itself used (known after stop): the measurement's own cost."""

    def __init__(self, sampler: Sampler, hz: float, clock: Callable[[], float] = time.time) -> None:
        self.sampler = sampler
        self.samples: list[Sample] = []
        self.cpu_s = 0.0
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
        failures = 0
        try:
            while not self._done.is_set():
                try:
                    self.samples.extend(self.sampler.sample(self._clock()))
                except Exception as exc:  # a sampler failure must not kill the trial; it shows in the log
                    failures += 1
                    log.log(
                        logging.WARNING if failures == 1 else logging.DEBUG,
                        "sampler %s failed: %s",
                        self.sampler.source,
                        exc,
                    )
                self._done.wait(self._period)
        finally:
            self.sampler.close()
            self.cpu_s = time.thread_time()


SAMPLE_COLUMNS = ("t", "index", "util", "mem_mb", "source", "proc_mem_mb", "sm_util")


def write_samples(samples: list[Sample], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(SAMPLE_COLUMNS)
        writer.writerows(_row(s) for s in samples)


def _row(s: Sample) -> tuple[str, ...]:
    def opt(v: float | None) -> str:
        return "" if v is None else f"{v:.1f}"

    return (
        f"{s.t:.3f}",
        str(s.index),
        f"{s.util:.1f}",
        f"{s.mem_mb:.1f}",
        str(s.source),
        opt(s.proc_mem_mb),
        opt(s.sm_util),
    )
