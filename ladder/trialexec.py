"""`python -m ladder.trialexec [--cgroup DIR] -- PROGRAM ARGS...`: how every trial process starts.

It asks the kernel to send it SIGTERM when the orchestrator dies (PR_SET_PDEATHSIG survives exec), joins the
trial's memory cgroup where there is one, and then becomes PROGRAM. So the trial is inside its cgroup from its
first instruction, and an orchestrator killed with SIGKILL still takes torchrun down with it (torchrun stops
its workers on SIGTERM).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

from ladder.cgroup import join

PR_SET_PDEATHSIG = 1
USAGE = "usage: python -m ladder.trialexec [--cgroup DIR] -- PROGRAM [ARGS...]"


def die_with_parent(parent_pid: int) -> None:
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the launcher's process-group kill still applies
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        sys.exit(143)


def pin_cpus(slots: str) -> None:
    """A trial that leased CPU slots runs on those cores only; torchrun and its workers inherit the affinity."""
    if slots:
        os.sched_setaffinity(0, {int(s) for s in slots.split(",")})


def main(argv: list[str]) -> int:
    parent = os.getppid()
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print(USAGE, file=sys.stderr)
        return 2
    split = argv.index("--")
    options, program = argv[:split], argv[split + 1 :]
    if options[:1] == ["--cgroup"] and len(options) == 2:
        join(Path(options[1]))
    elif options:
        print(USAGE, file=sys.stderr)
        return 2
    die_with_parent(parent)
    pin_cpus(os.environ.get("LADDER_CPU_SLOTS", ""))
    os.execvp(program[0], program)
    return 127  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
