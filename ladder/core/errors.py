"""Exception types: each carries what failed and how to fix it."""

from __future__ import annotations

import errno
from enum import IntEnum

FULL = (errno.ENOSPC, errno.EDQUOT)  # no space left on the device; the user's disk quota used up


class LadderError(Exception):
    """Base of every error ladder raises on purpose; the message names the problem and the fix."""

    def __init__(self, problem: str, fix: str = "") -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}" + (f"\n  fix: {fix}" if fix else ""))


class ConfigError(LadderError):
    """The composed configuration is invalid."""


class LaunchError(LadderError):
    """A trial could not be started (missing program, no cgroup where one is required, ...)."""


class StorageError(LadderError):
    """The sweep's storage or records cannot be read or written."""


class ExitCode(IntEnum):
    """What `python -m ladder.search` exits with; documented in the README ("Exit codes")."""

    PICK_FOUND = 0  # every case has a rung that fits and was measured
    CRASH = 1  # an unexpected failure inside ladder (a traceback): a bug to report
    BAD_SETTINGS = 2  # the settings are invalid (unknown case, bad override, unwritable output_root, ...)
    NO_RUNG_FITS = 3  # the sweep finished, but for some case no rung fitted
    BROKEN_CONFIG = 4  # a trial failed with `error` (a broken trainer configuration): fix it, stepping down won't
    NO_SPACE = 5  # the disk (or quota) of the sweep folder was full: free space there, then run the same command
    STORAGE = 6  # the storage server stayed unreachable past the wait for it: bring it back, run the same command
    INTERRUPTED = 130  # Ctrl-C or a closed terminal; the printed command resumes the sweep
    TERMINATED = 143  # SIGTERM (a scheduler's preemption, a kill): requeue the job, or run the same command; it resumes


def disk_full(exc: BaseException | None) -> OSError | None:
    """The no-space error behind `exc` (itself, or one it was raised from or while handling), or None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError) and exc.errno in FULL:
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
