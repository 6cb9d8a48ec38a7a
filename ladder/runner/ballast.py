"""The ballast holder: a process of ladder's own that holds part of each of a trial's GPUs, so that any trainer
(torch, warp, JAX) meets a smaller card's out-of-memory in its own allocator (`workload.emulate_gpu_mem_gb`).

`Holder.start` runs `python -m ladder.runner.ballast` on the trial's GPUs (CUDA numbered like NVML, limited to
those GPUs) and waits for its one line: what it holds on each GPU (NVML's used memory after less before: its CUDA
context and its allocation), or why it cannot (`ladder.core.ballast.refusal`, `off_target`), which ends the sweep
with a `LaunchError` before any trial is claimed. The holder then sleeps until its stdin closes: `Holder.stop`
closes it (and kills the holder if it lingers); a sweep that dies, even by SIGKILL, closes it too, and the kernel
kills the holder with its parent besides (`PR_SET_PDEATHSIG`). So a ballast outlives nothing.

The GPU is reached through a `Backend`: `TorchCuda` (NVML for what a GPU uses, torch for the context and the
allocation). `LADDER_BALLAST_BACKEND=module:Class` names another, the stand-in for the hardware on machines
without a GPU (the tests' `tests/ballast_fake.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from ladder.core import ballast
from ladder.core.errors import LaunchError
from ladder.runner import procs

log = logging.getLogger(__name__)

MIB = 1024 * 1024
BACKEND_VAR = "LADDER_BALLAST_BACKEND"
START_TIMEOUT_S = 180.0  # importing torch and making a CUDA context per GPU; a first launch on a node is slow
STOP_GRACE_S = 10.0
REFUSED = 3  # the holder's exit code when it cannot make the card


class Backend(Protocol):
    """A GPU as the holder reaches it; `index` is NVML's, `ordinal` the CUDA device the holder sees it as."""

    def read(self, index: int) -> tuple[float, float]: ...  # (total, used) MiB, before the holder touches it

    def free_mb(self, ordinal: int) -> float: ...  # free MiB, making the holder's context on it first

    def hold(self, ordinal: int, mb: float) -> None: ...  # allocate and keep `mb` MiB on it


class TorchCuda:
    """NVML reads what a GPU uses (torch cannot without a context of its own); torch makes the context and holds."""

    def __init__(self) -> None:
        import pynvml
        import torch

        pynvml.nvmlInit()
        self._nvml: Any = pynvml
        self._torch: Any = torch
        self._kept: list[Any] = []  # the allocations, alive as long as the holder

    def read(self, index: int) -> tuple[float, float]:
        info = self._nvml.nvmlDeviceGetMemoryInfo(self._nvml.nvmlDeviceGetHandleByIndex(index))
        return info.total / MIB, info.used / MIB

    def free_mb(self, ordinal: int) -> float:
        free, _total = self._torch.cuda.mem_get_info(ordinal)
        return float(free) / MIB

    def hold(self, ordinal: int, mb: float) -> None:
        self._kept.append(self._torch.empty(int(mb * MIB), dtype=self._torch.uint8, device=f"cuda:{ordinal}"))


def backend() -> Backend:
    named = os.environ.get(BACKEND_VAR, "")
    if not named:
        return TorchCuda()
    module, _, cls = named.partition(":")
    made: Backend = getattr(importlib.import_module(module), cls)()
    return made


# ---------------------------------------------------------------- the holder process


def hold(gpu: Backend, indices: Sequence[int], card_mb: float) -> dict[str, Any]:
    """Hold each GPU down to a `card_mb` card; what it held per GPU (MiB, by NVML index), or why it cannot."""
    before = [ballast.Device(i, *gpu.read(i)) for i in indices]
    for device in before:
        if why := ballast.refusal(device, card_mb):
            return {"refused": why}
    held: dict[str, float] = {}
    for ordinal, device in enumerate(before):
        try:
            gpu.hold(ordinal, ballast.hold_mb(gpu.free_mb(ordinal), device, card_mb))
        except Exception as exc:  # the allocator's own error (out of memory, no device): said as it said it
            return {"refused": f"GPU {device.index}: the holder could not allocate its ballast: {exc}"}
        if why := ballast.off_target(device, card_mb, gpu.free_mb(ordinal)):
            return {"refused": why}
        held[str(device.index)] = round(gpu.read(device.index)[1] - device.used_mb, 1)
    return {"held_mb": held}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ladder.runner.ballast", description=__doc__.split("\n\n")[0])
    parser.add_argument("--card-mb", type=float, required=True, help="the emulated card's size (MiB)")
    parser.add_argument("--devices", required=True, help="NVML indices of the GPUs to hold, comma-separated")
    parser.add_argument("--parent", type=int, default=0, help="the sweep's pid: gone already, the holder ends")
    args = parser.parse_args(argv)
    if not procs.die_with_parent(args.parent or os.getppid(), signal.SIGKILL):  # the sweep is gone already
        return 1
    indices = [int(i) for i in args.devices.split(",") if i.strip()]
    try:
        said = hold(backend(), indices, args.card_mb)
    except Exception as exc:  # no driver, no torch: said in one line, as a refusal
        said = {"refused": f"the holder could not reach the GPUs: {exc.__class__.__name__}: {exc}"}
    print(json.dumps(said), flush=True)
    if "refused" in said:
        return REFUSED
    sys.stdin.read()  # hold until the sweep closes this pipe (or dies: then the kernel closes it)
    return 0


