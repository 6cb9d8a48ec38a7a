"""A stand-in for the NVML library (module `pynvml`): the one hardware boundary faked in the tests (no GPU here)."""

from __future__ import annotations

import ctypes
import statistics
from collections import deque
from collections.abc import Callable
from typing import Any

import pynvml

MIB = 1024 * 1024


class FakeGpu:
    """One device as the driver sees it: what runs on it now, the driver's ring buffer of util samples, and its
    energy counter and power draw."""

    def __init__(
        self,
        name: str = "NVIDIA H100 80GB HBM3",
        total_mb: float = 81559,
        gpm: bool = True,
        buffered: bool = True,
        period_s: float = 1 / 6,
        counter: bool = True,
        power: bool = True,
    ) -> None:
        self.name, self.total_mb, self.gpm, self.buffered, self.period_s = name, total_mb, gpm, buffered, period_s
        self.counter, self.power = counter, power  # False: the driver answers NotSupported (a GPU older than Volta)
        self.power_w = 0.0  # W it draws now (the test scripts it)
        self.energy_mj = 4.2e9  # its energy counter: mJ since the driver loaded, grown by power_w as time passes
        self.util = 0.0  # percent of time a kernel runs, now
        self.sm_util = 0.0  # percent of SMs busy, now
        self.reserved_mb = 530.0  # driver and other users
        self.procs: dict[int, float] = {}  # pid -> MiB
        self.ring: deque[tuple[int, float]] = deque(maxlen=100)  # (µs, util): the driver keeps the newest 100
        self.sm_integral = 0.0  # percent × seconds, what GPM counters accumulate
        self.last_window: list[float] = []  # util of the samples in the last 1/6 s, for GetUtilizationRates


class FakeNvml:
    """Stands in for module `pynvml`: same names, structs, constants and errors; the devices are `FakeGpu`s whose
    clock the test advances. An idle device adds no samples, so `nvmlDeviceGetSamples` raises NOT_FOUND."""

    NVMLError = pynvml.NVMLError
    NVML_ERROR_NOT_FOUND = pynvml.NVML_ERROR_NOT_FOUND
    NVML_GPU_UTILIZATION_SAMPLES = pynvml.NVML_GPU_UTILIZATION_SAMPLES
    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_METRIC_SM_UTIL = pynvml.NVML_GPM_METRIC_SM_UTIL
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t

    def __init__(self, *gpus: FakeGpu, now: float = 1_000_000.0, clock: Callable[[], float] | None = None) -> None:
        self.gpus, self.now = list(gpus), now if clock is None else clock()
        self.clock = clock  # given: the devices' time follows it (a real trial's), each call catching up first
        self._next_sample = {id(g): now for g in gpus}
        self._gpm_samples: dict[int, tuple[float, float]] = {}  # GPM sample address -> (time, sm integral)

    def run(self, seconds: float, step_s: float = 0.01) -> None:
        """Let the devices run for a while: the driver samples each busy one every `period_s`."""
        for _ in range(round(seconds / step_s)):
            self.now += step_s
            for gpu in self.gpus:
                gpu.sm_integral += gpu.sm_util * step_s
                gpu.energy_mj += gpu.power_w * step_s * 1000
                if self.now >= self._next_sample[id(gpu)]:
                    self._next_sample[id(gpu)] = self.now + gpu.period_s
                    gpu.last_window = [gpu.util]
                    if gpu.util > 0:
                        gpu.ring.append((round(self.now * 1e6), gpu.util))

    def _catch_up(self) -> None:
        """Under a real clock: the counters grow by what each device drew since the last call."""
        if self.clock is not None:
            now = self.clock()
            for gpu in self.gpus:
                gpu.energy_mj += gpu.power_w * max(0.0, now - self.now) * 1000
            self.now = max(self.now, now)

    # -- the library's functions, as the sampler calls them
    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None: ...

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetSamples(self, gpu: FakeGpu, kind: int, last_seen_us: int) -> tuple[int, list[Any]]:
        assert kind == pynvml.NVML_GPU_UTILIZATION_SAMPLES
        if not gpu.buffered:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        new = [(ts, u) for ts, u in gpu.ring if ts > last_seen_us]
        if not new:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, [_sample(ts, u) for ts, u in new]

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> Any:
        return pynvml.c_nvmlUtilization_t(gpu=round(statistics.fmean(gpu.last_window or [0.0])), memory=0)

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> Any:
        used = (gpu.reserved_mb + sum(gpu.procs.values())) * MIB
        return pynvml.c_nvmlMemory_t(total=int(gpu.total_mb * MIB), free=int(gpu.total_mb * MIB - used), used=int(used))

    def nvmlDeviceGetComputeRunningProcesses(self, gpu: FakeGpu) -> list[Any]:
        return [
            pynvml.nvmlFriendlyObject({"pid": pid, "usedGpuMemory": int(mb * MIB)}) for pid, mb in gpu.procs.items()
        ]

    def nvmlDeviceGetTotalEnergyConsumption(self, gpu: FakeGpu) -> int:
        if not gpu.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._catch_up()
        return int(gpu.energy_mj)

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        if not gpu.power:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(gpu.power_w * 1000)  # mW

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:
        return gpu.name

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlGpmQueryDeviceSupport(self, gpu: FakeGpu) -> Any:
        return pynvml.c_nvmlGpmSupport_t(version=pynvml.NVML_GPM_SUPPORT_VERSION, isSupportedDevice=int(gpu.gpm))

    def nvmlGpmSampleAlloc(self) -> Any:
        return ctypes.pointer(pynvml.struct_c_nvmlGpmSample_t())

    def nvmlGpmSampleFree(self, sample: Any) -> None: ...

    def nvmlGpmSampleGet(self, gpu: FakeGpu, sample: Any) -> Any:
        self._gpm_samples[_address(sample)] = (self.now, gpu.sm_integral)
        return sample

    def nvmlGpmMetricsGet(self, get: Any) -> Any:
        (t1, a1), (t2, a2) = self._gpm_samples[_address(get.sample1)], self._gpm_samples[_address(get.sample2)]
        for m in get.metrics[: get.numMetrics]:
            assert m.metricId == pynvml.NVML_GPM_METRIC_SM_UTIL
            m.value = (a2 - a1) / (t2 - t1)
        return get


def _sample(ts_us: int, util: float) -> Any:
    s = pynvml.c_nvmlSample_t()
    s.timeStamp, s.sampleValue.uiVal = ts_us, int(util)
    return s


def _address(pointer: Any) -> int:
    return int(ctypes.cast(pointer, ctypes.c_void_p).value or 0)
