"""The machine a sweep runs on: the GPUs NVML finds (narrowed by CUDA_VISIBLE_DEVICES), else CPU ranks, and the
facts recorded with every trial (host, versions, the card or the emulated one).

`find_machine` is the one place that reads NVML and the host to decide a sweep's device, ranks and GPU pool.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path

from ladder.core import ballast
from ladder.core.errors import ConfigError, LadderError
from ladder.core.records import Objective
from ladder.core.spec import EmulateBy, Kind
from ladder.runner import lease
from ladder.runner.nvml import NvmlSampler, nvml_gpu_count
from ladder.settings.config import Device, Settings
from ladder.workloads import planner
from ladder.workloads.command import named_files, single_process


@dataclass(frozen=True)
class Machine:
    """What a sweep runs on."""

    device: str  # cpu or cuda
    gpus: tuple[int, ...]  # NVML indices of the GPUs a trial uses (empty on cpu)
    nproc: int  # ranks per trial
    python: str  # interpreter for torchrun and the trainer
    describe: dict[str, str]  # gpu_name, gpu_mem_total, n_gpus, driver, host, ...
    pool: tuple[int, ...] = ()  # devices trials lease `nproc` of (NVML indices, or CPU cores); () = no leases
    env: dict[str, str] = field(default_factory=dict)  # what every trial's environment gets from it


def find_machine(settings: Settings) -> Machine:
    host_gpus = 0 if settings.device is Device.CPU else nvml_gpu_count()
    visible = _visible_gpus(host_gpus)
    if settings.device is Device.CUDA and not visible:
        raise LadderError(
            "device=cuda but no NVIDIA GPU is visible (none in NVML, or CUDA_VISIBLE_DEVICES is empty)",
            "use device=auto or device=cpu",
        )
    device = "cuda" if visible else "cpu"
    if device == "cpu" and settings.objective is Objective.SAMPLES_PER_JOULE:
        raise ConfigError(
            "objective=samples_per_joule needs a GPU's energy (NVML's energy counter or power draw), and this sweep "
            "runs on CPU, where no trial has that figure: no rung could be picked",
            "use objective=samples_per_s or objective=min_avg_util on CPU, or run it where an NVIDIA GPU is visible",
        )
    per_trial, w = settings.workload.gpus_per_trial, settings.workload
    single = single_process(w.kind, w.launcher, w.command, w.cmd)  # one direct process: one rank
    nproc = per_trial or w.nproc or (1 if single else len(visible) or 2)
    if device == "cuda" and nproc > len(visible):
        raise LadderError(
            f"{nproc} GPU(s) per trial asked for, but {len(visible)} visible: {list(visible)}",
            "lower workload.nproc (or workload.gpus_per_trial), or make more GPUs visible",
        )
    gpus = visible[:nproc] if device == "cuda" else ()
    describe = {
        "host": socket.gethostname(),
        "n_gpus": str(nproc),
        "torch": _version("torch"),
        "workload_version": code_version(Path(__file__).parent),
    }
    describe.update(_gpu_describe(gpus) if device == "cuda" else _cpu_describe(settings))
    if device == "cuda" and (card := emulated_card_gb(settings, device)):  # the card the results are for
        describe |= {"gpu_mem_total": str(round(card * 1024)), "gpu_mem_physical": describe["gpu_mem_total"]}
    pool = (visible if device == "cuda" else tuple(sorted(os.sched_getaffinity(0)))) if per_trial else ()
    # CUDA numbers GPUs fastest first unless told otherwise; NVML (what ladder samples) by PCI bus
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} if device == "cuda" else {}
    return Machine(device, gpus, nproc, sys.executable, describe, pool, env)


def _visible_gpus(host_gpus: int) -> tuple[int, ...]:
    """The GPUs this orchestrator may use, by NVML index: those CUDA_VISIBLE_DEVICES names (a scheduler's
    allocation), else all of the host's."""
    if not host_gpus:
        return ()
    visible = lease.visible_pool(os.environ, host_gpus)
    if missing := [i for i in visible if i >= host_gpus]:
        raise LadderError(
            f"CUDA_VISIBLE_DEVICES names GPU(s) {missing}, but NVML finds {host_gpus}",
            f"name GPUs 0..{host_gpus - 1}, or unset CUDA_VISIBLE_DEVICES",
        )
    return visible


