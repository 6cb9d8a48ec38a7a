"""The failure table (data): every way a trial can fail that ladder recognises, as one row each.

A row is a compiled regex, the `Reason` it proves and the real output it was written from. Nothing else in ladder
matches failure text; the rules that choose among matched lines live in `ladder.failures.rules`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from ladder.records import Reason, Status


class Tier(enum.IntEnum):
    """How strongly a matched line claims the root cause; the higher tier wins, then the earlier line."""

    LOW = 1  # communication failures and unrecognised exceptions: often the symptom of another rank's death
    PORT = 2  # launch trouble: nothing ran
    FATAL = 3  # a broken program or config: whatever follows is its consequence
    MEMORY = 4  # memory exhaustion outranks the cascade it causes


_REASON_TIERS = {
    Reason.CUDA_OOM: Tier.MEMORY,
    Reason.HOST_OOM: Tier.MEMORY,
    Reason.ERROR: Tier.FATAL,
    Reason.PORT_IN_USE: Tier.PORT,
}

_STATUSES = {
    Reason.NONE: Status.OK,
    Reason.CUDA_OOM: Status.OOM_OR_NCCL,
    Reason.HOST_OOM: Status.OOM_OR_NCCL,
    Reason.NCCL_ERROR: Status.OOM_OR_NCCL,
    Reason.NCCL_TIMEOUT: Status.OOM_OR_NCCL,
    Reason.PEER_LOST: Status.OOM_OR_NCCL,
    Reason.PORT_IN_USE: Status.RETRY,
    Reason.STALLED: Status.TIMEOUT,
    Reason.TRIAL_TIMEOUT: Status.TIMEOUT,
    Reason.INTERRUPTED: Status.INTERRUPTED,
}


def is_memory(reason: Reason) -> bool:
    """Memory exhaustion: a root cause that no other rank's later line explains away."""
    return _REASON_TIERS.get(reason) is Tier.MEMORY


def status_of(reason: Reason) -> Status:
    """The status a reason implies (anything unlisted is a broken program: `Status.ERROR`)."""
    return _STATUSES.get(reason, Status.ERROR)


@dataclass(frozen=True)
class Pattern:
    """One row of the table: a regex, the reason a match proves, and the real output it was written from."""

    reason: Reason
    regex: re.Pattern[str]
    source: str  # where the line it was written from was seen (an issue thread or a captured log in tests/data)
    generic: bool = False  # a catch-all for exceptions no other row names
    scanner: re.Pattern[str] = field(init=False, repr=False, compare=False)  # `regex` for whole texts (MULTILINE)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scanner", re.compile(self.regex.pattern, self.regex.flags | re.MULTILINE))

    @property
    def tier(self) -> Tier:
        return Tier.LOW if self.generic else _REASON_TIERS.get(self.reason, Tier.LOW)


def _row(reason: Reason, regex: str, source: str, generic: bool = False) -> Pattern:
    return Pattern(reason, re.compile(regex), source, generic)


_R = Reason
_CAPTURED = "captured: tests/data/captured/"

