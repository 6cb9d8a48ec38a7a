"""`python -m ladder.runner.ranks --nproc N --port P --log-dir DIR -- PROGRAM [ARGS...]`: several ranks on one node,
started without torchrun's agent, for the trainer ladder owns (the proxy: `workload.proxy_ranks=direct`).

Each rank is PROGRAM with the variables torchrun's agent would give it (`ladder.core.torchenv`). Its stdout and
stderr go to its own logs, where torchrun's `--log-dir` with `--redirects 3` puts them
(`DIR/none_direct/attempt_0/<rank>/{stdout,stderr}.log`, its error file beside them), and each line is copied to this
process's own, prefixed `[default<r>]:` as torchrun's `--tee 3` does. As the agent does, the first rank to fail (a
nonzero exit or a signal) ends the others: SIGTERM, then SIGKILL after a grace; a SIGTERM, SIGINT or SIGHUP that
reaches this process goes on to every rank. It leaves the way the first failing rank did (its code, or its signal),
with 0 when every rank finished, and by the stop signal when one stopped it before any rank failed. What it saves
against torchrun: the agent's own interpreter and torch import, once per launch (`scripts/bench_launch.py --nproc 2`).

With `--pin`, each rank runs on its own share of the CPUs this process may use (`shares`: as many contiguous
CPUs each, where there are at least as many CPUs as ranks; otherwise none is pinned): ranks free to move trade
places with each other and with whatever else runs there, and a step waits for the slower rank at every
collective, so pinned steps spread less (`scripts/bench_pin.py`, docs/benchmarks.md).

Where PROGRAM is a warm client (`python -m ladder.runner.warm MODULE ...`: the proxy's ranks forked from the warm
starter), each client is forked from this process instead of started as an interpreter of its own (`_fork_client`):
it runs the same `warm.main` with the rank's variables, CPUs and streams, so the rank is the same, and a launch
skips one interpreter's start per rank (`scripts/bench_launch.py --client`). Such a client shows this launcher's
command line, which the sampler counts as a launcher's (`procs.launches`), as it counts a client. The clients are
all started before any line is copied, so no fork happens while a copying thread holds a lock. `--no-fork` starts
each client as its own interpreter (how `scripts/bench_launch.py --client` compares the two).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from ladder.core import torchenv
from ladder.runner import procs, warm

GRACE_S = 10.0  # what the others get to stop after the first rank failed (or a stop came), before SIGKILL
COPY_WAIT_S = 5.0  # how long the last lines of a rank that ended may take to be copied
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
USAGE = (
    "usage: python -m ladder.runner.ranks --nproc N --port P --log-dir DIR [--grace-s S] [--pin] [--no-fork] "
    "-- PROGRAM [ARGS...]"
)


def shares(cpus: set[int], nproc: int) -> list[set[int]] | None:
    """Each rank's CPUs under `--pin`: `cpus` in order, cut into `nproc` contiguous runs as even as they go (the
    first ones one larger); None where there are fewer CPUs than ranks (no rank is pinned then)."""
    ordered = sorted(cpus)
    if nproc < 1 or len(ordered) < nproc:
        return None
    size, extra = divmod(len(ordered), nproc)
    out, start = [], 0
    for rank in range(nproc):
        end = start + size + (1 if rank < extra else 0)
        out.append(set(ordered[start:end]))
        start = end
    return out


def copy_lines(stream: IO[bytes], log: Path, sink: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
    """Each line of a rank's stream into its log (flushed, so that it is evidence at once) and, prefixed, to `sink`."""
    with log.open("ab") as out:
        for line in iter(stream.readline, b""):
            out.write(line)
            out.flush()
            with lock, contextlib.suppress(OSError):  # a closed console: the rank's own log still gets every line
                sink.write(prefix + line)
                sink.flush()


@dataclass
class Forked:
    """A warm client forked from this process (`_fork_client`), with what `Ranks` uses of a `subprocess.Popen`."""

    pid: int
    stdout: IO[bytes]
    stderr: IO[bytes]
    returncode: int | None = None


def is_warm_client(program: list[str]) -> bool:
    """Is PROGRAM `<python> -m ladder.runner.warm MODULE ...` (a rank forked from the warm starter)?"""
    return len(program) > 3 and program[1:3] == ["-m", warm.MODULE] and program[3] != "serve"