def _gpu_describe(gpus: tuple[int, ...]) -> dict[str, str]:
    sampler = NvmlSampler(list(gpus))
    try:
        return sampler.describe()
    finally:
        sampler.close()


def _cpu_describe(settings: Settings) -> dict[str, str]:
    cap = emulated_card_gb(settings, "cpu")
    return {"gpu_name": "cpu", "gpu_mem_total": str(round(cap * 1024)) if cap else "", "driver": ""}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def emulated_card_gb(settings: Settings, device: str) -> float | None:
    """The emulated card's size where it applies to this workload on this device (`ladder.core.ballast.mode`: the
    proxy's own cap, or a ballast on a GPU for any trainer); None elsewhere, so a setting that does not apply is
    neither shown nor recorded as the card."""
    return settings.workload.emulate_gpu_mem_gb if emulation(settings, device) is not ballast.Mode.NONE else None


def emulation(settings: Settings, device: str) -> ballast.Mode:
    """How this sweep's trials meet the emulated card (`workload.emulate_gpu_mem_gb`, `workload.emulate_by`)."""
    w = settings.workload
    kind = planner.resolve(planner.parse_kind(w.kind), w.mimickit_root, os.environ)
    return ballast.mode(w.emulate_gpu_mem_gb, kind.kind is Kind.PROXY, device, EmulateBy(w.emulate_by))


def code_version(where: Path, package: str = "ladder") -> str:
    """The workload's code version: the commit of the git checkout holding `where` (`git_version`), else the
    installed version of `package`, else "" (an effect: runs git)."""
    return git_version(where) or _package_version(package)


def git_version(where: Path) -> str:
    """The commit of the git checkout holding `where` (12 hex digits), and where tracked files differ from it,
    `-dirty.` and a hash of that difference (so two different edits of one commit are two versions); "" outside a
    checkout or without git (an effect: runs git)."""
    described = _git(where, "describe", "--always", "--dirty", "--abbrev=12", "--exclude=*").decode().strip()
    if not described.endswith("-dirty"):
        return described
    return f"{described}.{hashlib.sha256(_git(where, 'diff', 'HEAD', '--binary')).hexdigest()[:12]}"


def _git(where: Path, *args: str) -> bytes:
    try:
        return subprocess.run(["git", "-C", str(where), *args], capture_output=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return b""


HASHED_BYTES = 1 << 20  # a named file larger than this (a dataset, a checkpoint) counts by its size and time


def trainer_version(workload: planner.Workload) -> str:
    """The trainer's own code and files, where they are not ladder's (the proxy's are `workload_version`): MimicKit's
    folder (its checkout's `git_version`, else a hash of its Python sources), or, for a command, a hash of the files
    its template names (script, configs) and of the version of each git checkout holding one (the modules a script
    imports from its own checkout). "" for the proxy. It is recorded with each trial, and a change of it is a change
    of code for reuse (`ladder.storage.reuse.MACHINE_KEYS`): a trial run before an edit is not reused after it."""
    if workload.mimickit is not None:
        root = Path(workload.mimickit.root)
        return git_version(root) or "sources:" + _digest(sorted((root / "mimickit").rglob("*.py")), root)
    if workload.command is not None:
        files = [Path(f) for f in named_files(workload.command)]
        if not files:
            return git_version(Path(workload.command.launch_dir or "."))
        checkouts = sorted({git_version(f.parent) for f in files} - {""})
        return ";".join([*checkouts, "files:" + _digest(files, Path("/"))])
    return ""


def _digest(files: list[Path], base: Path) -> str:
    """A short hash of the files' names (relative to `base`) and contents (size and modification time for a large
    one); a file that cannot be read counts by its name alone."""
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(base) if f.is_relative_to(base) else f).encode() + b"\0")
        try:
            st = f.stat()
            h.update(f.read_bytes() if st.st_size <= HASHED_BYTES else f"{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            pass
        h.update(b"\0")
    return h.hexdigest()[:16]


def with_trainer(machine: Machine, workload: planner.Workload) -> Machine:
    """The machine with the trainer's version in its description (`trainer_version`), where it has one."""
    version = trainer_version(workload)
    return replace(machine, describe={**machine.describe, "trainer_version": version}) if version else machine


def _package_version(package: str) -> str:
    try:
        return f"{package}=={metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return ""
