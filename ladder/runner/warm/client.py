"""A rank's stand-in (`python -m ladder.runner.warm MODULE ARGS...`): hands a warm starter its argv, environment,
folder, CPUs and streams, passes stop signals on to the rank and leaves as the rank did; without a usable starter it
becomes `python -m MODULE ARGS...` (exec: cold). `main` is the command line, `serve` included."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType
from typing import NoReturn

from ladder.runner.procs import is_warm_client, python_module
from ladder.runner.warm.protocol import CGROUP_VAR, HEADER, LINKS_VAR, SOCKET_VAR, STOP_SIGNALS
from ladder.runner.warm.server import serve

USAGE = "usage: python -m ladder.runner.warm MODULE [ARGS...]  |  python -m ladder.runner.warm serve --socket PATH"


class Client:
    """A rank's stand-in: asks the starter for the rank, passes stop signals on, and leaves as the rank did."""

    def __init__(self, sock_path: str, links: str) -> None:
        self.conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.conn.connect(sock_path)
        self.link = Path(links, str(os.getpid())) if links else None
        for sig in STOP_SIGNALS:
            signal.signal(sig, self.on_signal)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            self.conn.sendall(f"S {signum}\n".encode())

    def run(self, argv: list[str], cgroup: str) -> int:
        cpus = sorted(os.sched_getaffinity(0))  # a trial pinned to its leased CPU slots pins its ranks too
        request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "cgroup": cgroup, "cpus": cpus}
        payload = json.dumps(request).encode()
        self.conn.sendall(HEADER.pack(len(payload)))
        socket.send_fds(self.conn, [payload], [0, 1, 2])
        buf = b""
        while True:
            try:
                chunk = self.conn.recv(4096)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            if not chunk:
                print("ladder: the warm starter ended before the rank did", file=sys.stderr)
                return 1
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                kind, _, value = line.decode().partition(" ")
                if kind == "P" and self.link is not None:
                    index = os.environ.get("LOCAL_RANK", "")
                    self.link.write_text(f"{value} {index}" if index.isdigit() else value)
                elif kind == "X":
                    if self.link is not None:
                        with contextlib.suppress(OSError):
                            self.link.unlink()
                    return os.waitstatus_to_exitcode(int(value))


def stands_in(pid: int) -> bool:
    """Is this process a warm client (this module run for a MODULE, not `serve`)? A client that found no starter has
    become its MODULE by exec (`run_cold`), and says so from then on; a process gone says no."""
    return is_warm_client(python_module(pid))


def usable() -> tuple[str, str, str] | None:
    """(socket, cgroup, links) where this rank can be forked from a starter: one runs for it and the trial has a
    memory cgroup this process may move a process into; None otherwise (the rank starts cold)."""
    sock, cgroup = os.environ.get(SOCKET_VAR, ""), os.environ.get(CGROUP_VAR, "")
    if not sock or not cgroup or not os.path.exists(sock):
        return None
    if not os.access(os.path.join(cgroup, "cgroup.procs"), os.W_OK):
        return None
    return sock, cgroup, os.environ.get(LINKS_VAR, "")


def run_cold(argv: list[str]) -> NoReturn:
    """This process becomes `python -m argv[0] argv[1:]`: a rank with no starter to fork it starts cold."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execv(sys.executable, [sys.executable, "-m", *argv])


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        if len(argv) != 3 or argv[1] != "--socket":
            print(USAGE, file=sys.stderr)
            return 2
        return serve(argv[2])
    if not argv or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    where = usable()
    for var in (SOCKET_VAR, CGROUP_VAR, LINKS_VAR):
        os.environ.pop(var, None)  # the rank's own children start as they would anywhere
    if where is not None:
        sock, cgroup, links = where
        try:
            client = Client(sock, links)
        except OSError:  # a starter gone since: start cold
            return run_cold(argv)
        return client.run(argv, cgroup)
    return run_cold(argv)