# Ordered by precedence: the first row that matches a line names that line.
PATTERNS: tuple[Pattern, ...] = (
    # --- GPU memory ---
    _row(_R.CUDA_OOM, r"CUDA out of memory", "github.com/modelscope/ms-swift#6301; github.com/NVIDIA/nccl#1284"),
    _row(
        _R.CUDA_OOM,
        r"CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY",
        "github.com/taohan10200/IIM#28; github.com/google/brax#123",
    ),
    _row(_R.CUDA_OOM, r"CUBLAS_STATUS_ALLOC_FAILED", "github.com/QwenLM/Qwen3#873"),
    _row(_R.CUDA_OOM, r"CUDNN_STATUS_NOT_INITIALIZED", "github.com/seanie12/Info-HCVAE#7"),
    _row(_R.CUDA_OOM, r"cuMemAlloc failed: out of memory", "github.com/cryoem-uoft/cryosparc-issues#124"),
    _row(_R.CUDA_OOM, r"memory allocation failed with OOM on device", "github.com/jingyaogong/minimind#845"),
    _row(
        _R.CUDA_OOM,
        r"NCCL WARN Cuda failure 'out of memory'|Failed to CUDA (?:calloc|malloc)",
        "github.com/NVIDIA/nccl#1235",
    ),
    _row(_R.CUDA_OOM, r"PxgCudaDeviceMemoryAllocator fail to allocate", "github.com/Improbable-AI/walk-these-ways#20"),
    _row(_R.CUDA_OOM, r"PxgDynamicsMemoryConfig::\w+ buffer overflow", "github.com/isaac-sim/IsaacLab#1199"),
    _row(
        _R.CUDA_OOM,
        r"Warp CUDA error 2: out of memory|Failed to allocate \d+ bytes on device 'cuda",
        "github.com/isaac-sim/IsaacSim#555",
    ),
    _row(_R.CUDA_OOM, r"RESOURCE_EXHAUSTED: Out of memory", "github.com/google-deepmind/alphafold#1023"),
    # --- host memory ---
    _row(
        _R.HOST_OOM,
        r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)",
        _CAPTURED + "host_default_cpu_allocator.log; github.com/IvanoLauriola/MKLpy#27",
    ),
    _row(_R.HOST_OOM, r"std::bad_alloc", "github.com/ljanyst/ssd-tensorflow#8"),
    _row(_R.HOST_OOM, r"\[Errno 12\] Cannot allocate memory", _CAPTURED + "enomem_lazy_import.log"),
    _row(_R.HOST_OOM, r"MemoryError(?<!\wMemoryError)(?!: cuMemAlloc)", _CAPTURED + "python_memory_error.log"),
    # "Killed" after DataLoader's "killed by signal: ", after a shell's job pid, or alone on its line
    _row(
        _R.HOST_OOM,
        r"Killed(?:(?<=killed by signal: Killed)|(?<=\d Killed)\s|(?<=^Killed)\s*$)",
        "github.com/NWPUZhoufei/LDP-Net#4; " + _CAPTURED + "shell_killed_dash.log, shell_killed_bash.log",
    ),
    _row(
        _R.HOST_OOM,
        r"exitcode\s*:\s*-9\b|exit code 137\b|signal 9: SIGKILL|Signal 9 \(SIGKILL\)",
        "github.com/lmzpai/roboMamba#10; github.com/NWPUZhoufei/LDP-Net#4; " + _CAPTURED + "torchrun_sigkill.log",
    ),
    _row(_R.HOST_OOM, r"[Oo]ut of memory: Killed process|oom-kill:", "github.com/ShengcaiLiao/QAConv#19"),
    _row(_R.HOST_OOM, r"killed due to memory pressure \(OOM\)", "github.com/flwrlabs/flower#2157"),
    # --- fatal program or config errors: a smaller rung would fail the same way ---
    _row(
        _R.ERROR,
        r"an illegal memory access was encountered|(?:error|failure) 700\b",
        "github.com/pytorch/pytorch#152780, #131755; github.com/isaac-sim/OmniIsaacGymEnvs#64",
    ),
    _row(_R.ERROR, r"invalid device ordinal", "github.com/isaac-sim/IsaacSim#555"),
    _row(
        _R.ERROR,
        r"assert\s*\(?\s*self\.\w*batch\w*\s*%\s*self\.\w*batch",
        "github.com/hill-a/stable-baselines#537; github.com/isaac-sim/IsaacGymEnvs#26",
    ),
    _row(
        _R.ERROR,
        r"Duplicate GPU detected|ncclInvalidUsage|invalid usage\b",
        "github.com/horovod/horovod#3929; github.com/Peterande/D-FINE#289; "
        "github.com/Lightning-AI/pytorch-lightning#8139",
    ),
    # --- port in use ---
    _row(
        _R.PORT_IN_USE,
        r"EADDRINUSE|[Aa]ddress already in use|failed to listen on any local network address",
        "github.com/wenet-e2e/wekws#93; github.com/intelligent-machine-learning/dlrover#443; "
        + _CAPTURED
        + "tcpstore_eaddrinuse.log",
    ),
    # --- communication: timeouts, lost peers, NCCL errors ---
    _row(
        _R.NCCL_TIMEOUT,
        r"Watchdog caught collective operation timeout|timed out in blocking wait",
        "github.com/huggingface/diffusers#12422; github.com/pytorch/pytorch#118369",
    ),
    _row(_R.NCCL_TIMEOUT, r"due to a collective timeout", "github.com/axolotl-ai-cloud/axolotl#3476"),
    _row(_R.NCCL_TIMEOUT, r"Timed out waiting \d+ms for (?:recv|send) operation", _CAPTURED + "gloo_timeout.log"),
    _row(
        _R.PEER_LOST,
        r"Connection closed by (?:remote )?peer|Connection reset by peer",
        _CAPTURED + "gloo_peer_closed.log; github.com/NVIDIA/nccl-tests#166; "
        "github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI#1882",
    ),
    _row(_R.PEER_LOST, r"[Ff]ailed to recv, got 0 bytes", _CAPTURED + "store_peer_died.log"),
    _row(_R.PEER_LOST, r"Timed out after \d+ seconds waiting for clients", _CAPTURED + "store_timeout.log"),
    _row(_R.PEER_LOST, r"Broken pipe\b", "github.com/Lightning-AI/pytorch-lightning#8139"),
    _row(
        _R.NCCL_ERROR,
        r"NCCL [Ee]rror\b|nccl(?:Remote|System|Internal|UnhandledCuda)Error\b|DistBackendError",
        "github.com/tatsu-lab/stanford_alpaca#207; github.com/fanq15/FewX#74; github.com/NVIDIA/nccl#975",
    ),
    _row(_R.NCCL_ERROR, r"NET/IB\s*:\s*Got completion from peer", "github.com/NVIDIA/nccl#1405"),
    _row(
        _R.NCCL_ERROR,
        r"NCCL WARN (?:Error\b|socketStartConnect: .*failed|\[Proxy Service \d+\] Failed)",
        "github.com/pytorch/ci-infra#490; github.com/NVIDIA/nccl-tests#166",
    ),
    # --- the catch-alls: a CUDA error or a Python exception that no row above names ---
    _row(_R.ERROR, r"CUDA error\b", "github.com/newton-physics/newton#892", generic=True),
    # an exception name (starting a word, not after `except `, not ChildFailed) ending its line or before ": "
    _row(
        _R.ERROR,
        r"[A-Z](?<!\w[A-Z])(?<!except [A-Z])\w*(?<!ChildFailed)(?:Error|Exception)(?::(?!:)|\s*$)",
        "github.com/mujocolab/mjlab#224; github.com/isaac-sim/IsaacSim#555",
        generic=True,
    ),
)

_SPECIFIC = tuple(p for p in PATTERNS if not p.generic)
