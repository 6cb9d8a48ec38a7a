"""The warm starter: the proxy's ranks forked from an interpreter that has torch imported already.

A cold rank of the proxy spends most of its start importing torch (its optimizer is the proxy's own, so no
torch._dynamo import follows: `ladder.workloads.proxy.buffers.Optimizer`), paid again by every launch of a sweep.
That time is ladder's way of starting its own trainer, not the trainer's work, so ladder pays it once: the
orchestrator starts one starter per interpreter
(`python -m ladder.runner.warm serve`), which imports `PRELOAD` and waits on a Unix socket, and each rank is

    python -m ladder.runner.warm MODULE ARGS...

a small client that, where a starter runs for it (`SOCKET_VAR`) and the trial has a memory cgroup (`CGROUP_VAR`),
hands the starter its argv, environment, working folder and standard streams. The starter forks a keeper for the
rank and the keeper forks the rank: it joins the trial's cgroup before anything else (so the trial's stop, its
memory figures and Ctrl-Z reach it as any of its processes), takes the client's streams, variables and folder, and
runs MODULE as `python -m MODULE` would (with the client's CPU affinity: a trial's leased slots hold it). The client
stays as the rank's stand-in in the trial's process tree: a stop signal it gets goes on to the rank, it leaves as
the rank did (the same code, or the same signal), and its death kills the rank (the keeper sees the connection
close). The keeper and the rank die with their parents (PR_SET_PDEATHSIG), and the starter ends when the
orchestrator does (its stdin closes), so no rank outlives its trial or its sweep. The sampler finds the rank through
`LINKS_VAR`: a file per client, named by its pid, holding the rank's pid (`linked`) and its LOCAL_RANK
(`link`: the sampler's index for it, since a forked process's variables are not in /proc).

Without a starter (a recorded `cmd.txt` run by hand, a machine without memory cgroups, a starter that failed), the
client becomes `python -m MODULE ARGS...` (exec: the same process, cold), so that any process listing shows a rank
started cold as one. The sampler counts a rank's own process, never its stand-in (`stands_in`): a client's few
MiB are ladder's, and a rank that ended before it was seen has no figure rather than its client's.

A starter can also be shared: where `SHARED_VAR` names the folder of one already running (`share`), an orchestrator
forks its ranks from that one instead of starting its own, if the starter runs the same interpreter with the same
`PYTHONPATH` (what `python -m` would import is then the same). It neither stops nor suspends a shared starter: the
process that started it owns it (the test session shares one among all its sweeps, so that each sweep does not import
torch once more), and a trial's ranks are still in the trial's cgroup, which is how they are stopped and measured.

What a fork keeps from the starter is only what an import made; the emulated card's cap
(`proxy.device.cap_memory`) counts from the rank's own size at the moment it is set, so a warm rank's figures and
failures are a cold one's.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import random
import runpy
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

from ladder.runner.cgroup import join
from ladder.runner.procs import die_with_parent, exit_as, python_module

MODULE = "ladder.runner.warm"
SOCKET_VAR = "LADDER_WARM_SOCKET"  # the starter's socket, set on a trial's ranks by `ladder.runner.launch.start`
CGROUP_VAR = "LADDER_WARM_CGROUP"  # the trial's memory cgroup, which the forked rank joins first
LINKS_VAR = "LADDER_WARM_LINKS"  # the folder of client pid -> rank pid files
SHARED_VAR = "LADDER_WARM_STARTER"  # the folder of a running starter an orchestrator may use without owning it
IDENTITY = "identity"  # a starter's interpreter and PYTHONPATH, in its folder: who may share it
LINKS = "links"  # ... and the folder of its ranks' links, beside it
PRELOAD = ("torch", "ladder.workloads.proxy.loop")  # what every proxy rank imports first
READY_TIMEOUT_S = 180.0  # a starter not ready by then is given up (the ranks start cold)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
HEADER = struct.Struct("!I")
USAGE = "usage: python -m ladder.runner.warm MODULE [ARGS...]  |  python -m ladder.runner.warm serve --socket PATH"


# ---------------------------------------------------------------- the orchestrator's side


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
        return os.path.join(self.folder, "sock")

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


_starters: dict[str, Starter | None] = {}  # per interpreter; None: it failed once, the ranks start cold


def starter(python: str) -> Starter | None:
    """The starter for `python`, started (and waited for) the first time it is asked for; None where it cannot run."""
    if python not in _starters:
        _starters[python] = _shared(python) or _start(python)
        if len(_starters) == 1:
            atexit.register(close_all)
    return _starters[python]


def started() -> list[Starter]:
    return [s for s in _starters.values() if s is not None]


def owned() -> list[Starter]:
    """The starters this process started (and stops with a Ctrl-Z, and ends): not a shared one."""
    return [s for s in started() if s.owned]


def share(python: str) -> Starter | None:
    """Start a starter for `python` and name it in this process's environment (`SHARED_VAR`), so that the
    orchestrators it starts from now on fork their ranks from it; None where it cannot run (they start their own)."""
    got = starter(python)
    if got is not None:
        os.environ[SHARED_VAR] = got.folder
    return got


def _shared(python: str) -> Starter | None:
    """The starter `SHARED_VAR` names, where it runs `python` with this process's `PYTHONPATH`; None otherwise."""
    folder = os.environ.get(SHARED_VAR, "")
    if not folder:
        return None
    try:
        who = json.loads(Path(folder, IDENTITY).read_text())
    except (OSError, ValueError):  # gone, or not a starter's folder
        return None
    same = who == _identity(python)
    if not same or not os.path.exists(os.path.join(folder, "sock")):
        return None
    return Starter(None, folder, 0.0)


