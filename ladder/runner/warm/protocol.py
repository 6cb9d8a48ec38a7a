"""What the orchestrator, a warm starter and a rank's client agree on: the variables that name a starter, the layout
of its folder, and the frames on its socket (a length-prefixed JSON request with the client's streams, then lines:
`P <pid>` and `X <status>` from the keeper, `S <signal>` from the client)."""

from __future__ import annotations

import os
import signal
import socket
import struct

from ladder.runner.procs import WARM_MODULE

MODULE = WARM_MODULE.decode()  # `python -m ladder.runner.warm ...`: recorded cmd.txt files run it by hand too
SOCKET_VAR = "LADDER_WARM_SOCKET"  # the starter's socket, set on a trial's ranks by `ladder.runner.launch.start`
CGROUP_VAR = "LADDER_WARM_CGROUP"  # the trial's memory cgroup, which the forked rank joins first
LINKS_VAR = "LADDER_WARM_LINKS"  # the folder of client pid -> rank pid files
SHARED_VAR = "LADDER_WARM_STARTER"  # the folder of a running starter an orchestrator may use without owning it
SOCKET = "sock"  # a starter's socket, in its folder
IDENTITY = "identity"  # a starter's interpreter and PYTHONPATH, in its folder: who may share it
LINKS = "links"  # ... and the folder of its ranks' links, beside it
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what a client passes on to its rank
HEADER = struct.Struct("!I")  # the request's length, before it


def identity(python: str) -> dict[str, str]:
    """Who may share a starter: the same interpreter with the same `PYTHONPATH` imports the same modules."""
    return {"python": os.path.abspath(python), "pythonpath": os.environ.get("PYTHONPATH", "")}


def read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the client closed the connection")
        data += chunk
    return data
