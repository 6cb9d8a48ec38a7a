"""The failure table (data): every way a trial can fail that ladder recognises, as one row each.

A row is a compiled regex, the `Reason` it proves and the real output it was written from. Nothing else in ladder
matches failure text (but `ladder.failures.sizes`, which reads the sizes a memory line states); the rules that choose
among matched lines live in `ladder.failures.rules`.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass, field

from ladder.core.errors import FULL
from ladder.core.records import Reason, Status

# A trainer's own write that found its disk full (`ladder.core.errors.FULL`), in libc's words or Python's
# `[Errno N]`: an `error` that says nothing about the rung or the configuration (`ladder.runner.trial` raises it, so
# the sweep stops for space and the trial runs again). Not a row: NCCL's /dev/shm says the same words for memory.
NO_SPACE = re.compile("|".join([*(re.escape(os.strerror(e)) for e in FULL), *(rf"\[Errno {e}\]" for e in FULL)]))


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
    Reason.OVERSIZED_ALLOC: Tier.FATAL,
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
    weak: str = ""  # why a match alone leaves the cause open (its verdict's confidence is then low); "" = strong
    failing_only: bool = False  # a warning healthy runs print too: it counts only when the run failed
    needles: tuple[str, ...] = ()  # lower-case literals, one of which every match holds: a text without any is skipped
    scanner: re.Pattern[str] = field(init=False, repr=False, compare=False)  # `regex` for whole texts (MULTILINE)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scanner", re.compile(self.regex.pattern, self.regex.flags | re.MULTILINE))

    @property
    def counts_after_a_clean_ending(self) -> bool:
        """After exit 0 or a finished window only the named failures count (no catch-all, no mere warning)."""
        return not (self.generic or self.failing_only)

    @property
    def tier(self) -> Tier:
        return Tier.LOW if self.generic else _REASON_TIERS.get(self.reason, Tier.LOW)


def _row(
    reason: Reason,
    regex: str,
    source: str,
    generic: bool = False,
    weak: str = "",
    failing_only: bool = False,
    needles: tuple[str, ...] = (),
) -> Pattern:
    return Pattern(reason, re.compile(regex), source, generic, weak, failing_only, needles)


_R = Reason
_CAPTURED = "captured: tests/data/captured/"
_DEV = "development corpus: "  # the labelled development excerpts (each also quoted in tests/*/test_failures.py)
_SIMULATOR = "a simulator's contact/pair buffer overflowed: a capacity setting may fix it at this rung"
_KILL = "a SIGKILL with no kernel OOM line: another killer (a scheduler, a user) ends a process the same way"
# the shell's word for SIGKILL in other locales (zh_CN, zh_TW, ja, de, fr, ru, pt, it, ko), lower-cased
_KILLED_ABROAD = (
    "已杀死",
    "已殺死",
    "已砍除",
    "強制終了",
    "getötet",
    "processus arrêté",
    "убито",
    "morto",
    "ucciso",
    "죽었음",
)
# strsignal(SIGKILL) as libc words it: "Killed", and the same words as the shell uses abroad
_KILLED_WORD = r"(?:Killed|已杀死|已殺死|已砍除|強制終了|Getötet|Processus arrêté|Убито|Morto|Ucciso|죽었음)"
_GPU = r"(?:cuda|cu(?:da)?malloc|cumem|gpu|device|hip|cudnn|cublas|thcuda|vram)"

# Ordered by precedence: the first row that matches a line names that line.
PATTERNS: tuple[Pattern, ...] = (
    # --- memory, host side first where a line also names the GPU or says OutOfMemoryError (pinned host, Ray) ---
    _row(
        _R.HOST_OOM,
        r"bytes on host: CUDA_ERROR_OUT_OF_MEMORY|could not allocate pinned host memory",
        _DEV + "craiyon-low-vram-1-pinned-host-alloc-cuda-error-oom",
    ),
    _row(
        _R.HOST_OOM,
        r"RayOutOfMemoryError|ray\.exceptions\.OutOfMemoryError|running low on memory|ray-oom-prevention"
        r"|killed due to memory pressure",
        _DEV + "ray-4877-rllib-impala-rayoutofmemoryerror, search-r1-45-ray-oom-prevention-hint; "
        "github.com/real-stanford/flingbot#11; github.com/flwrlabs/flower#2157",
    ),
    # a cluster's memory monitor killing a task: SLURM's cgroup OOM handler (counted, in its older and newer
    # wordings) and srun's report of the task it killed; before the GPU rows, since a node may be named gpu001
    _row(
        _R.HOST_OOM,
        r"Detected \d+ oom[-_]kill events?\b|killed by the cgroup out-of-memory handler|step tasks have been OOM Killed"
        r"|srun: error: [^\s:]+: tasks? [\d,-]+: Out Of Memory",
        "github.com/lanl/PyBNF#118; github.com/nextflow-io/nextflow#5932; github.com/hafs-community/HAFS#101; "
        "github.com/snakemake/snakemake-executor-plugin-slurm#371; github.com/FoNDUE-HTR/Documentation#5",
    ),
    # a node or a cluster scheduler ending a container or a job for memory: Kubernetes' OOMKilled status, the kubelet
    # evicting pods from a node low on memory (its message names the node, not the program)
    _row(
        _R.HOST_OOM,
        r"\bOOMKilled\b|The node was low on resource: memory|The node had condition: \[MemoryPressure\]",
        "github.com/kubernetes/kubernetes#131530; github.com/sentry-kubernetes/charts#1470; "
        "github.com/paritytech/Nomidot#306",
    ),
    # TensorFlow's allocator naming the CPU as the device it could not allocate on (host memory, whatever words follow)
    _row(_R.HOST_OOM, r"OOM when allocating tensor\b[^\n]*?/device:CPU:\d+", "github.com/thtrieu/darkflow#873"),
    # --- GPU memory ---
    _row(_R.CUDA_OOM, r"CUDA out of memory", "github.com/modelscope/ms-swift#6301; github.com/NVIDIA/nccl#1284"),
    _row(
        _R.CUDA_OOM,
        r"CUDA error: out of memory|CUDA_ERROR_OUT_OF_MEMORY",
        "github.com/taohan10200/IIM#28; github.com/google/brax#123",
    ),
    # torch's exception class (torch.OutOfMemoryError, torch.cuda.OutOfMemoryError), not another library's
    _row(
        _R.CUDA_OOM,
        r"(?<![\w.])(?:torch\.)?(?:cuda\.)?OutOfMemoryError\b",
        _DEV + "avalanche-rl-21-cuda-oom-after-1000-experiences",
        needles=("outofmemoryerror",),
    ),
    _row(
        _R.CUDA_OOM,
        r"CU(?:BLAS|DNN|FFT|SOLVER|SPARSE)_STATUS_ALLOC_FAILED|CUDNN_STATUS_NOT_INITIALIZED",
        "github.com/QwenLM/Qwen3#873; github.com/seanie12/Info-HCVAE#7; github.com/microsoft/CNTK#220",
    ),
    _row(
        _R.CUDA_OOM,
        r"NCCL WARN Cuda failure 'out of memory'|Failed to CUDA (?:calloc|malloc)",
        "github.com/NVIDIA/nccl#1235; github.com/PKU-YuanGroup/Open-Sora-Plan#386",
    ),
    _row(_R.CUDA_OOM, r"PxgCudaDeviceMemoryAllocator fail to allocate", "github.com/Improbable-AI/walk-these-ways#20"),
    _row(
        _R.CUDA_OOM,
        r"Allocator \(GPU_\d+_bfc\) ran out of memory",
        _DEV + "ssrl-8-brax-bfc-allocator-26gib-hydra; github.com/NVIDIA/nccl#1039",
        weak="XLA/TensorFlow's allocator warns so and may go on (it says 'not a failure')",
        failing_only=True,
    ),
    # out-of-memory wording next to a GPU word: THCudaCheck error=2, "cuda failed with error 2 out of memory",
    # cudaMalloc(...) failed with error out of memory, Warp CUDA error 2, Caffe's cudaSuccess (2 vs. 0) out of memory
    _row(
        _R.CUDA_OOM,
        r"(?i)\b" + _GPU + r"\w*\b[^\n]{0,200}?\bout of memory\b"
        r"|memory allocation failed with OOM on device|Failed to allocate \d+ bytes on device 'cuda",
        _DEV + "instant-ngp-488-tcnn-cudamalloc-out-of-memory; github.com/isaac-sim/IsaacSim#555; "
        "github.com/Cadene/vqa.pytorch#47; github.com/junjie18/CMT#15; github.com/houqb/DSS#25; "
        "github.com/cryoem-uoft/cryosparc-issues#124; github.com/jingyaogong/minimind#845",
        needles=("out of memory", "oom on device", "bytes on device"),
    ),
    _row(
        _R.CUDA_OOM,
        r"(?:VK_)?ERROR_OUT_OF_DEVICE_MEMORY|ErrorOutOfDeviceMemory|OomError\(OutOfDeviceMemory\)",
        "github.com/KhronosGroup/MoltenVK#1705; github.com/RippeR37/GL_vs_VK#2; github.com/vulkano-rs/vulkano#172; "
        "github.com/DiligentGraphics/DiligentCore#398",
        needles=("out_of_device_memory", "outofdevicememory"),
    ),
    _row(
        _R.CUDA_OOM,
        r"RESOURCE_EXHAUSTED:[^\n]{0,80}?(?:Out of memory|Attempting to (?:reserve|allocate)|Ran out of memory)"
        r"|[Rr]esource exhausted: (?:OOM|Out of memory)|OOM when allocating|ResourceExhaustedError",
        "github.com/google-deepmind/alphafold#1023; " + _DEV + "xlnet-chinesener-4-tf-oom-allocating-tensor; "
        "github.com/huggingface/transformers#22328; github.com/googlecolab/colabtools#5126; "
        "github.com/pytorch/xla#9524",
    ),
    # GPU simulators whose contact / pair / patch buffers overflow as num_envs grows (PhysX, SAPIEN, MJX, mujoco_warp)
    _row(
        _R.CUDA_OOM,
        r"overflow\b[^\n]{0,60}please increase|please increase its size|increase (?:the )?Px\w*MemoryConfig::\w+"
        r"|Px\w*MemoryConfig::\w+ buffer overflow",
        _DEV + "isaaclab-1389-patch-buffer-after-collision-stack, isaaclab-981-aggregate-pairs-capacity, "
        "maniskill-911-sapien-found-lost-pairs-capacity, mujoco-3096-mjx-warp-ccd-overflow-naccdmax, "
        "mujoco-playground-200-warp-nefc-overflow-njmax; github.com/isaac-sim/IsaacLab#1199",
        weak=_SIMULATOR,
    ),
    # --- host memory ---
    # the kernel's OOM killer in dmesg: its verdict, its victim (the pid, name and sizes it prints only there), its
    # reaper
    _row(
        _R.HOST_OOM,
        r"[Oo]ut of memory: Kill(?:ed)? process|oom-kill:|\bKilled process \d+ \([^)\n]*\),? total-vm:"
        r"|oom_reaper: reaped process",
        "github.com/ShengcaiLiao/QAConv#19; github.com/openbmc/openbmc#1887",
    ),
    _row(
        _R.HOST_OOM,
        r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)",
        _CAPTURED + "host_default_cpu_allocator.log; github.com/IvanoLauriola/MKLpy#27",
    ),
    _row(_R.HOST_OOM, r"std::bad_alloc", "github.com/ljanyst/ssd-tensorflow#8"),
    # ENOMEM by number or by its strerror (a fork, a thread, an mmap, a lazy import under the cap)
    _row(
        _R.HOST_OOM,
        r"\[Errno 12\]|Cannot allocate memory",
        _CAPTURED + "enomem_lazy_import.log",
    ),
    _row(
        _R.HOST_OOM,
        r"_ArrayMemoryError|Unable to allocate [\d.]+ [KMGTPE]i?B for an array",
        _DEV + "pokemonredexperiments-6-sb3-rollout-buffer-960gib",
    ),
    _row(_R.HOST_OOM, r"MemoryError(?<!\wMemoryError)(?!: cuMemAlloc)", _CAPTURED + "python_memory_error.log"),
    # "Killed" after DataLoader's "killed by signal: ", after a shell's job pid (bash; "Killed: 9" on macOS), alone on
    # its line, or right after a progress bar's last redraw (tqdm's "…it/s]" then the shell's line, as a terminal
    # shows it), also as a paste into a thread sets it (**Killed**); the shell's word for SIGKILL in other locales
    # (zh_CN, zh_TW, ja, de, fr, ru, pt, it, ko) alone or after a job pid
    _row(
        _R.HOST_OOM,
        r"Killed(?:(?<=killed by signal: Killed)|(?<=\d Killed)(?:\s|: 9\b)|(?<=^Killed)\s*$|(?<=/s\]Killed)\s*$"
        r"|(?<=/it\]Killed)\s*$)"
        r"|^([*_`]+)Killed\1\s*$"
        r"|(?:^|\d )\s*(?:已杀死|已殺死|已砍除|強制終了|Getötet|Processus arrêté|Убито|Morto|Ucciso|죽었음)\s*$",
        "github.com/NWPUZhoufei/LDP-Net#4; "
        + _CAPTURED
        + "shell_killed_dash.log, shell_killed_bash.log; "
        + _DEV
        + "ale-583-dreamerv2-breakout-killed; github.com/crownpku/Somiao-Pinyin#10; github.com/gensyn-ai/rl-swarm#128; "
        "github.com/CharlesShang/FastMaskRCNN#172; github.com/InternLandMark/LandMark#65",
        weak=_KILL,
        needles=("killed", *_KILLED_ABROAD),
    ),
    # a build tool's child ended by SIGKILL: the compiler driver names the signal in the locale's words (gcc, g++)
    _row(
        _R.HOST_OOM,
        _KILLED_WORD + r" signal terminated program",
        "github.com/PaddlePaddle/Serving#1160; github.com/wulabing/V2Ray_ws-tls_bash_onekey#6",
        weak=_KILL,
        needles=("signal terminated program",),
    ),
    _row(
        _R.HOST_OOM,
        r"exitcode\s*:\s*-9\b|exit (?:code|status) (?:137|-9)\b|signal 9: SIGKILL|Signal 9 \(SIGKILL\)"
        r"|<Signals\.SIGKILL: 9>|process \d+ terminated with signal SIGKILL"
        r"|exited on signal 9\b|killed by signal 9\b|EXIT STRING: Killed \(signal 9\)",
        "github.com/lmzpai/roboMamba#10; github.com/NWPUZhoufei/LDP-Net#4; " + _CAPTURED + "torchrun_sigkill.log; "
        "github.com/bmaltais/kohya_ss#1065; github.com/lyu-yx/ACUMEN#4 (torch.multiprocessing.spawn's wording); "
        "MPI launchers: github.com/mfem/mfem#3424, github.com/3dem/relion#112 (Open MPI), "
        "github.com/pmodels/mpich#743, github.com/openai/jukebox#155 (MPICH)",
        weak=_KILL,
    ),
    # --- fatal program or config errors: a smaller rung would fail the same way ---
    # a shared library that cannot be loaded (missing, or of another version): an install error, whatever library it
    # names (NCCL's, CUDA's, torch's own); not the probe for an optional plugin or backend, nor a warning such as
    # torchvision's or TensorFlow's loader's, which healthy runs print too
    _row(
        _R.ERROR,
        r"^(?!.*(?:[Pp]lugin|Warning\b|\bwarn\(|dso_loader|initialize backend))(?:.*?(?:cannot open shared object file"
        r"|undefined symbol: \w|Unable to load \w+ library|Failed to import \w+ library))",
        "github.com/NVIDIA/nccl-tests#85; github.com/ChrisAllenMing/GPA-detection#24; "
        "github.com/pytorch/pytorch#131284, #32638; github.com/NVIDIA/nccl#1180; github.com/vllm-project/vllm#4312",
        failing_only=True,
        needles=("shared object file", "undefined symbol", "library"),
    ),
    _row(
        _R.ERROR,
        r"an illegal memory access was encountered|(?:error|failure) 700\b",
        "github.com/pytorch/pytorch#152780, #131755; github.com/isaac-sim/OmniIsaacGymEnvs#64",
    ),
    _row(_R.ERROR, r"invalid device ordinal", "github.com/isaac-sim/IsaacSim#555"),
    # a process that died of a segmentation fault, as torchrun, torch's spawn or the shell reports it: the other
    # ranks' lost peer or broken pipe after it is its consequence, never a step-down of its own (SIGBUS is left
    # out: a full /dev/shm ends DataLoader workers with it; SIGABRT too: NCCL's watchdog aborts with it)
    _row(
        _R.ERROR,
        r"exitcode\s*:\s*-11\b|Signal 11 \(SIGSEGV\)|terminated with signal SIGSEGV\b|\bSegmentation fault\b",
        _DEV
        + "carla-roach-15, dribblebot-1, legged-gym-62 (the shell's word); "
        + _CAPTURED
        + "torchrun_sigsegv.log, spawn_sigsegv.log (torch.multiprocessing.spawn, as MimicKit starts its ranks)",
        failing_only=True,
    ),
    _row(
        _R.ERROR,
        r"assert\s*\(?\s*self\.\w*batch\w*\s*%\s*self\.\w*batch",
        "github.com/hill-a/stable-baselines#537; github.com/isaac-sim/IsaacGymEnvs#26",
    ),
    _row(
        _R.ERROR,
        r"Duplicate GPU detected|ncclInvalidUsage|invalid usage\b"
        r"|Bootstrap Root : (?:mismatch in rank count|rank \d+ of \d+ ranks has already checked in)",
        "github.com/horovod/horovod#3929; github.com/Peterande/D-FINE#289; "
        "github.com/Lightning-AI/pytorch-lightning#8139, #14986; github.com/pytorch/pytorch#46248",
    ),
    # --- port in use ---
    _row(
        _R.PORT_IN_USE,
        r"EADDRINUSE|[Aa]ddress already in use|failed to listen on any local network address",
        "github.com/wenet-e2e/wekws#93; github.com/intelligent-machine-learning/dlrover#443; "
        + _CAPTURED
        + "tcpstore_eaddrinuse.log",
    ),
    # the same by number (98 on Linux, 10048 = WSAEADDRINUSE, also as Windows' own [WinError 10048] before a message
    # in the system's language), in Windows' English words, or as gRPC's failed bind
    _row(
        _R.PORT_IN_USE,
        r"(?:[Ee]rrno|WinError)\W{0,3}(?:98|10048)\b|Only one usage of each socket address"
        r"|Failed to add any wildcard listeners",
        _DEV + "raisimlib-407-raisimserver-bind-errno-98, ray-23152-raylet-grpc-address-in-use; "
        "github.com/Adi-iitd/AI-Art#10; github.com/IIC2233/syllabus-2020-1#1088",
    ),
    # --- communication: timeouts, lost peers, NCCL errors ---
    _row(
        _R.NCCL_TIMEOUT,
        r"Watchdog caught collective operation timeout|timed out in blocking wait",
        "github.com/huggingface/diffusers#12422; github.com/pytorch/pytorch#118369",
    ),
    _row(_R.NCCL_TIMEOUT, r"due to a collective timeout", "github.com/axolotl-ai-cloud/axolotl#3476"),
    # torch's NCCL watchdog stuck behind a collective or CUDA call that never returns, and the heartbeat monitor that
    # then ends the process: a hang of the communication, like a collective's timeout (torch only suspects it, so a
    # run that exits cleanly after it has not failed)
    _row(
        _R.NCCL_TIMEOUT,
        r"ProcessGroupNCCL's watchdog got stuck for \d+ seconds"
        r"|Heartbeat monitor timed out! Process will be terminated",
        "github.com/hiyouga/LlamaFactory#8549; github.com/xdit-project/xDiT#147",
        failing_only=True,
    ),
    _row(_R.NCCL_TIMEOUT, r"\] Timeout at NCCL work: \d+", "github.com/hiyouga/LlamaFactory#6269"),
    # the same watchdog seen only by its C++ frames (a paste that kept the stack, not the message): its timeout check
    # raising, or the watchdog thread itself ending the process (a collective failed, or a CUDA error surfaced in it)
    _row(
        _R.NCCL_TIMEOUT,
        r"ProcessGroupNCCL::WorkNCCL::checkTimeout\(|Exception raised from checkTimeout at \S*ProcessGroupNCCL",
        "github.com/sgl-project/sglang#1693; github.com/huggingface/open-r1#620",
    ),
    _row(
        _R.NCCL_ERROR,
        r"ProcessGroupNCCL::ncclCommWatchdog\(\)|Exception raised from ncclCommWatchdog at",
        "github.com/sgl-project/sglang#1693; github.com/pytorch/pytorch#126544",
        weak="the watchdog's frames alone: a collective failed, or a CUDA error surfaced in it",
    ),
    _row(_R.NCCL_TIMEOUT, r"Timed out waiting \d+ms for (?:recv|send) operation", _CAPTURED + "gloo_timeout.log"),
    _row(
        _R.PEER_LOST,
        r"Connection closed by (?:remote )?peer|Connection reset by peer",
        _CAPTURED + "gloo_peer_closed.log; github.com/NVIDIA/nccl-tests#166; "
        "github.com/RVC-Project/Retrieval-based-Voice-Conversion-WebUI#1882",
    ),
    _row(_R.PEER_LOST, r"[Ff]ailed to recv, got 0 bytes", _CAPTURED + "store_peer_died.log"),
    # c10d's key-value store timing out while it waits for a key that another rank should have set (NCCL's unique
    # id, the rendezvous count): a rank that never arrived; by count, by torch's older and newer wordings. A client
    # that cannot reach the store at all ("The client socket has timed out ... while trying to connect") is left out:
    # that is more often a wrong address or port than a peer lost.
    _row(
        _R.PEER_LOST,
        r"Timed out after \d+ seconds waiting for (?:clients|workers)"
        r"|(?:got error|DistStoreError|RuntimeError): Socket Timeout\b|DistStoreError: wait timeout after \d+ ?ms",
        _CAPTURED + "store_timeout.log; github.com/kyleliang919/C-Optim#10; github.com/kaito-project/kaito#135; "
        "github.com/alibaba/Pai-Megatron-Patch#468; github.com/pytorch/pytorch#55571, #111805, #131808",
    ),
    _row(_R.PEER_LOST, r"Broken pipe\b", "github.com/Lightning-AI/pytorch-lightning#8139"),
    # gloo's ranks failing to connect to one another at init (its full mesh): a peer that is not there
    _row(_R.PEER_LOST, r"connectFullMesh failed", "github.com/RobinWu218/SimDINO#15"),
    # a peer that is gone: NCCL's bootstrap retrying a refused connect, c10d's store client refused
    _row(
        _R.PEER_LOST,
        r"Call to connect returned Connection refused",
        "github.com/wenet-e2e/wenet#959",
    ),
    _row(
        _R.NCCL_ERROR,
        r"NCCL [Ee]rror\b|nccl(?:Remote|System|Internal|UnhandledCuda)Error\b|DistBackendError",
        "github.com/tatsu-lab/stanford_alpaca#207; github.com/fanq15/FewX#74; github.com/NVIDIA/nccl#975",
    ),
    _row(_R.NCCL_ERROR, r"NET/IB\s*:\s*Got completion from peer", "github.com/NVIDIA/nccl#1405"),
    # torch's ProcessGroupNCCL taking the process down after a failed or timed-out collective
    _row(
        _R.NCCL_ERROR,
        r"Some NCCL operations have failed or timed out|Exception \(either an error or timeout\) detected by watchdog"
        r"|NCCL communicator was aborted|failure detected by watchdog at work sequence id",
        "github.com/EvolvingLMMs-Lab/open-r1-multimodal#20; github.com/GAIR-NLP/DeepResearcher#16; "
        "github.com/TexasInstruments/edgeai-mmdetection#8; github.com/modelscope/ms-swift#7104",
    ),
    # an NCCL call that failed, by name (XLA's wording, glog's Check failed), or NCCL's own result strings
    _row(
        _R.NCCL_ERROR,
        r"NCCL operation \w+\([\w&, ]*\) failed|Check failed:[^\n]{0,40}\bnccl\w*|unhandled (?:cuda|system) error",
        _DEV + "jax-15628-pmap-all-reduce-ncclgroupend-unhandled-cuda, jax-17399-intercepted-xla-ncclcomminitrank; "
        "github.com/facebookresearch/metaseq#90; github.com/PaddlePaddle/Paddle#14620",
    ),
    _row(
        _R.NCCL_ERROR,
        r"NCCL WARN (?:Cuda failure|[^\n]{0,80}[Mm]essage truncated|Socket recv failed)",
        "github.com/NVIDIA/TensorRT-LLM#1670; github.com/NVIDIA/nccl#626, #1176, #1235",
    ),
    _row(
        _R.NCCL_ERROR,
        r"NCCL WARN (?:Error\b|socketStartConnect: .*failed|\[Proxy Service \d+\] Failed)",
        "github.com/pytorch/ci-infra#490; github.com/NVIDIA/nccl-tests#166",
    ),
    # NCCL's socket layer failing while the ranks bootstrap or connect: an address or a peer it cannot reach or bind
    # (NCCL 2.2 wrote "WARN" without "NCCL"). Only the socket calls: the warnings healthy runs print too (an IB device
    # that will not open, libibverbs missing) name no socket call and count for nothing.
    _row(
        _R.NCCL_ERROR,
        r"\bWARN (?:Connect to \S+ failed|Call to (?:connect|bind|listen|accept)\b[^\n]{0,12}?(?:failed|timeout))"
        r"|NCCL WARN socketPollConnect: Connect to \S+ returned|NCCL WARN Bootstrap : no socket interface found",
        "github.com/espnet/espnet#1940; github.com/horovod/horovod#110; github.com/NVIDIA/nccl-tests#15; "
        "github.com/rwth-i6/returnn#1470; github.com/sgl-project/sglang#3820; github.com/ultralytics/ultralytics#7038",
    ),
    # --- the catch-alls: a CUDA error or a Python exception that no row above names ---
    # c10d's store client seeing its server's socket close (end of file): printed at teardown too, so a symptom only
    _row(
        _R.PEER_LOST,
        r"TCPStore\w*\.cpp[^\n]{0,160}(?:name:EOF|end of file)|recvValue failed",
        "github.com/NVIDIA/nccl#1657; github.com/sgl-project/sglang#20859",
        generic=True,
    ),
    _row(_R.ERROR, r"CUDA error\b", "github.com/newton-physics/newton#892", generic=True),
    # an exception name (starting a word, not after `except `, not ChildFailed) ending its line or before ": "
    _row(
        _R.ERROR,
        r"[A-Z](?<!\w[A-Z])(?<!except [A-Z])\w*(?<!ChildFailed)(?:Error|Exception)(?::(?!:)|\s*$)",
        "github.com/mujocolab/mjlab#224; github.com/isaac-sim/IsaacSim#555",
        generic=True,
    ),
)
