"""`python -m ladder.runner.trialexec [--cgroup DIR] -- PROGRAM ARGS...`: the small supervisor every trial starts under.

It joins the trial's memory cgroup where there is one (so every process of the trial is inside from its first
instruction), asks the kernel for SIGTERM when the orchestrator dies (PR_SET_PDEATHSIG), and starts PROGRAM
(torchrun, MimicKit, any trainer) in a session of its own. On its first SIGTERM, SIGINT or SIGHUP — from the
launcher's stop, or from the kernel because the orchestrator was killed — it passes one SIGTERM to PROGRAM's
process group, and after a grace period SIGKILLs whatever of the trial is left. Later signals are ignored: the
kernel re-sends the parent-death signal for every orchestrator thread that ends, and torchrun hangs in its own
shutdown when a second SIGTERM lands there. It exits as PROGRAM did (the same code, or the same signal).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import FrameType

from ladder.runner import procs
from ladder.runner.cgroup import MemCgroup, join

GRACE_S = 10.0  # torchrun stops its workers within ~1 s of a SIGTERM; a worker that ignores it gets 30 s there
USAGE = "usage: python -m ladder.runner.trialexec [--cgroup DIR] -- PROGRAM [ARGS...]"


def pin_cpus(slots: str) -> None:
    """A trial that leased CPU slots runs on those cores only; its processes inherit the affinity."""
    if slots:
        os.sched_setaffinity(0, {int(s) for s in slots.split(",")})


class Supervisor:
    """Starts the program with the stop signals already handled, so no signal can orphan it."""

    def __init__(self, program: list[str], cgroup: Path | None) -> None:
        self.cgroup = cgroup
        self.stopping = threading.Event()
        self.child: subprocess.Popen[bytes] | None = None
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self.on_signal)
        self.child = subprocess.Popen(program, start_new_session=True)
        if self.stopping.is_set():  # a signal came while it was starting
            self._stop()

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        if self.child is not None:
            self._stop()

    def _stop(self) -> None:
        assert self.child is not None
        procs.signal_group(self.child.pid, signal.SIGTERM)
        timer = threading.Timer(GRACE_S, self.kill_all)
        timer.daemon = True
        timer.start()

    def kill_all(self) -> None:
        """SIGKILL every process of the trial but this one: the program's group, then the cgroup and the trial id."""
        if self.child is not None:
            procs.signal_group(self.child.pid, signal.SIGKILL)
        groups = [MemCgroup.at(self.cgroup)] if self.cgroup is not None else []
        procs.kill(procs.members(os.environ.get(procs.TRIAL_ID_VAR, ""), groups, but={os.getpid()}))

    def wait(self) -> int:
        assert self.child is not None
        code = self.child.wait()
        if self.stopping.is_set():
            self.kill_all()  # workers in sessions of their own outlive torchrun when it is killed
        return code


def main(argv: list[str]) -> int:
    parent = os.getppid()
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print(USAGE, file=sys.stderr)
        return 2
    split = argv.index("--")
    options, program = argv[:split], argv[split + 1 :]
    cgroup = Path(options[1]) if options[:1] == ["--cgroup"] and len(options) == 2 else None
    if options and cgroup is None:
        print(USAGE, file=sys.stderr)
        return 2
    if cgroup is not None:
        join(cgroup)
    if not procs.die_with_parent(parent, signal.SIGTERM):  # the orchestrator is gone already
        sys.exit(143)
    pin_cpus(os.environ.get("LADDER_CPU_SLOTS", ""))
    return procs.exit_as(Supervisor(program, cgroup).wait())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
