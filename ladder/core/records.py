"""The shared vocabulary: statuses, reasons, verdicts and trial records (frozen values, no behaviour)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Word(str, enum.Enum):
    """A string enum whose str() is its value: what the TSVs, the storage and the logs show."""

    def __str__(self) -> str:
        return str(self.value)


class Status(Word):
    """How a trial ended, as the walk sees it."""

    OK = "ok"
    OOM_OR_NCCL = "oom_or_nccl"  # memory or communication failure: step down one rung
    TIMEOUT = "timeout"  # stalled or over time: step down
    ERROR = "error"  # a broken config or program: stop this profile, never step down
    INTERRUPTED = "interrupted"  # the sweep was stopped: rerun this trial on resume
    RETRY = "retry"  # launch trouble unrelated to the rung (port in use): run the same rung again
    UNMEASURED = "unmeasured"  # it survived (its memory facts stand: the rungs below fit) but has no figures
    DIVERGED = (
        "diverged"  # it ran and fits, but its training went NaN or infinite: never the pick; the walk goes on down
    )


class Reason(Word):
    """The finer cause behind a status."""

    NONE = ""
    CUDA_OOM = "cuda_oom"
    HOST_OOM = "host_oom"
    NCCL_ERROR = "nccl_error"
    NCCL_TIMEOUT = "nccl_timeout"
    PEER_LOST = "peer_lost"
    PORT_IN_USE = "port_in_use"
    STALLED = "stalled"
    TRIAL_TIMEOUT = "trial_timeout"
    INTERRUPTED = "interrupted"
    ERROR = "error"
    OVERSIZED_ALLOC = "oversized_alloc"  # error: one request many times what the device (or host) holds: a size bug
    FEW_POINTS = "few_points"  # unmeasured: its window never held `measure.min_window_iters` progress points
    NO_PROGRESS_MATCH = "no_progress_match"  # error: alive, but no line it printed matched the progress reader
    NEAR_CAP = "near_cap"  # it survived, but its memory peak came within `measure.cap_headroom_frac` of its cap
    MEMORY_RISING = "memory_rising"  # it survived its budget, but its memory had not stopped rising (no whole cycle)
    CYCLE_UNSEEN = "cycle_unseen"  # ok by time alone: it ran its whole budget, but no update was seen in its lines


# the step-down reasons whose evidence names no memory (a collective's failure, a lost peer, a hang, a trial over its
# time): such a failure may not depend on num_envs at all, which only the ladder's lowest rung can tell
# (`ladder.core.walk.bottom`, `Step.BOTTOM`); an out-of-memory line, or no reason recorded, is never taken for one
NO_MEMORY_REASONS = frozenset(
    {Reason.NCCL_ERROR, Reason.NCCL_TIMEOUT, Reason.PEER_LOST, Reason.STALLED, Reason.TRIAL_TIMEOUT}
)


class StopCause(Word):
    """Why ladder stopped a trial's process group (`Ending.stopped_by`); NONE when it ended by itself."""

    NONE = ""
    WINDOW_DONE = "window_done"  # the measured window closed: the trial did what it was run for
    STALLED = "stalled"  # no progress (and no activity) for stall_timeout_s
    TRIAL_TIMEOUT = "trial_timeout"  # over measure.trial_timeout_s
    INTERRUPTED = "interrupted"  # the sweep was stopped (Ctrl-C, SIGTERM)
    OUT_OF_MEMORY = "out_of_memory"  # at the first memory-failure evidence (the verdict still comes from the files)
    DIVERGED = "diverged"  # at the first line that says its training went NaN or infinite: no window makes it an answer


# Stops of a trial that was running well, by the ranks' own account: its window closed, or it printed its training gone
# NaN. Its logs count as far as they were then: what its processes print as they are killed is no evidence, nor is the
# exit code of the kill.
HEALTHY_STOPS = frozenset({StopCause.WINDOW_DONE, StopCause.DIVERGED})


class Objective(Word):
    """The figure a case's pick maximises (`objective=`)."""

    MIN_AVG_UTIL = "min_avg_util"  # the first figure column: the lower of the devices' mean util
    SAMPLES_PER_S = "samples_per_s"  # throughput
    SAMPLES_PER_JOULE = "samples_per_joule"  # samples per joule the trial's GPUs used (NVML energy; no CPU figure)


