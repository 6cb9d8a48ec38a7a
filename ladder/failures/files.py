"""Reading a trial from disk: its logs (the tail of each), torchrun's per-rank logs and error files, its exit code."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from ladder.core import paths
from ladder.core.errors import LadderError
from ladder.core.records import Ending

logger = logging.getLogger(__name__)

TAIL_BYTES = 2 << 20  # how much of each log file the CLI reads (its tail): ~0.25 s of scanning


def load_ending(path: Path, exit_code: int | None = None, upto: Mapping[Path, int] | None = None) -> Ending:
    """An `Ending` from a log file, or from a trial folder (stdout.log, *.log, **/error.json, exit_code.txt).
    `upto` (`sizes`, taken before ladder stopped a healthy trial): each file read only as far as it was then, and no
    file written since, so that what its processes printed as they were killed is no evidence."""
    if path.is_file():
        return Ending(exit_code=exit_code, log_text=_read_tail(path, end=_end(path, upto)))
    if upto is not None:
        upto = {p: n for p, n in upto.items() if n > 0}
    return Ending(
        exit_code=exit_code if exit_code is not None else _read_exit_code(path / paths.EXIT_CODE),
        log_text="\n".join(_read_tail(p, end=_end(p, upto)) for p in folder_logs(path, upto)),
        rank_logs={
            rank: "\n".join(_read_tail(p, end=_end(p, upto)) for p in logs)
            for rank, logs in rank_log_paths(path, upto).items()
        },
        error_files=tuple(read_error_files(path, only=upto)),
    )


def sizes(folder: Path) -> dict[Path, int]:
    """The size of every file `load_ending` reads in a trial folder, now (its `upto`)."""
    found = [*folder_logs(folder), *(p for logs in rank_log_paths(folder).values() for p in logs)]
    found += sorted(folder.glob("**/error.json"))
    out = {}
    for path in found:
        with contextlib.suppress(OSError):
            out[path] = path.stat().st_size
    return out


def _end(path: Path, upto: Mapping[Path, int] | None) -> int | None:
    return None if upto is None else upto.get(path, 0)


def folder_logs(folder: Path, only: Collection[Path] | None = None) -> list[Path]:
    """A trial folder's own logs: stdout.log (the launcher's, or the program's), then any other *.log (of `only`)."""
    others = sorted(p for p in folder.glob("*.log") if p.name != paths.STDOUT and p.is_file())
    found = [p for p in (folder / paths.STDOUT,) if p.is_file()] + others
    return found if only is None else [p for p in found if p in only]


def rank_log_paths(folder: Path, only: Collection[Path] | None = None) -> dict[int, list[Path]]:
    """torchrun's per-rank logs under --log-dir with --redirects: <run>/attempt_<n>/<rank>/{stdout,stderr}.log (of
    `only`)."""
    paths: dict[int, list[Path]] = {}
    for path in sorted(folder.glob("**/attempt_*/*/*.log")):
        if path.parent.name.isdigit() and (only is None or path in only):
            paths.setdefault(int(path.parent.name), []).append(path)
    return paths


def read_error_files(folder: Path, warn: bool = True, only: Collection[Path] | None = None) -> Iterable[dict]:
    """The parsed error.json files under `folder` (of `only`; a file still being written is skipped, `warn` says so)."""
    for path in sorted(folder.glob("**/error.json")):
        if only is not None and path not in only:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, json.JSONDecodeError) as err:
            if warn:
                logger.warning("skipping unreadable error file %s: %s", path, err)
            continue
        if isinstance(data, dict):
            yield data


def _read_exit_code(path: Path) -> int | None:
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8").strip()
    try:
        return int(text)
    except ValueError:
        problem = f"{path} holds {text!r}, not an exit code"
        raise LadderError(problem, "write the trial's exit code there as an integer") from None


def _read_tail(path: Path, limit: int = TAIL_BYTES, end: int | None = None) -> str:
    """The last `limit` bytes of a log (of its first `end` bytes), from the first whole line."""
    with path.open("rb") as f:
        size = f.seek(0, 2) if end is None else min(end, f.seek(0, 2))
        f.seek(max(0, size - limit))
        data = f.read(size - f.tell())
    text = data.decode("utf-8", errors="replace")
    return text.split("\n", 1)[-1] if size > limit else text
