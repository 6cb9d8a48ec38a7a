"""What a sweep writes and stamps: the TSV files (atomic, under a file lock) and the code version (git).

A write is a temp file in the same folder, with the mode the umask gives, renamed over the target under a
`filelock` lock beside it (the hidden `.<name>.lock`), and the merge reads the file inside the lock, so concurrent
sweeps, and hosts sharing a filesystem whose locks work across hosts (NFSv4, Lustre with flock), never lose each
other's rows. The rows, the columns and the merge rule themselves are pure and live in `ladder.results`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from filelock import FileLock

from ladder import fault
from ladder.results import (
    BEST_TAIL,
    SEED_HEAD,
    TRIAL_HEAD,
    TRIAL_TAIL,
    Records,
    TsvError,
    columns,
    merge_rows,
    read_tsv,
    set_aside,
    to_tsv,
    trial_row,
)

log = logging.getLogger(__name__)


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


def code_version(where: Path, package: str = "ladder") -> str:
    """The workload's code version: the commit of the git checkout holding `where` (12 hex digits, `-dirty` when
    tracked files differ from it), else the installed version of `package`, else "" (an effect: runs git)."""
    try:
        out = subprocess.run(["git", "-C", str(where), "describe", "--always", "--dirty", "--abbrev=12", "--exclude=*"],
                             capture_output=True, text=True, timeout=10, check=True)  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return _package_version(package)


def _package_version(package: str) -> str:
    try:
        return f"{package}=={metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return ""
