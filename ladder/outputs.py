"""What a sweep writes and stamps: the TSV files (atomic, under a file lock) and the code version (git).

A write is a temp file in the same folder renamed over the target, under a `filelock` lock beside it
(`<name>.lock`), and the merge reads the file inside the lock, so concurrent sweeps, and hosts sharing a filesystem
whose locks work across hosts (NFSv4, Lustre with flock), never lose each other's rows. The rows, the columns and the
merge rule themselves are pure and live in `ladder.results`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from filelock import FileLock

from ladder.results import (
    BEST_TAIL,
    SEED_HEAD,
    TRIAL_HEAD,
    TRIAL_TAIL,
    Records,
    columns,
    merge_rows,
    read_tsv,
    to_tsv,
    trial_row,
)


def write_best(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """Merge `rows` into the shared best_by_case.tsv without losing anyone else's rows."""
    with FileLock(str(path) + ".lock"):
        merged = merge_rows(read_tsv(path), rows)
        atomic_write(path, to_tsv(merged, columns(merged, SEED_HEAD, BEST_TAIL, rest=False)))


def write_trials(path: Path, records: Records) -> None:
    """Rewrite trials.tsv. Pass a loader (e.g. `lambda: store.sweep_records(storage, sweep)`) rather than a list
    when several processes share the file: it is called inside the lock, so the last writer has the newest rows."""
    with FileLock(str(path) + ".lock"):
        rows = [trial_row(r) for r in (records() if callable(records) else records)]
        atomic_write(path, to_tsv(rows, columns(rows, TRIAL_HEAD, TRIAL_TAIL)))


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
