"""A warm starter (`python -m ladder.runner.warm serve --socket PATH`): imports `PRELOAD` once, then forks a keeper
per client and the keeper forks the rank, which joins the trial's cgroup first and runs MODULE as `python -m` would.
It ends when its stdin closes (the orchestrator's end), and the keeper and the rank die with their parents."""

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
import sys
import traceback
from pathlib import Path

from ladder.runner.cgroup import join
from ladder.runner.procs import die_with_parent, exit_as
from ladder.runner.warm.protocol import HEADER, IDENTITY, LINKS, identity, read_exact

PRELOAD = ("torch", "ladder.workloads.proxy.loop")  # what every proxy rank imports first


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
    Path(os.path.dirname(sock_path), IDENTITY).write_text(json.dumps(identity(sys.executable)))
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
    size = HEADER.unpack(read_exact(conn, HEADER.size))[0]
    payload, fds, _, _ = socket.recv_fds(conn, size, 3)
    while len(payload) < size:
        payload += read_exact(conn, size - len(payload))
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
