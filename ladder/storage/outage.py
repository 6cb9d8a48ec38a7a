"""A storage server that goes away for a while (restarted, a network blip) is waited for, not a crash.

`Waiting` wraps an Optuna RDB storage: a call that fails because the server cannot be reached (SQLAlchemy's
`OperationalError` or a connection it had to invalidate, as Optuna raises them or wraps them in
`StorageInternalError`) is tried again, with a pause that grows to `MAX_PAUSE_S`, for up to `retry_s` from the first
failure. The console hears of it once when the outage begins and once when the server is back. Past `retry_s` the
call raises `StorageUnavailable`: the sweep stops with exit code 6, and the same command resumes it. Any other error
goes up at once. A call that failed reached no commit (PostgreSQL commits a transaction whole or not at all), so
trying it again records nothing twice.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from optuna.exceptions import StorageInternalError
from optuna.storages import BaseStorage

from ladder.core.errors import StorageError

log = logging.getLogger(__name__)

RETRY_S = 300.0  # how long a sweep waits for its storage server to come back before it stops (exit code 6)
FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 10.0


class StorageUnavailable(StorageError):
    """The storage server stayed unreachable for longer than the sweep waits for it."""


def unreachable(exc: BaseException) -> bool:
    """Whether `exc` says the server could not be reached (rather than a query or data that is wrong)."""
    sa = sys.modules.get("sqlalchemy.exc")  # a database storage imports it; with none open, no error is the server's
    if sa is None:
        return False
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, sa.OperationalError | sa.InterfaceError):
            return True
        if isinstance(seen, sa.DBAPIError) and seen.connection_invalidated:
            return True
        seen = seen.__cause__ if isinstance(seen, StorageInternalError | sa.SQLAlchemyError) else None
    return False


class Waiting(BaseStorage):
    """An Optuna storage whose every call waits out an outage of its server (see the module's docstring)."""

    def __init__(self, inner: BaseStorage, where: str, retry_s: float = RETRY_S) -> None:
        self._inner, self._where, self._retry_s = inner, where, retry_s
        self._lock = threading.Lock()
        self._down_since: float | None = None  # shared by every thread that meets the outage: one line for it

    def __getattr__(self, name: str) -> Any:  # the inner storage's other attributes (heartbeat settings, ...)
        return getattr(self._inner, name)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        pause = FIRST_PAUSE_S
        while True:
            try:
                result = getattr(self._inner, name)(*args, **kwargs)
            except Exception as exc:
                if not unreachable(exc):
                    raise
                self._wait(exc, pause)
                pause = min(MAX_PAUSE_S, pause * 2)
                continue
            self._back()
            return result

    def _wait(self, exc: BaseException, pause: float) -> None:
        now = time.monotonic()
        with self._lock:
            if self._down_since is None:
                self._down_since = now
                log.warning(
                    "storage %s unreachable (%s): retrying for up to %.0f s; nothing is lost meanwhile",
                    self._where,
                    _first_line(exc),
                    self._retry_s,
                )
            down_for = now - self._down_since
        if down_for > self._retry_s:
            raise StorageUnavailable(
                f"storage {self._where} unreachable for {down_for:.0f} s ({_first_line(exc)})",
                "bring the server back, then run the same command: the sweep resumes where it stopped",
            ) from None
        time.sleep(pause)

    def _back(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is not None:
                log.warning("storage %s back after %.0f s", self._where, time.monotonic() - self._down_since)
                self._down_since = None


def _first_line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc
    text = str(getattr(cause, "orig", None) or cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}"


def _delegate(name: str) -> Callable[..., Any]:
    def call(self: Waiting, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    call.__name__ = name
    return call


for _name in sorted(BaseStorage.__abstractmethods__ | {n for n in vars(BaseStorage) if not n.startswith("_")}):
    if callable(getattr(BaseStorage, _name, None)):
        setattr(Waiting, _name, _delegate(_name))
Waiting.__abstractmethods__ = frozenset()
