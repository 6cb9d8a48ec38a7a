"""Pre- and post-flight: a trial starts only on GPUs nobody else is using, and leaves no process behind.

Before a launch, each assigned GPU must show no compute process that is not ours, and its used memory must be
back near its baseline: the lowest reading seen while no compute process was listed on it (driver-reserved
memory, a display). Memory above the baseline with no process listed is memory someone holds all the same: a
process in another container that NVML does not list, or one still being torn down. The policy says what a
busy GPU means: `wait` polls until it is clear (then refuses after `timeout_s`), `refuse` raises at once,
`ignore` logs and launches anyway. After a trial, `check_leftovers` kills and reaps whatever still carries the
trial's id.

`clearance` and `lower_baseline` are pure (snapshot in, decision out); `read_gpus` is the only NVML reader, and it
takes the NVML library as a parameter (`NvmlLib`: the three calls it makes), so tests hand it a stand-in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psutil

from ladder.core.errors import ConfigError, LaunchError
from ladder.core.records import PreflightPolicy
from ladder.runner import procs

log = logging.getLogger(__name__)

MIB = 1024 * 1024


Policy = PreflightPolicy  # what a busy GPU means before a launch (ladder.core.records, where the settings hold it)


@dataclass(frozen=True)
class Rules:
    policy: Policy = Policy.WAIT
    mem_slack_mb: float = 512.0  # used memory may sit this far above the GPU's baseline
    timeout_s: float = 600.0  # policy wait: refuse when a GPU is still busy after this long
    poll_s: float = 2.0  # policy wait: seconds between readings (listing processes takes NVML's global lock)


def parse_policy(value: str) -> Policy:
    try:
        return Policy(value)
    except ValueError:
        options = ", ".join(p.value for p in Policy)
        raise ConfigError(f"unknown preflight policy {value!r}", f"use one of: {options}") from None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used_mb: float | None  # None where the driver does not say (some containers, MIG)
    name: str  # "?" where the process is not visible from here (another PID namespace)


@dataclass(frozen=True)
class GpuState:
    """One GPU at one moment."""

    index: int
    used_mb: float
    total_mb: float
    processes: tuple[GpuProcess, ...]  # compute processes NVML lists on it


@dataclass(frozen=True)
class Busy:
    """Why one GPU is not ready."""

    index: int
    foreign: tuple[GpuProcess, ...]  # compute processes that are not ours
    used_mb: float
    baseline_mb: float | None
    excess_mb: float  # memory above baseline + slack (0 when within it)

    def describe(self) -> str:
        procs = ", ".join(f"{p.pid} ({p.name}, {_mb(p.used_mb)})" for p in self.foreign)
        parts = [f"compute process(es) {procs}"] if procs else []
        if self.excess_mb > 0 and self.baseline_mb is not None:
            parts.append(
                f"{self.used_mb:.0f} MiB used, {self.excess_mb:.0f} MiB over its baseline of "
                f"{self.baseline_mb:.0f} MiB plus slack"
            )
        return f"GPU {self.index}: " + "; ".join(parts)


@dataclass(frozen=True)
class Clearance:
    busy: tuple[Busy, ...] = ()

    @property
    def clear(self) -> bool:
        return not self.busy

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(sorted({p.pid for b in self.busy for p in b.foreign}))

    def describe(self) -> str:
        return "; ".join(b.describe() for b in self.busy) or "all assigned GPUs are free"


def _mb(value: float | None) -> str:
    return "? MiB" if value is None else f"{value:.0f} MiB"


# ---------------------------------------------------------------- pure core


def lower_baseline(baseline: Mapping[int, float], snapshot: Sequence[GpuState]) -> dict[int, float]:
    """Each GPU's baseline: the lowest used memory seen while no compute process was listed on it."""
    lowered = dict(baseline)
    for gpu in snapshot:
        if not gpu.processes:
            lowered[gpu.index] = min(gpu.used_mb, lowered.get(gpu.index, gpu.used_mb))
    return lowered


def clearance(
    snapshot: Sequence[GpuState], baseline: Mapping[int, float], slack_mb: float, own_pids: Collection[int] = ()
) -> Clearance:
    """Which GPUs are busy: a compute process not in `own_pids`, or memory above baseline + slack (what our own
    processes hold aside)."""
    busy = (_busy(gpu, baseline.get(gpu.index), slack_mb, own_pids) for gpu in snapshot)
    return Clearance(tuple(b for b in busy if b is not None))


def _busy(gpu: GpuState, baseline_mb: float | None, slack_mb: float, own_pids: Collection[int]) -> Busy | None:
    foreign = tuple(p for p in gpu.processes if p.pid not in own_pids)
    own_mb = sum(p.used_mb or 0.0 for p in gpu.processes if p.pid in own_pids)
    excess = 0.0 if baseline_mb is None else max(0.0, gpu.used_mb - own_mb - baseline_mb - slack_mb)
    if not foreign and excess == 0.0:
        return None
    return Busy(gpu.index, foreign, gpu.used_mb, baseline_mb, excess)