def _identity(python: str) -> dict[str, str]:
    return {"python": os.path.abspath(python), "pythonpath": os.environ.get("PYTHONPATH", "")}


def close_all() -> None:
    for s in started():
        s.close()
    _starters.clear()


def _start(python: str) -> Starter | None:
    folder = tempfile.mkdtemp(prefix="ladder-warm-")
    os.mkdir(os.path.join(folder, LINKS))
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [python, "-m", MODULE, "serve", "--socket", os.path.join(folder, "sock")],
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


def stands_in(pid: int) -> bool:
    """Is this process a warm client (this module run for a MODULE, not `serve`)? A client that found no starter has
    become its MODULE by exec (`run_cold`), and says so from then on; a process gone says no."""
    return is_client(python_module(pid))


def is_client(run: tuple[bytes, list[bytes], list[bytes]] | None) -> bool:
    """`stands_in` on a command line already read (`procs.python_module`)."""
    return run is not None and run[0] == MODULE.encode() and run[1][:1] != [b"serve"]


def linked(pid: int) -> int | None:
    """The rank a warm client with this pid stands in for, where this orchestrator's starters forked one."""
    got = link(pid)
    return got[0] if got is not None else None


def link(pid: int) -> tuple[int, int | None] | None:
    """A warm client's link file: the rank's pid and its LOCAL_RANK (None where it has none), or None without one.
    The LOCAL_RANK is the sampler's index for a forked rank: its own /proc environ is the starter's, and a client
    forked by the rank launcher shows the launcher's (the variables a fork takes on are not in /proc)."""
    for s in started():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(s.links, str(pid)).read_text().split()
            return int(fields[0]), int(fields[1]) if len(fields) > 1 else None
    return None


# ---------------------------------------------------------------- the starter


def serve(sock_path: str) -> int:
    """Import `PRELOAD`, say `ready`, and fork a keeper per connection until stdin closes; what it made goes with it
    (`_tidy`)."""
    try:
        return _serve(sock_path)
    finally:
        _tidy(sock_path)