class PreflightPolicy(Word):
    """What a busy GPU means before a launch (`preflight.policy=`)."""

    WAIT = "wait"  # poll until clear; refuse after timeout_s
    REFUSE = "refuse"  # raise at once, naming the processes and the fix
    IGNORE = "ignore"  # log a warning and launch anyway


class Confidence(Word):
    """How sure a verdict is: low where its evidence alone leaves the cause open (see README, Verdicts)."""

    HIGH = "high"
    LOW = "low"


@dataclass(frozen=True)
class Verdict:
    """A trial's classified ending, the log line that proved it, and how sure it is (and why, when not sure)."""

    status: Status
    reason: Reason = Reason.NONE
    evidence: str = ""
    confidence: Confidence = Confidence.HIGH
    basis: str = ""  # why the confidence is low ("" when high)


@dataclass(frozen=True)
class Ending:
    """What the launcher observed when a trial's process group ended (input to failures.classify)."""

    exit_code: int | None  # the launcher process's return code; negative = killed by that signal
    log_text: str = ""  # the trial's combined stdout/stderr (its tail is enough)
    rank_logs: dict[int, str] = field(default_factory=dict)  # per-rank output where the launcher keeps it
    error_files: tuple[dict[str, Any], ...] = ()  # parsed torchrun error.json files (elastic `@record`)
    stopped_by: StopCause = StopCause.NONE  # why ladder stopped the group (NONE: it ended by itself)
    oom_kills: int = 0  # kernel OOM kills counted by the trial's memory cgroup


class Source(Word):
    """Where a sample was read: NVML (a GPU) or the host (a rank's process tree)."""

    NVML = "nvml"
    HOST = "host"


@dataclass(frozen=True)
class Sample:
    """One device's utilisation and memory at one moment (`ladder.runner.monitor` takes them, `ladder.core.measure` sums
    them)."""

    t: float  # unix time (aligned with the trainer's progress lines)
    index: int  # GPU index (nvml) or local rank (host)
    util: float  # percent: GPU util (nvml) or CPU% of the rank's tree, 100 = one core (host)
    mem_mb: float  # MiB: device memory used (nvml) or PSS of the rank's tree (host: shared pages once)
    source: Source = Source.NVML
    proc_mem_mb: float | None = None  # MiB the trial's own processes hold on this GPU (~1 Hz; None between)
    sm_util: float | None = None  # percent of SMs busy, from Hopper GPM (~1 Hz; None where unavailable)
    energy_mj: float | None = None  # the GPU's energy counter: mJ since its driver loaded (None where it has none)
    power_w: float | None = None  # W the GPU draws, read where it has no energy counter (None elsewhere)


@dataclass(frozen=True)
class Point:
    """One progress record of a trainer (`ladder.workloads.progress` reads them, `ladder.core.measure` measures)."""

    t: float  # unix time the trainer wrote it
    iter: int
    samples: float  # cumulative env steps (or items), all ranks; 0 where the trainer reports none
    step_time_s: float | None = None
    peak_mem_mb: tuple[float, ...] = ()  # per rank, where the trainer reports it
    data_time_s: float | None = None  # time the step waited for data, where reported
    sps: float | None = None  # samples/s as the trainer itself prints it (CleanRL's is a mean since start)


class Phase(Word):
    PROBE = "probe"  # short: finds the rung
    CONFIRM = "confirm"  # long: proves the pick holds (never mixed with probe figures)
    PLACEMENT = "placement"  # the pick's profile as one-device jobs side by side (`ladder.core.placement`)


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial: what ran, how it ended, what it measured."""

    case: str
    method: str
    profile: str  # the agent profile (the TSVs' and the storage's `variant`)
    num_envs: int
    phase: Phase
    status: Status
    reason: Reason
    evidence: str
    figures: dict[str, float]  # min_avg_util, avg_util0.., max_mem0.., samples_per_s, ... (absent = not measured)
    info: dict[str, str]  # provenance and settings: trial_dir, device, source, width_factor, started_at, ...
    number: int = 0  # the storage's trial number within the case's study


def rung_label(knob: str, rung: int) -> str:
    """A rung as a person reads it: `e64` for num_envs, `update_interval=10` for another knob."""
    return f"e{rung}" if knob == "num_envs" else f"{knob}={rung}"