REMIND_S = 30.0  # a wait for busy GPUs says again what it waits for this often


def waiting_line(decision: Clearance, waited_s: float, rules: Rules) -> str:
    """What a wait for busy GPUs is for, who holds them (pid, name, memory), and what the policy does when."""
    left = max(0.0, rules.timeout_s - waited_s)
    so_far = f" ({waited_s:.0f} s so far)" if waited_s else ""
    return (
        f"waiting for busy GPU(s){so_far}: {decision.describe()}; preflight.policy=wait launches once they are clear "
        f"(checked every {rules.poll_s:g} s) and refuses in {left:.0f} s (preflight.timeout_s={rules.timeout_s:g})"
    )


def refusal(decision: Clearance, waited_s: float | None) -> LaunchError:
    """The error that names the processes and the fix."""
    when = f" after waiting {waited_s:.0f} s" if waited_s is not None else ""
    kill = f"stop them (kill {' '.join(map(str, decision.pids))}), " if decision.pids else ""
    unlisted = "" if decision.pids else "find who holds the memory (nvidia-smi; another container?), "
    fix = f"{kill}{unlisted}let ladder wait for them (preflight policy wait), or launch anyway (policy ignore)"
    return LaunchError(f"assigned GPU(s) busy{when}: {decision.describe()}", fix)


# ---------------------------------------------------------------- NVML, behind a protocol


class NvmlLib(Protocol):
    """The part of NVML (`pynvml`) read here."""

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...  # a handle for the GPU index

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...  # .used, .total in bytes

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> Any: ...  # .pid, .usedGpuMemory


def load_nvml() -> NvmlLib:
    """The real NVML, imported and initialised only when a GPU check runs."""
    import pynvml

    pynvml.nvmlInit()
    lib: NvmlLib = pynvml
    return lib


def read_gpus(nvml: NvmlLib, indices: Sequence[int]) -> tuple[GpuState, ...]:
    return tuple(_read_gpu(nvml, index) for index in indices)


def _read_gpu(nvml: NvmlLib, index: int) -> GpuState:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    procs = tuple(_process(p) for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    return GpuState(index, memory.used / MIB, memory.total / MIB, procs)


def _process(info: Any) -> GpuProcess:
    used = getattr(info, "usedGpuMemory", None)  # None (NVML_VALUE_NOT_AVAILABLE) in some containers
    return GpuProcess(int(info.pid), None if used is None else used / MIB, process_name(int(info.pid)))


def process_name(pid: int) -> str:
    try:
        return str(psutil.Process(pid).name())
    except psutil.Error:
        return "?"


# ---------------------------------------------------------------- the gate


class Preflight:
    """The check before each launch; keeps each GPU's baseline from one launch to the next."""

    def __init__(
        self,
        read: Callable[[Sequence[int]], Sequence[GpuState]],
        rules: Rules,
        own_pids: Collection[int] = (),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._read, self._rules, self._own = read, rules, own_pids
        self._clock, self._sleep = clock, sleep
        self.baseline: dict[int, float] = {}

    @classmethod
    def with_nvml(cls, rules: Rules) -> Preflight:
        nvml = load_nvml()
        return cls(lambda indices: read_gpus(nvml, indices), rules)

    def look(self, indices: Sequence[int]) -> Clearance:
        snapshot = self._read(indices)
        self.baseline = lower_baseline(self.baseline, snapshot)
        return clearance(snapshot, self.baseline, self._rules.mem_slack_mb, self._own)

    def before_launch(self, indices: Sequence[int]) -> Clearance:
        """Returns once the GPUs are clear (or the policy is ignore); raises LaunchError when it refuses."""
        started = self._clock()
        decision = self.look(indices)
        said = None  # when the console was last told what the wait is for
        while not decision.clear:
            if self._rules.policy is Policy.IGNORE:
                log.warning("launching on busy GPUs (preflight.policy=ignore): %s", decision.describe())
                return decision
            waited = self._clock() - started
            if self._rules.policy is Policy.REFUSE or waited >= self._rules.timeout_s:
                raise refusal(decision, waited if self._rules.policy is Policy.WAIT else None)
            if said is None or waited - said >= REMIND_S:  # at once, then every REMIND_S: never a silent wait
                log.warning("%s", waiting_line(decision, waited, self._rules))
                said = waited
            self._sleep(self._rules.poll_s)
            decision = self.look(indices)
        if said is not None:
            log.warning("GPU(s) clear after %.0f s: launching", self._clock() - started)
        return decision


# ---------------------------------------------------------------- post-flight


def check_leftovers(trial_id: str, timeout_s: float = 3.0) -> tuple[int, ...]:
    """Kill and reap every process still carrying the trial's id; returns their pids (empty when clean)."""
    killed = tuple(procs.kill_trial(trial_id, cgroups=(), timeout_s=timeout_s))
    for pid in killed:
        log.warning("trial %s left process %d alive; killed it", trial_id, pid)
    return killed