def _tidy(sock_path: str) -> None:
    """Remove what a starter's folder holds by ladder's layout (its socket, `IDENTITY`, the `LINKS` folder) and then
    the folder, only where nothing else is left in it: a starter run by hand at a socket in a folder of one's own
    leaves that folder and the rest of it as they were."""
    folder = os.path.dirname(sock_path)
    for path in (sock_path, os.path.join(folder, IDENTITY)):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    shutil.rmtree(os.path.join(folder, LINKS), ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty: not ours alone
        os.rmdir(folder)


def _serve(sock_path: str) -> int:
    for name in PRELOAD:
        __import__(name)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():  # a fork would carry a CUDA context no rank can use
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # keepers are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Path(os.path.dirname(sock_path), IDENTITY).write_text(json.dumps(_identity(sys.executable)))
    os.write(1, b"ready\n")
    while True:
        ready, _, _ = select.select([listener.fileno(), 0], [], [])
        if 0 in ready and not os.read(0, 4096):  # the orchestrator closed our stdin, or died
            return 0
        if listener.fileno() in ready:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                os._exit(_keep(conn))
            conn.close()


def _keep(conn: socket.socket) -> int:
    """The keeper of one rank: reads the request, forks the rank, passes stop signals on, reports how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _die_with_parent()
    os.close(0)
    size = HEADER.unpack(_read_exact(conn, HEADER.size))[0]
    payload, fds, _, _ = socket.recv_fds(conn, size, 3)
    while len(payload) < size:
        payload += _read_exact(conn, size - len(payload))
    request = json.loads(payload)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _rank(request, fds)  # never returns
    for fd in fds:
        os.close(fd)
    conn.sendall(f"P {pid}\n".encode())
    pidfd = os.pidfd_open(pid)
    buf = b""
    while True:
        ready, _, _ = select.select([conn.fileno(), pidfd], [], [])
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                conn.sendall(f"X {status}\n".encode())
            return 0
        chunk = conn.recv(4096)
        if not chunk:  # the client is gone: so is the rank
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return 0
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.startswith(b"S "):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, int(line[2:]))


def _rank(request: dict[str, object], fds: list[int]) -> None:
    """The forked rank: into the trial's cgroup, the client's streams, variables and folder, then MODULE."""
    code = 1
    try:
        _die_with_parent()
        for target, fd in enumerate(fds):  # first, so that whatever fails next is in the trial's logs
            os.dup2(fd, target)
            os.close(fd)
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        join(Path(str(request["cgroup"])))
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        cpus = request["cpus"]
        assert isinstance(cpus, list)
        os.sched_setaffinity(0, {int(c) for c in cpus})
        sys.path[0] = str(request["cwd"])  # as `python -m` puts the working folder first
        # line by line, as the copies of a rank's output into its logs read them
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        random.seed()
        torch = sys.modules.get("torch")
        if torch is not None and (threads := os.environ.get("OMP_NUM_THREADS", "")).isdigit():
            torch.set_num_threads(int(threads))  # the OpenMP runtime read the variable when the starter loaded it
        argv = request["argv"]
        assert isinstance(argv, list)
        code = run_module([str(a) for a in argv])
    except BaseException:  # noqa: BLE001 - anything before the module ran: say it, as Python would
        traceback.print_exc()
    finally:
        _exit(code)


def run_module(argv: list[str]) -> int:
    """`python -m argv[0] argv[1:]` in this interpreter: the code it would leave with (a signal as minus it)."""
    sys.argv = [argv[0], *argv[1:]]
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return -signal.SIGINT
    except BaseException:  # noqa: BLE001 - the interpreter's own way: the traceback, then 1
        traceback.print_exc()
        return 1
    return 0


def run_cold(argv: list[str]) -> NoReturn:
    """This process becomes `python -m argv[0] argv[1:]`: a rank with no starter to fork it starts cold."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execv(sys.executable, [sys.executable, "-m", *argv])


def _exit(code: int) -> None:
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()  # noqa: SLF001 - what the interpreter runs at its end (logging's flush, torch's own)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(exit_as(code) & 0xFF)


def _die_with_parent() -> None:
    if not die_with_parent(os.getppid(), signal.SIGKILL):
        os._exit(1)


def _read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError("the client closed the connection")
        data += chunk
    return data


# ---------------------------------------------------------------- the client (each rank)


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


def usable() -> tuple[str, str, str] | None:
    """(socket, cgroup, links) where this rank can be forked from a starter: one runs for it and the trial has a
    memory cgroup this process may move a process into; None otherwise (the rank starts cold)."""
    sock, cgroup = os.environ.get(SOCKET_VAR, ""), os.environ.get(CGROUP_VAR, "")
    if not sock or not cgroup or not os.path.exists(sock):
        return None
    if not os.access(os.path.join(cgroup, "cgroup.procs"), os.W_OK):
        return None
    return sock, cgroup, os.environ.get(LINKS_VAR, "")


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


if __name__ == "__main__":
    sys.exit(exit_as(main(sys.argv[1:])))
