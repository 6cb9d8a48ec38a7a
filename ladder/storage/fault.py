"""Fault injection for the crash tests: `LADDER_FAULT=<point>:<n>` makes the process SIGKILL itself the n-th time
it passes `point` (n defaults to 1); `LADDER_FAULT=<point>:<n>:fill` fills the filesystem of the folder
`LADDER_FAULT_FILL` names there instead (a real full disk: the next write fails with ENOSPC) and goes on. Unset
(always, outside tests) it does nothing but read one variable.

Points: journal.before_append, journal.after_append (ladder.storage.journal), tsv.before_rename (results.atomic_write,
between writing the temporary file and renaming it over the TSV), reuse.copy (store.add_finished, each trial
copied from an earlier sweep), trial.before_finish (store.finish: the trial ran, its outcome is not yet stored).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

VAR = "LADDER_FAULT"
FILL_VAR = "LADDER_FAULT_FILL"  # the folder whose filesystem a `fill` fault fills
BALLAST = ".fault_ballast"  # the file that fills it (the test removes it to make room again)
_passes: dict[str, int] = {}  # how often this process passed each point (only counted while VAR names one)


def point(name: str) -> None:
    """Kill this process with SIGKILL (or fill the disk) if `LADDER_FAULT` names `name` and this is the n-th pass."""
    wanted = os.environ.get(VAR)
    if not wanted:
        return
    where, _, rest = wanted.partition(":")
    if where != name:
        return
    nth, _, how = rest.partition(":")
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] != int(nth or 1):
        return
    if how == "fill":
        fill(Path(os.environ[FILL_VAR]))
    else:
        os.kill(os.getpid(), signal.SIGKILL)


def fill(folder: Path, chunk: int = 1 << 20) -> None:
    """Write zeros to `folder`/BALLAST until its filesystem has no byte left."""
    with open(folder / BALLAST, "ab", buffering=0) as fh:
        for size in (chunk, 4096, 1):
            with contextlib.suppress(OSError):
                while fh.write(b"\0" * size):
                    pass