# ---------------------------------------------------------------- the sweep's side


@dataclass
class Holder:
    """A running holder and what it holds on each GPU (MiB, by NVML index)."""

    proc: subprocess.Popen[str]
    card_mb: float
    held_mb: dict[int, float] = field(default_factory=dict)

    @classmethod
    def start(
        cls, devices: Sequence[int], card_mb: float, env: Mapping[str, str], timeout_s: float = START_TIMEOUT_S
    ) -> Holder:
        """Start a holder on `devices` and wait for its line; a `LaunchError` (and no holder left) where it
        cannot hold them down to `card_mb`, or does not say within `timeout_s`."""
        ids = ",".join(str(d) for d in devices)
        argv = [sys.executable, "-m", "ladder.runner.ballast", "--card-mb", f"{card_mb:g}", "--devices", ids]
        env = {**env, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ids}
        proc = subprocess.Popen(
            [*argv, "--parent", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        holder = cls(proc, card_mb)
        said, last = _word(proc.stdout, timeout_s)
        if "held_mb" not in said:
            why = _why_not(said, last, proc, timeout_s, ids)
            holder.stop()
            raise LaunchError(
                why,
                f"the emulated card (workload.emulate_gpu_mem_gb={card_mb / 1024:g}) is held by a ballast on "
                "each GPU of a trial: fix what is said, or set workload.emulate_by=fraction (the built-in proxy) "
                "or workload.emulate_gpu_mem_gb=null",
            )
        holder.held_mb = {int(i): float(mb) for i, mb in said["held_mb"].items()}
        log.info("ballast on GPU(s) %s: %s MiB held, a %.0f MiB card", ids, holder.held_mb, card_mb)
        return holder

    def stop(self) -> int:
        """Give the memory back: close the holder's stdin, wait for it, kill it if it lingers; its exit code."""
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                pipe and pipe.close()
        return code


def _word(pipe: IO[str] | None, timeout_s: float) -> tuple[dict[str, Any], str | None]:
    """The holder's word (its JSON line saying what it holds or why it cannot) and the last line it printed
    before; ({}, None) if it says nothing within `timeout_s`, ({}, its last line or "") if it ends without a word."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for text in pipe or ():
            lines.put(text)
        lines.put("")  # end of its output

    threading.Thread(target=read, daemon=True).start()
    deadline, last = time.monotonic() + timeout_s, ""
    while (left := deadline - time.monotonic()) > 0:
        try:
            text = lines.get(timeout=left)
        except queue.Empty:
            break
        if not text:
            return {}, last
        said = _parse(text)
        if "held_mb" in said or "refused" in said:
            return said, text
        last = text.strip() or last
    return {}, None


def _parse(line: str) -> dict[str, Any]:
    try:
        said = json.loads(line)
    except ValueError:
        return {}
    return said if isinstance(said, dict) else {}


def _why_not(said: Mapping[str, Any], last: str | None, proc: subprocess.Popen[str], timeout_s: float, ids: str) -> str:
    if said.get("refused"):
        return f"cannot emulate the card on GPU(s) {ids}: {said['refused']}"
    if last is None:
        return f"the ballast holder for GPU(s) {ids} said nothing within {timeout_s:g} s"
    code = proc.wait()  # its output ended: so did it
    errors = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
    words = next((text for text in reversed([last, *errors]) if text.strip()), "(nothing)")
    return f"the ballast holder for GPU(s) {ids} ended with exit code {code}: {words}"


if __name__ == "__main__":
    sys.exit(main())
