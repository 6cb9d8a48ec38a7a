"""A memory cgroup around one trial: the cap, the peak, the OOM-kill count, and a kill that reaches every process.

Both cgroup versions are handled (v1 `memory` hierarchy and the v2 unified one). Creating one needs root and a
writable controller; where that fails `MemCgroup.create` returns None and the launcher falls back to the
process tree. A trial joins through `python -m ladder.runner.trialexec --cgroup DIR -- argv...`, which adds itself and
then execs, so every child of the trial is inside from its first instruction.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
UNLIMITED_V1 = 1 << 62  # v1 shows "no limit" as the largest page count times the page size (~2**63)


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
class Usage:
    """What the cap saw of a trial: its memory peak (all processes of the cgroup together) and the OOM kills."""

    peak_bytes: int
    oom_kills: int
    limit_bytes: int | None = None  # the cap; None when the cgroup has none
    file_bytes: int = 0  # page cache charged to it as the trial ended: reclaimable, never what runs it out of memory


@dataclass(frozen=True)
class MemCgroup:
    path: Path
    layout: Layout

    @staticmethod
    def create(name: str, limit_bytes: int | None, root: Path = ROOT) -> MemCgroup | None:
        """Make a memory cgroup under this process's own one; None where the system does not allow it."""
        for parent, layout in parents(root):
            group = MemCgroup(parent / name, layout)
            try:
                group.path.mkdir(exist_ok=True)
                group.set_limit(limit_bytes)
                return group
            except OSError as exc:
                log.debug("no memory cgroup at %s: %s", parent, exc)
        return None

    @staticmethod
    def at(path: Path) -> MemCgroup:
        """The cgroup at `path`, made by someone else (its version read from the files it has)."""
        return MemCgroup(path, V2 if (path / V2.limit).exists() else V1)

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

    def limit_bytes(self) -> int | None:
        """The cap, None where there is none ("max" in v2; v1 writes its largest page count instead)."""
        try:
            value = int((self.path / self.layout.limit).read_text().strip())
        except (OSError, ValueError):
            return None
        return value if value < UNLIMITED_V1 else None

    def file_bytes(self) -> int:
        """The page cache charged to the cgroup now (`memory.stat`: `file` in v2, `cache` in v1); 0 where unread."""
        key = "file" if self.layout.version == 2 else "cache"
        try:
            lines = (self.path / "memory.stat").read_text().splitlines()
        except OSError:
            return 0
        return next((int(line.split()[1]) for line in lines if line.split()[:1] == [key]), 0)

    def oom_kills(self) -> int:
        try:
            lines = (self.path / self.layout.events).read_text().splitlines()
        except OSError:
            return 0
        return sum(int(line.split()[1]) for line in lines if line.startswith("oom_kill "))

    def usage(self) -> Usage:
        """Read before `remove`: the figures go with the cgroup."""
        return Usage(self.peak_bytes(), self.oom_kills(), self.limit_bytes(), self.file_bytes())

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


def join(path: Path) -> None:
    """Move the calling process into the cgroup at `path`."""
    (path / "cgroup.procs").write_text(str(os.getpid()))


def parents(root: Path) -> list[tuple[Path, Layout]]:
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
