"""Trial liveness, owned by the orchestrator: who runs a trial, its heartbeat, and whether its owner is dead.

Optuna's journal storage has no heartbeat and ask/tell never records one, so the sweep records its own: a RUNNING
trial carries its owner (host, boot id, pid namespace, pid, the process's start time) and `heartbeat_at`, the
unix time a background thread last wrote while the trial ran. When a sweep starts, `abandoned_because` decides,
from values only, whether a RUNNING trial's owner is gone:

- same machine (host name and boot id) and same pid namespace: dead when no process has the owner's pid, or the
  process that has it started at another time (the pid was reused); decisive, no waiting;
- same host name, another boot id: the machine rebooted since, so the owner is dead;
- anything else (another host, another container, an owner never recorded): dead once the heartbeat (or, lacking
  one, the trial's start) is older than `stale_after_s`. Keep that well above the heartbeat period plus the
  clock skew between hosts.

The processes of a dead owner's trial on this machine are the sweep's to end (`ladder.runner.procs` finds them by
`LADDER_TRIAL_ID` and their cgroup by its name); on another host they cannot be reached from here.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

log = logging.getLogger(__name__)

HEARTBEAT_S = 30.0  # how often a running trial's heartbeat is written
STALE_AFTER_S = 300.0  # a trial of another host is abandoned once its heartbeat is older than this
START_TOL_S = 1.0  # process start times (psutil, same boot) that differ by more are different processes
HEARTBEAT_ATTR = "heartbeat_at"


@dataclass(frozen=True)
class Owner:
    """The orchestrator process that runs a trial."""

    host: str
    boot_id: str  # the kernel's boot id: changes on every reboot
    pid_ns: str  # the pid namespace: pids are comparable only inside one
    pid: int
    started: float  # the process's start time (unix s): tells a reused pid apart

    @staticmethod
    def here() -> Owner:
        me = psutil.Process()
        boot_id = _read("/proc/sys/kernel/random/boot_id")
        return Owner(socket.gethostname(), boot_id, _pid_ns(), me.pid, me.create_time())

    def attrs(self) -> dict[str, Any]:
        return {
            "owner_host": self.host,
            "owner_boot": self.boot_id,
            "owner_pidns": self.pid_ns,
            "owner_pid": self.pid,
            "owner_started": self.started,
        }

    @staticmethod
    def from_attrs(attrs: Mapping[str, Any]) -> Owner | None:
        if "owner_host" not in attrs or "owner_pid" not in attrs:
            return None
        return Owner(
            str(attrs["owner_host"]),
            str(attrs.get("owner_boot", "")),
            str(attrs.get("owner_pidns", "")),
            int(attrs["owner_pid"]),
            float(attrs.get("owner_started", 0.0)),
        )


def abandoned_because(
    owner: Owner | None, here: Owner, pid_started: float | None, last_beat: float, now: float, stale_after_s: float
) -> str:
    """Why a RUNNING trial's owner is dead, or "" while it may be alive. `pid_started`: the start time of the
    process that has the owner's pid here (None: no such process); `last_beat`: its heartbeat (or start), unix s."""
    if owner is not None and owner.host == here.host and owner.boot_id and here.boot_id:
        if owner.boot_id != here.boot_id:
            return f"host {owner.host} rebooted since the trial started"
        if owner.pid_ns == here.pid_ns:
            return _pid_verdict(owner, pid_started)
    if now - last_beat > stale_after_s:
        return f"no heartbeat for {now - last_beat:.0f} s (more than {stale_after_s:g} s)"
    return ""


def same_pid_space(owner: Owner | None, here: Owner) -> bool:
    """Whether the owner's pid can be looked up (and its processes killed) from here."""
    return owner is not None and (owner.host, owner.boot_id, owner.pid_ns) == (here.host, here.boot_id, here.pid_ns)


def pid_started(pid: int) -> float | None:
    """The start time of the live process with this pid, None when there is none (zombies count as none)."""
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.create_time()
    except psutil.Error:
        return None


class Heartbeat:
    """Writes the time through `beat` now and then every `every_s` from a background thread, until exit.

    A failed write (a storage hiccup) is logged and retried at the next beat; it never ends the trial."""

    def __init__(
        self, beat: Callable[[float], None], every_s: float = HEARTBEAT_S, clock: Callable[[], float] = time.time
    ) -> None:
        self._beat, self._every_s, self._clock = beat, every_s, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ladder-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._beat_once()
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            self._beat_once()

    def _beat_once(self) -> None:
        try:
            self._beat(self._clock())
        except Exception as exc:  # noqa: BLE001 - a missed beat must not end the trial
            log.warning("heartbeat not written: %s", type(exc).__name__)


def _pid_verdict(owner: Owner, started: float | None) -> str:
    if started is None:
        return f"owner process {owner.pid} on {owner.host} is gone"
    if abs(started - owner.started) > START_TOL_S:
        return f"owner pid {owner.pid} on {owner.host} now belongs to another process"
    return ""


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
