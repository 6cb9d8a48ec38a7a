"""The TSV files a sweep writes (best_by_case.tsv, trials.tsv): read whole or refused as damaged, written atomically
under a file lock.

A write is a temp file in the same folder, with the mode the umask gives, renamed over the target under a
`filelock` lock beside it (the hidden `.<name>.lock`), and the merge reads the file inside the lock, so concurrent
sweeps, and hosts sharing a filesystem whose locks work across hosts (NFSv4, Lustre with flock), never lose each
other's rows. The rows, the columns and the merge rule themselves are pure and live in `ladder.core.rows`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock

from ladder.core.errors import StorageError
from ladder.core.records import TrialRecord
from ladder.core.rows import BEST_TAIL, SEED_HEAD, TRIAL_HEAD, TRIAL_TAIL, columns, merge_rows, to_tsv, trial_row
from ladder.storage import fault

log = logging.getLogger(__name__)

Records = Sequence[TrialRecord] | Callable[[], Sequence[TrialRecord]]


class TsvError(StorageError):
    """A TSV that cannot be read as one: bytes that are not UTF-8, NUL bytes, a row cut short or with extra
    fields, a last line with no newline (a write cut short). Carries the path."""

    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        fix = (
            f"move it aside; `python -m ladder.merge --best-from-storage {path.parent} {path}` rebuilds a "
            "best_by_case.tsv from the sweeps' storage, `--trials-from-storage` a trials.tsv"
        )
        super().__init__(f"{path} is damaged: {what}", fix)


def read_tsv(path: Path) -> list[dict[str, str]]:
    """The rows of a TSV ladder wrote ([] when there is none); `TsvError` when it is damaged."""
    if not path.exists():
        return []
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TsvError(path, f"bytes that are not UTF-8 at offset {exc.start}") from None
    if "\x00" in text:
        raise TsvError(path, f"a NUL byte at line {text.count(chr(10), 0, text.index(chr(0))) + 1}")
    if text and not text.endswith("\n"):
        raise TsvError(path, "its last line has no newline (a write cut short)")
    return _rows(path, text)


def _rows(path: Path, text: str) -> list[dict[str, str]]:
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline=""), delimiter="\t"))
    except csv.Error as exc:
        raise TsvError(path, str(exc)) from None
    for number, row in enumerate(rows, start=2):
        if None in row or None in row.values():
            raise TsvError(path, f"line {number} has {'more' if None in row else 'fewer'} fields than the header")
    return rows


def set_aside(path: Path) -> Path:
    """Rename a damaged file to `<name>.damaged-<UTC stamp>` beside it; returns the new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    moved = path.with_name(f"{path.name}.damaged-{stamp}")
    os.replace(path, moved)
    return moved


def write_best(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """Merge `rows` into the shared best_by_case.tsv without losing anyone else's rows. A damaged file found here
    (changed since the sweep's start) is set aside, not merged: its rows are rebuilt by `ladder.merge`."""
    with FileLock(lock_path(path)):
        try:
            existing = read_tsv(path)
        except TsvError as exc:
            log.warning("%s; set aside in %s", exc.problem, set_aside(path).name)
            existing = []
        merged = merge_rows(existing, rows)
        atomic_write(path, to_tsv(merged, columns(merged, SEED_HEAD, BEST_TAIL, rest=False)))


def write_trials(path: Path, records: Records) -> None:
    """Rewrite trials.tsv. Pass a loader (e.g. `lambda: store.sweep_records(storage, sweep)`) rather than a list
    when several processes share the file: it is called inside the lock, so the last writer has the newest rows."""
    with FileLock(lock_path(path)):
        rows = [trial_row(r) for r in (records() if callable(records) else records)]
        atomic_write(path, to_tsv(rows, columns(rows, TRIAL_HEAD, TRIAL_TAIL)))


def lock_path(path: Path) -> str:
    """The file lock that guards `path`: hidden beside it (`.<name>.lock`), empty, safe to delete when idle."""
    return str(path.with_name(f".{path.name}.lock"))


def remove_stale_temps(path: Path) -> int:
    """Remove the temp files of writes to `path` that never got renamed (a writer killed in between); call it
    holding `path`'s lock, under which no live writer has one. Returns how many."""
    stale = [p for p in path.parent.glob(f".{path.name}.*") if p.name != Path(lock_path(path)).name]
    for temp in stale:
        temp.unlink(missing_ok=True)
    return len(stale)


def atomic_write(path: Path, text: str) -> None:
    """`text` lands at `path` whole or not at all, with the mode a new file gets under the umask (0644 under 022),
    as other users on a shared filesystem expect of a results file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        fault.point("tsv.before_rename")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process umask, from /proc (Linux); elsewhere by setting it and putting it straight back."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text()
        return int(next(ln for ln in status.splitlines() if ln.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
