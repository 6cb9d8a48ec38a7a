"""Fault injection for the crash tests: `LADDER_FAULT=<point>:<n>` makes the process SIGKILL itself the n-th time
it passes `point` (n defaults to 1). Unset (always, outside tests) it does nothing but read one variable.

Points: journal.before_append, journal.after_append (ladder.storage.journal), tsv.before_rename (results.atomic_write,
between writing the temporary file and renaming it over the TSV), reuse.copy (store.add_finished, each trial
copied from an earlier sweep), trial.before_finish (store.finish: the trial ran, its outcome is not yet stored).
"""

from __future__ import annotations

import os
import signal

VAR = "LADDER_FAULT"
_passes: dict[str, int] = {}  # how often this process passed each point (only counted while VAR names one)


def point(name: str) -> None:
    """Kill this process with SIGKILL if `LADDER_FAULT` names `name` and this is the n-th pass."""
    wanted = os.environ.get(VAR)
    if not wanted:
        return
    where, _, nth = wanted.partition(":")
    if where != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
