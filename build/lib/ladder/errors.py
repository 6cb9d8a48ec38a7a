"""Exception types: each carries what failed and how to fix it."""

from __future__ import annotations


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
