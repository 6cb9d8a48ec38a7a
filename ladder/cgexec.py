"""`python -m ladder.cgexec CGROUP_DIR -- PROGRAM ARGS...`: join a memory cgroup, then become PROGRAM.

The launcher starts every trial through this, so the trial's processes are inside the cgroup from their
first instruction (no window in which a child could be forked outside it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ladder.cgroup import join


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m ladder.cgexec CGROUP_DIR -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    join(Path(argv[0]))
    os.execvp(argv[2], argv[2:])
    return 127  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
