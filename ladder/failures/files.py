"""Reading a trial from disk: its logs (the tail of each), torchrun's per-rank logs and error files, its exit code."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

from ladder.core import paths
from ladder.core.errors import LadderError
from ladder.core.records import Ending

logger = logging.getLogger(__name__)

TAIL_BYTES = 2 << 20  # how much of each log file the CLI reads (its tail): ~0.25 s of scanning


def load_ending(path: Path, exit_code: int | None = None) -> Ending:
    """An `Ending` from a log file, or from a trial folder (stdout.log, *.log, **/error.json, exit_code.txt)."""
    if path.is_file():
        return Ending(exit_code=exit_code, log_text=_read_tail(path))
    return Ending(
        exit_code=exit_code if exit_code is not None else _read_exit_code(path / paths.EXIT_CODE),
        log_text="\n".join(_read_tail(p) for p in folder_logs(path)),
        rank_logs={rank: "\n".join(_read_tail(p) for p in paths) for rank, paths in rank_log_paths(path).items()},
        error_files=tuple(read_error_files(path)),
    )


def folder_logs(folder: Path) -> list[Path]:
    """A trial folder's own logs: stdout.log (the launcher's, or the program's), then any other *.log."""
    others = sorted(p for p in folder.glob("*.log") if p.name != paths.STDOUT and p.is_file())
    return [p for p in (folder / paths.STDOUT,) if p.is_file()] + others


def rank_log_paths(folder: Path) -> dict[int, list[Path]]:
    """torchrun's per-rank logs under --log-dir with --redirects: <run>/attempt_<n>/<rank>/{stdout,stderr}.log."""
    paths: dict[int, list[Path]] = {}
    for path in sorted(folder.glob("**/attempt_*/*/*.log")):
        if path.parent.name.isdigit():
            paths.setdefault(int(path.parent.name), []).append(path)
    return paths


def read_error_files(folder: Path, warn: bool = True) -> Iterable[dict]:
    """The parsed error.json files under `folder` (a file still being written is skipped; `warn` says so)."""
    for path in sorted(folder.glob("**/error.json")):
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


def _read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a log, from the first whole line."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - limit))
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    return text.split("\n", 1)[-1] if size > limit else text
