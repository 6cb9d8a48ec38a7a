"""The machine a sweep runs on: the GPUs NVML finds (narrowed by CUDA_VISIBLE_DEVICES), else CPU ranks, and the
facts recorded with every trial (host, versions, the card or the emulated one).

`find_machine` is the one place that reads NVML and the host to decide a sweep's device, ranks and GPU pool.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from ladder.core import ballast
from ladder.core.errors import LadderError
from ladder.core.spec import EmulateBy
from ladder.runner import lease
from ladder.runner.monitor import NvmlSampler, nvml_gpu_count
from ladder.settings.config import Device, Settings
from ladder.workloads import planner
from ladder.workloads.command import single_process


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
    return ballast.mode(w.emulate_gpu_mem_gb, kind.kind is planner.Kind.PROXY, device, EmulateBy(w.emulate_by))


def code_version(where: Path, package: str = "ladder") -> str:
    """The workload's code version: the commit of the git checkout holding `where` (12 hex digits, `-dirty` when
    tracked files differ from it), else the installed version of `package`, else "" (an effect: runs git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(where), "describe", "--always", "--dirty", "--abbrev=12", "--exclude=*"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return _package_version(package)


def _package_version(package: str) -> str:
    try:
        return f"{package}=={metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return ""