def _fork_client(program: list[str], env: dict[str, str]) -> Forked:
    """`warm.main` for one rank in a child of this process, as `subprocess.Popen(program, env=env)` would run it with
    its stdout and stderr piped: the child takes the rank's variables, and this thread's CPUs and signal handling as a
    new process would (default handlers until the client sets its own; stop signals held back across the fork)."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover - the child: tests/integration/test_warm.py runs it
        code = 1
        try:
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # no other rank's pipe stays open in this one
            os.environ.clear()
            os.environ.update(env)
            code = procs.exit_as(warm.main(program[3:]))
        except BaseException:  # noqa: BLE001 - a child of a fork leaves here, whatever happened
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    os.close(out_w)
    os.close(err_w)
    return Forked(pid, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"))


class Ranks:
    """The ranks of one launch, started with the stop signals already handled, so that none is left behind."""

    def __init__(
        self,
        program: list[str],
        nproc: int,
        port: int,
        log_dir: str,
        grace_s: float = GRACE_S,
        pin: bool = False,
        fork: bool = True,
    ) -> None:
        self.grace_s = grace_s
        self.stop_signal = 0  # the first stop signal that reached this process
        self.procs: list[subprocess.Popen[bytes] | Forked] = []
        self.copies: list[threading.Thread] = []
        self._ending = threading.RLock()  # a stop signal's handler may run inside `end`, in the same thread
        self._kill_timer: threading.Timer | None = None
        for sig in STOP_SIGNALS:
            signal.signal(sig, self.on_signal)
        mine = os.sched_getaffinity(0)
        pinned = shares(mine, nproc) if pin else None
        fork = fork and is_warm_client(program)
        for rank in range(nproc):
            if self.stop_signal:
                break
            Path(torchenv.rank_dir(log_dir, rank)).mkdir(parents=True, exist_ok=True)
            env = {**os.environ, **torchenv.rank_env(rank, nproc, port, log_dir)}
            if nproc > 1:  # as torchrun does for several ranks, unless it is set
                env.setdefault("OMP_NUM_THREADS", "1")
            if pinned is not None:  # this thread's CPUs are what the rank starts with (a warm rank asks for them too)
                os.sched_setaffinity(0, pinned[rank])
            try:
                if fork:
                    self.procs.append(_fork_client(program, env))
                else:
                    self.procs.append(
                        subprocess.Popen(program, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    )
            finally:
                if pinned is not None:
                    os.sched_setaffinity(0, mine)
        lock = threading.Lock()
        for rank, proc in enumerate(self.procs):  # copied once all are started: no fork while a copy holds a lock
            folder = Path(torchenv.rank_dir(log_dir, rank))
            prefix = f"[{torchenv.ROLE}{rank}]:".encode()  # torchrun's --tee prefix: role name, local rank
            for stream, name, sink in (
                (proc.stdout, "stdout.log", sys.stdout),
                (proc.stderr, "stderr.log", sys.stderr),
            ):
                assert stream is not None
                args = (stream, folder / name, sink.buffer, prefix, lock)
                self.copies.append(threading.Thread(target=copy_lines, args=args, daemon=True))
                self.copies[-1].start()
        if self.stop_signal:  # a signal came while they were starting
            self.end()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if not self.stop_signal:
            self.stop_signal = signum
            self.end()

    def end(self) -> None:
        """SIGTERM every rank still running, once, and SIGKILL what is left after the grace."""
        with self._ending:
            if self._kill_timer is not None:
                return
            self._kill_timer = threading.Timer(self.grace_s, self._signal_all, args=(signal.SIGKILL,))
            self._kill_timer.daemon = True
        self._signal_all(signal.SIGTERM)
        self._kill_timer.start()

    def _signal_all(self, sig: int) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)

    def wait(self) -> int:
        """Reap every rank as it ends; the first to fail ends the others. The code to leave with (module text)."""
        first = 0
        live = {proc.pid: proc for proc in self.procs}
        while live:
            pid, status = os.wait()  # a stop signal's handler runs meanwhile (PEP 475: the wait goes on after it)
            if (proc := live.pop(pid, None)) is None:
                continue
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode and not first:
                first = proc.returncode
                self.end()
        if self._kill_timer is not None:
            self._kill_timer.cancel()
        for thread in self.copies:  # what the ranks printed last, copied before leaving (unless a child of a rank
            thread.join(COPY_WAIT_S)  # holds its pipe open after it)
        return first or (-self.stop_signal if self.stop_signal else 0)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The options before `--`, and the program after it; a ValueError that says the usage."""
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise ValueError(USAGE)
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m ladder.runner.ranks", usage=USAGE, exit_on_error=False)
    parser.add_argument("--nproc", type=int, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--grace-s", type=float, default=GRACE_S)
    parser.add_argument("--pin", action="store_true")
    parser.add_argument("--no-fork", action="store_true")
    try:
        options, unknown = parser.parse_known_args(argv[:split])
    except (argparse.ArgumentError, SystemExit) as err:
        raise ValueError(f"{err}\n{USAGE}") from None
    if unknown or options.nproc < 1:
        problem = f"unknown option(s): {' '.join(unknown)}" if unknown else "--nproc must be at least 1"
        raise ValueError(f"{problem}\n{USAGE}")
    return options, argv[split + 1 :]


def main(argv: list[str]) -> int:
    try:
        options, program = parse(argv)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    ranks = Ranks(
        program, options.nproc, options.port, options.log_dir, options.grace_s, options.pin, not options.no_fork
    )
    return procs.exit_as(ranks.wait())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
