"""Reading a trial from disk: its logs (the tail of each), torchrun's per-rank logs and error files, its exit code,
and what only the running trial knew of its ending (`known`, kept in its verdict.json; `recalled` reads it back)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ladder.core import paths
from ladder.core.errors import LadderError
from ladder.core.paths import TrialPaths
from ladder.core.records import Ending, StopCause

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
        exit_code=exit_code if exit_code is not None else _read_exit_code(TrialPaths(path).exit_code),
        log_text="\n".join(_read_tail(p, end=_end(p, upto)) for p in folder_logs(path, upto)),
        rank_logs={
            rank: "\n".join(_read_tail(p, end=_end(p, upto)) for p in logs)
            for rank, logs in rank_log_paths(path, upto).items()
        },
        error_files=tuple(read_error_files(path, only=upto)),
    )


# What a trial's verdict.json keeps beside its verdict: what only the running trial knew of its ending.
STOPPED_BY, READ_UPTO, OOM_KILLS = "stopped_by", "read_upto", "oom_kills"


def known(folder: Path, ending: Ending, upto: Mapping[Path, int] | None) -> dict[str, object]:
    """What the running trial knew of its ending and its folder does not show, for its verdict.json: why ladder
    stopped it (its own SIGKILL at a finished window is no host OOM), how far its logs counted (`upto`: a finished
    window's, before its processes printed their deaths) and its memory cgroup's OOM kills (the cgroup is gone)."""
    out: dict[str, object] = {}
    if ending.stopped_by:
        out[STOPPED_BY] = str(ending.stopped_by)
    if upto is not None:
        out[READ_UPTO] = {str(p.relative_to(folder)): n for p, n in upto.items() if p.is_relative_to(folder)}
    if ending.oom_kills:
        out[OOM_KILLS] = ending.oom_kills
    return out


def recalled(folder: Path, exit_code: int | None, recorded: Mapping[str, object]) -> Ending:
    """`load_ending` of a trial folder as the trial itself read it, from what its verdict.json kept (`known`); what
    a record does not hold (one written before it kept these) is read as the folder shows it."""
    upto = recorded.get(READ_UPTO)
    counted = {folder / name: n for name, n in upto.items() if isinstance(n, int)} if isinstance(upto, dict) else None
    ending = load_ending(folder, exit_code, counted)
    stopped, kills = recorded.get(STOPPED_BY), recorded.get(OOM_KILLS)
    if isinstance(stopped, str) and stopped in {str(c) for c in StopCause}:
        ending = replace(ending, stopped_by=StopCause(stopped))
    if isinstance(kills, int) and kills > 0:
        ending = replace(ending, oom_kills=kills)
    return ending


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
    found = [p for p in (TrialPaths(folder).stdout,) if p.is_file()] + others
    return found if only is None else [p for p in found if p in only]


def rank_log_paths(folder: Path, only: Collection[Path] | None = None) -> dict[int, list[Path]]:
    """torchrun's per-rank logs under --log-dir with --redirects: <run>/attempt_<n>/<rank>/{stdout,stderr}.log (of
    `only`)."""
    paths: dict[int, list[Path]] = {}
    for path in sorted(folder.glob("**/attempt_*/*/*.log")):
        if path.parent.name.isdigit() and (only is None or path in only):
            paths.setdefault(int(path.parent.name), []).append(path)
    return paths


def read_error_files(folder: Path, warn: bool = True, only: Collection[Path] | None = None) -> Iterable[dict[str, Any]]:
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
