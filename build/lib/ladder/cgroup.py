"""A memory cgroup around one trial: the cap, the peak, the OOM-kill count, and a kill that reaches every process.

Both cgroup versions are handled (v1 `memory` hierarchy and the v2 unified one). Creating one needs root and a
writable controller; where that fails `MemCgroup.create` returns None and the launcher falls back to the
process tree. A trial joins through `python -m ladder.trialexec --cgroup DIR -- argv...`, which adds itself and
then execs, so every child of the trial is inside from its first instruction.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import psutil

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Layout:
    """Where a cgroup version keeps each figure."""

    version: int
    limit: str
    peak: str
    events: str  # the file with an `oom_kill N` line


V1 = Layout(1, "memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.oom_control")
V2 = Layout(2, "memory.max", "memory.peak", "memory.events")


@dataclass(frozen=True)
class MemCgroup:
    path: Path
    layout: Layout

    @staticmethod
    def create(name: str, limit_bytes: int | None, root: Path = ROOT) -> MemCgroup | None:
        """Make a memory cgroup under this process's own one; None where the system does not allow it."""
        for parent, layout in _parents(root):
            group = MemCgroup(parent / name, layout)
            try:
                group.path.mkdir(exist_ok=True)
                group.set_limit(limit_bytes)
                return group
            except OSError as exc:
                log.debug("no memory cgroup at %s: %s", parent, exc)
        return None

    def set_limit(self, limit_bytes: int | None) -> None:
        value = str(limit_bytes) if limit_bytes else ("-1" if self.layout.version == 1 else "max")
        (self.path / self.layout.limit).write_text(value)
        if self.layout.version == 1 and limit_bytes:
            _try_write(self.path / "memory.memsw.limit_in_bytes", value)  # no swap escape hatch

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def peak_bytes(self) -> int:
        try:
            return int((self.path / self.layout.peak).read_text().strip())
        except (OSError, ValueError):
            return 0

    def oom_kills(self) -> int:
        try:
            lines = (self.path / self.layout.events).read_text().splitlines()
        except OSError:
            return 0
        return sum(int(line.split()[1]) for line in lines if line.startswith("oom_kill "))

    def kill_all(self) -> None:
        """SIGKILL every process in the group (v2 has one file for it; v1 is killed pid by pid)."""
        if self.layout.version == 2 and _try_write(self.path / "cgroup.kill", "1"):
            return
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError as exc:
            log.debug("cgroup %s not removed: %s", self.path, exc)


def remove_stale(prefix: str = "ladder-", root: Path = ROOT) -> int:
    """Remove empty trial cgroups left by an orchestrator that was killed; returns how many."""
    removed = 0
    for parent, _ in _parents(root):
        for path in parent.glob(f"{prefix}*"):
            if _owner_alive(path.name[len(prefix) :]):
                continue  # another orchestrator's trial, maybe created a moment ago and not yet joined
            try:
                path.rmdir()  # the kernel refuses while any process is inside
                removed += 1
            except OSError:
                continue
    return removed


def _owner_alive(rest: str) -> bool:
    """`<pid>-<trial id>`: the orchestrator that made it is still running (older names carry no pid)."""
    pid, sep, _ = rest.partition("-")
    return bool(sep) and pid.isdigit() and psutil.pid_exists(int(pid))


def join(path: Path) -> None:
    """Move the calling process into the cgroup at `path`."""
    (path / "cgroup.procs").write_text(str(os.getpid()))


def _parents(root: Path) -> list[tuple[Path, Layout]]:
    """Candidate parents, this process's own memory cgroup first."""
    found: list[tuple[Path, Layout]] = []
    for line in _self_cgroups():
        hier, controllers, rel = line.split(":", 2)
        rel = rel.lstrip("/")
        if "memory" in controllers.split(",") and (root / "memory").is_dir():
            found += [(root / "memory" / rel, V1), (root / "memory", V1)]
        elif hier == "0" and (root / "cgroup.controllers").is_file():
            found += [(root / rel, V2)]
    return [(p, lay) for p, lay in found if p.is_dir()]


def _self_cgroups() -> list[str]:
    try:
        return Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []


def _try_write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False
