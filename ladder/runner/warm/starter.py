"""The orchestrator's warm starters: one per interpreter, started the first time a trial asks (or shared, where
`SHARED_VAR` names a running one of the same interpreter and `PYTHONPATH`), stopped with a Ctrl-Z, ended at exit.
`Starters` holds them; `STARTERS` is the orchestrator process's own."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ladder.runner.warm.protocol import CGROUP_VAR, IDENTITY, LINKS, LINKS_VAR, MODULE, SHARED_VAR, SOCKET, SOCKET_VAR
from ladder.runner.warm.protocol import identity as identity_of

READY_TIMEOUT_S = 180.0  # a starter not ready by then is given up (the ranks start cold)


@dataclass
class Starter:
    """A running starter: its process, its socket, the links folder, and how long it took to be ready."""

    proc: subprocess.Popen[bytes] | None  # None: a shared one (`SHARED_VAR`), which another process started and ends
    folder: str  # its socket and the links folder, removed when it ends
    ready_s: float

    @property
    def owned(self) -> bool:
        return self.proc is not None

    @property
    def socket_path(self) -> str:
        return os.path.join(self.folder, SOCKET)

    @property
    def links(self) -> str:
        return os.path.join(self.folder, LINKS)

    def env(self, cgroup: Path) -> dict[str, str]:
        """The variables a trial's ranks need to be forked from this starter into `cgroup`."""
        return {SOCKET_VAR: self.socket_path, CGROUP_VAR: str(cgroup), LINKS_VAR: self.links}

    def close(self) -> None:
        if self.proc is None:  # shared: its owner ends it
            return
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # the starter's cue to end (it also ends if this process dies)
            try:
                self.proc.wait(timeout=10)
            except (subprocess.TimeoutExpired, KeyboardInterrupt):  # a Ctrl-C at the very end: no waiting then
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class Starters:
    """An orchestrator's starters, per interpreter (None: it failed once, the ranks start cold), and the links of
    the ranks they forked: which rank a client stands in for."""

    def __init__(self) -> None:
        self._by_python: dict[str, Starter | None] = {}

    def get(self, python: str) -> Starter | None:
        """The starter for `python`, started (and waited for) the first time it is asked for; None where it cannot
        run."""
        if python not in self._by_python:
            self._by_python[python] = shared(python) or start(python)
            if len(self._by_python) == 1:
                atexit.register(self.close)
        return self._by_python[python]

    def started(self) -> list[Starter]:
        return [s for s in self._by_python.values() if s is not None]

    def owned(self) -> list[Starter]:
        """The starters this process started (and stops with a Ctrl-Z, and ends): not a shared one."""
        return [s for s in self.started() if s.owned]

    def share(self, python: str) -> Starter | None:
        """Start a starter for `python` and name it in this process's environment (`SHARED_VAR`), so that the
        orchestrators it starts from now on fork their ranks from it; None where it cannot run (they start their
        own)."""
        got = self.get(python)
        if got is not None:
            os.environ[SHARED_VAR] = got.folder
        return got

    def close(self) -> None:
        for s in self.started():
            s.close()
        self._by_python.clear()

    def linked(self, pid: int) -> int | None:
        """The rank a warm client with this pid stands in for, where these starters forked one."""
        got = self.link(pid)
        return got[0] if got is not None else None

    def link(self, pid: int) -> tuple[int, int | None] | None:
        """A warm client's link file: the rank's pid and its LOCAL_RANK (None where it has none), or None without
        one. The LOCAL_RANK is the sampler's index for a forked rank: its own /proc environ is the starter's, and a
        client forked by the rank launcher shows the launcher's (the variables a fork takes on are not in /proc)."""
        for s in self.started():
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(s.links, str(pid)).read_text().split()
                return int(fields[0]), int(fields[1]) if len(fields) > 1 else None
        return None


STARTERS = Starters()  # the orchestrator process's: a multirun's jobs, its Ctrl-Z and its exit all share them


def shared(python: str) -> Starter | None:
    """The starter `SHARED_VAR` names, where it runs `python` with this process's `PYTHONPATH`; None otherwise."""
    folder = os.environ.get(SHARED_VAR, "")
    if not folder:
        return None
    try:
        who = json.loads(Path(folder, IDENTITY).read_text())
    except (OSError, ValueError):  # gone, or not a starter's folder
        return None
    same = who == identity_of(python)
    if not same or not os.path.exists(os.path.join(folder, SOCKET)):
        return None
    return Starter(None, folder, 0.0)


def start(python: str) -> Starter | None:
    """A starter of this process's own for `python`, once it says `ready`; None where it did not in time."""
    folder = tempfile.mkdtemp(prefix="ladder-warm-")
    os.mkdir(os.path.join(folder, LINKS))
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [python, "-m", MODULE, "serve", "--socket", os.path.join(folder, SOCKET)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a Ctrl-C at the terminal is the orchestrator's to pass on, not the starter's
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    line = proc.stdout.readline() if ready else b""
    if line.strip() != b"ready":
        proc.kill()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return Starter(proc, folder, time.monotonic() - t0)
