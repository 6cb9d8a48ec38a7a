"""The GPUs' sampler, through NVML (nvidia-ml-py, imported lazily): util from the driver's buffered samples
(`nvmlDeviceGetSamples`, else `nvmlDeviceGetUtilizationRates`), device memory used, the energy counter (else the
power draw), and at ~1 Hz the memory of the trial's own processes and, on Hopper, GPM SM util; a `Sample`'s index is
the GPU. `sampler_for` gives a trial NVML with the host sampler alongside, or the host sampler alone without a GPU."""

from __future__ import annotations

import contextlib
import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ladder.core import ballast
from ladder.core.records import Sample, Source
from ladder.runner.host import HostSampler
from ladder.runner.monitor import MIB, SLOW_S, JointSampler, Sampler
from ladder.runner.procs import TrialPids
from ladder.runner.warm import STARTERS, Starters

log = logging.getLogger(__name__)


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
    counter: bool = True  # False once the driver says it has no energy counter: its power is read instead
    power: bool = True  # False once it reads no power either: no energy figure


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
        starters: Starters = STARTERS,  # whose links name the ranks forked warm
    ):
        self._nvml = nvml if nvml is not None else _nvml()
        self._ballast = dict(ballast_mb or {})  # MiB ladder's holder holds per GPU: not the trial's memory
        self._devices = [_Device(i, self._nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
        for dev in self._devices:
            dev.gpm = _Gpm.open(self._nvml, dev.handle)
        self._trial = TrialPids(root_pid, trial_id, starters.linked) if root_pid is not None else None
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
        util, (energy_mj, power_w) = self._util(dev, now), self._energy(dev)
        if not slow:
            return Sample(now, dev.index, util, used, energy_mj=energy_mj, power_w=power_w)
        sm = dev.gpm.sm_util() if dev.gpm is not None else None
        return Sample(now, dev.index, util, used, Source.NVML, self._proc_mem(dev), sm, energy_mj, power_w)

    def _energy(self, dev: _Device) -> tuple[float | None, float | None]:
        """The energy counter (mJ since the driver loaded) at every sample, the window's edges among them; on a
        GPU without one (older than Volta: NotSupported), its power draw (W) for the window to integrate."""
        nvml = self._nvml
        if dev.counter:
            try:
                return float(nvml.nvmlDeviceGetTotalEnergyConsumption(dev.handle)), None
            except nvml.NVMLError as exc:
                log.info("GPU %d has no energy counter (%s): integrating its power draw", dev.index, exc)
                dev.counter = False
        if dev.power:
            try:
                return None, nvml.nvmlDeviceGetPowerUsage(dev.handle) / 1000.0  # mW
            except nvml.NVMLError as exc:
                log.info("GPU %d reads no power either (%s): no energy figure", dev.index, exc)
                dev.power = False
        return None, None

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
