"""The shared vocabulary: statuses, reasons, verdicts and trial records (frozen values, no behaviour)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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
    FEW_POINTS = "few_points"  # unmeasured: its window never held `measure.min_window_iters` progress points
    NO_PROGRESS_MATCH = "no_progress_match"  # error: alive, but no line it printed matched the progress reader


@dataclass(frozen=True)
class Verdict:
    """A trial's classified ending and the log line that proved it."""

    status: Status
    reason: Reason = Reason.NONE
    evidence: str = ""


@dataclass(frozen=True)
class Ending:
    """What the launcher observed when a trial's process group ended (input to failures.classify)."""

    exit_code: int | None  # the launcher process's return code; negative = killed by that signal
    log_text: str = ""  # the trial's combined stdout/stderr (its tail is enough)
    rank_logs: dict[int, str] = field(default_factory=dict)  # per-rank output where the launcher keeps it
    error_files: tuple[dict, ...] = ()  # parsed torchrun error.json files (elastic `@record`)
    stopped_by: str = ""  # why ladder stopped the group: "", "window_done", "stalled", "trial_timeout", "interrupted",
    # or "out_of_memory" (at the first evidence; the verdict still comes from the files)
    oom_kills: int = 0  # kernel OOM kills counted by the trial's memory cgroup


class Phase(Word):
    PROBE = "probe"  # short: finds the rung
    CONFIRM = "confirm"  # long: proves the pick holds (never mixed with probe figures)


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial: what ran, how it ended, what it measured."""

    case: str
    method: str
    variant: str
    num_envs: int
    phase: Phase
    status: Status
    reason: Reason
    evidence: str
    figures: dict[str, float]  # min_avg_util, avg_util0.., max_mem0.., samples_per_s, ... (absent = not measured)
    info: dict[str, str]  # provenance and settings: trial_dir, device, source, width_factor, started_at, ...
    number: int = 0  # the storage's trial number within the case's study
