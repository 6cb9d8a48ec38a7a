"""Device leases: a trial holds its GPUs (or CPU slots) under file locks, so orchestrators on one host never share one.

Each device has a lock file `<lease_dir>/<kind><id>.lock`; holding its `filelock` lock is holding the device. The
lock is the kernel's flock on an open file, so it dies with the process that holds it: a crashed or SIGKILLed
orchestrator frees its devices with no cleanup step. A lease is taken all at once or not at all (a waiter never
sits on half of what it needs, so two waiters cannot deadlock each other). The lease folder must be local to the
host (the default is under the system temp folder): on a folder shared between hosts, one host's GPU 0 would wait
for another host's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import psutil
from filelock import FileLock, Timeout

from ladder.core.errors import LadderError
from ladder.core.records import Word

DEFAULT_DIR = Path(tempfile.gettempdir()) / "ladder-leases"
POLL_S = 0.1  # how often a waiter tries again; a freed device is taken within this
NOTICE_S = 10.0  # a waiter says once, after this long, who holds what it waits for

log = logging.getLogger(__name__)


class LeaseError(LadderError):
    """Devices could not be leased (more asked for than exist, or none freed in time)."""


class DeviceKind(Word):
    GPU = "gpu"  # handed to the trial as CUDA_VISIBLE_DEVICES
    CPU = "cpu"  # a CPU slot: the launcher decides what a slot means (cores for taskset, OMP threads)


@dataclass(frozen=True)
class Lease:
    """The devices a trial holds, by their ids in the host's numbering (NVML / PCI bus order for GPUs)."""

    kind: DeviceKind
    devices: tuple[int, ...]


# ---------------------------------------------------------------- pure


def lease_env(lease: Lease) -> dict[str, str]:
    """What the trial's environment gets: on GPU, CUDA numbered like NVML (PCI bus order) and limited to the lease."""
    ids = ",".join(str(d) for d in lease.devices)
    if lease.kind is DeviceKind.GPU:
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ids}
    return {"LADDER_CPU_SLOTS": ids}


def visible_pool(env: Mapping[str, str], count: int) -> tuple[int, ...]:
    """The GPUs this orchestrator may lease: those a scheduler already gave it (CUDA_VISIBLE_DEVICES, e.g. a SLURM
    allocation), else all `count` of the host's."""
    given = env.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return tuple(range(count))
    items = [item.strip() for item in given.split(",") if item.strip()]
    if not all(item.isdigit() for item in items):
        raise LeaseError(
            f"CUDA_VISIBLE_DEVICES={given!r} is not a list of GPU indices",
            "lease by index: unset it or give indices such as 0,1",
        )
    return tuple(int(item) for item in items)


def lock_path(lease_dir: Path, kind: DeviceKind, device: int) -> Path:
    return lease_dir / f"{kind}{device}.lock"


def holder_path(lease_dir: Path, kind: DeviceKind, device: int) -> Path:
    return lease_dir / f"{kind}{device}.holder"


# ---------------------------------------------------------------- effects


@contextlib.contextmanager
def acquire(
    n: int,
    pool: Sequence[int],
    lease_dir: Path = DEFAULT_DIR,
    timeout_s: float = 3600.0,
    kind: DeviceKind = DeviceKind.GPU,
    label: str = "",
    clock: Callable[[], float] = time.monotonic,
    notice_s: float = NOTICE_S,
) -> Iterator[Lease]:
    """Hold `n` devices out of `pool` for the `with` block; wait up to `timeout_s` for them to be free, saying once,
    after `notice_s`, who holds them (`holders`)."""
    _check(n, pool, kind)
    lease_dir.mkdir(parents=True, exist_ok=True)
    start = clock()
    deadline, notice = start + timeout_s, start + notice_s
    told = False
    while (held := try_take(n, pool, lease_dir, kind)) is None:
        if clock() >= deadline:
            who = f"see who holds them: cat {lease_dir}/{kind}*.holder; or raise the lease timeout"
            raise LeaseError(f"no {n} free {kind}(s) of {list(pool)} within {timeout_s:g} s", who)
        if not told and clock() >= notice:
            log.warning(
                "waiting for %d free %s(s) of %s (up to %g s): %s",
                n,
                kind,
                list(pool),
                timeout_s,
                "; ".join(holders(pool, lease_dir, kind)) or "their holders left no note",
            )
            told = True
        time.sleep(POLL_S)
    lease = Lease(kind, tuple(device for device, _ in held))
    try:
        _write_holders(lease, lease_dir, label)
        yield lease
    finally:
        _release(held, lease_dir, kind)


def try_take(n: int, pool: Sequence[int], lease_dir: Path, kind: DeviceKind) -> list[tuple[int, FileLock]] | None:
    """`n` free devices of `pool`, locked, in pool order; or None (holding nothing) when fewer are free."""
    held: list[tuple[int, FileLock]] = []
    for device in pool:
        lock = FileLock(str(lock_path(lease_dir, kind, device)))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            continue
        held.append((device, lock))
        if len(held) == n:
            return held
    _release(held, lease_dir, kind)
    return None


def _check(n: int, pool: Sequence[int], kind: DeviceKind) -> None:
    if n < 1 or n > len(pool) or len(set(pool)) != len(pool):
        raise LeaseError(
            f"cannot lease {n} {kind}(s) out of {list(pool)}",
            f"ask for 1 to {len(set(pool))} {kind}(s) per trial (workload.gpus_per_trial)",
        )


def _write_holders(lease: Lease, lease_dir: Path, label: str) -> None:
    """For people asking who holds a device; the lock, not this file, decides."""
    since = datetime.now(timezone.utc).isoformat(timespec="seconds")
    text = f"pid={os.getpid()} host={socket.gethostname()} since={since} {label}\n"
    for device in lease.devices:
        holder_path(lease_dir, lease.kind, device).write_text(text)


def holders(pool: Sequence[int], lease_dir: Path, kind: DeviceKind) -> list[str]:
    """Who holds each device of `pool` that has a holder note, as a person reads it: the note, and, for a process
    on this host, whether it is stopped (a sweep suspended with Ctrl-Z keeps its lease until it resumes or ends)."""
    out = []
    for device in pool:
        try:
            note = holder_path(lease_dir, kind, device).read_text().strip()
        except OSError:
            continue
        out.append(f"{kind}{device} held by {note}{_state(note)}")
    return out


def _state(note: str) -> str:
    fields = dict(part.split("=", 1) for part in note.split() if "=" in part)
    if fields.get("host") != socket.gethostname() or not fields.get("pid", "").isdigit():
        return ""
    pid = int(fields["pid"])
    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return " (no such process here)"
    if status == psutil.STATUS_STOPPED:
        return f" (stopped, e.g. by Ctrl-Z: kill -CONT {pid} resumes it, or end it)"
    return ""


def _release(held: list[tuple[int, FileLock]], lease_dir: Path, kind: DeviceKind) -> None:
    for device, lock in held:
        holder_path(lease_dir, kind, device).unlink(missing_ok=True)  # before the release: never a new holder's
        lock.release()
