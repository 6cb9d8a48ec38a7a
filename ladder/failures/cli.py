"""`python -m ladder.failures`: the verdict of a log file or a trial folder, or the accuracy on a labelled corpus."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ladder.core import paths
from ladder.core.errors import LadderError
from ladder.failures import scoring
from ladder.failures.files import READ_UPTO, load_ending, recalled
from ladder.failures.rules import as_json, classify

USAGE = """\
  python -m ladder.failures PATH [--exit-code N] [--reclassify]   the verdict of a log file or a trial folder (JSON)
  python -m ladder.failures --eval FILE.jsonl                     the accuracy table on a labelled corpus"""
RECORDED = paths.VERDICT  # what a trial recorded when it ended (ladder.runner.trial writes it)


def main(argv: list[str] | None = None) -> int:
    """Print one JSON verdict for a log file or trial folder, or the accuracy table of a labelled corpus."""
    parser = argparse.ArgumentParser(prog="python -m ladder.failures", description=main.__doc__, usage=USAGE)
    parser.add_argument("path", type=Path, nargs="?", help="a log file, or a trial folder")
    parser.add_argument("--exit-code", type=int, default=None, help="the launcher's exit code (beats exit_code.txt)")
    parser.add_argument("--eval", type=Path, default=None, metavar="FILE.jsonl", help="a labelled corpus to score")
    parser.add_argument(
        "--reclassify", action="store_true", help=f"classify a trial folder's files even where it has its {RECORDED}"
    )
    args = parser.parse_args(argv)
    if (args.path is None) == (args.eval is None):
        parser.error("give either PATH or --eval FILE.jsonl")
    try:
        if args.eval is not None:
            print(scoring.table(scoring.score(_read_corpus(args.eval))))
            return 0
        if not args.path.exists():
            raise LadderError(f"no such file or folder: {args.path}", "give a log file or a trial folder")
        if args.path.is_dir() and (below := trials_below(args.path)):
            shown = "\n  ".join(str(t) for t in below[:SHOWN])
            more = f"\n  ... and {len(below) - SHOWN} more" if len(below) > SHOWN else ""
            raise LadderError(
                f"{args.path} is not a trial folder: it holds {len(below)} trial folder(s)",
                f"give one of them:\n  {shown}{more}",
            )
        if args.path.is_file():
            _check_log(args.path, args.exit_code)
        recorded = args.path / RECORDED
        if args.path.is_dir() and recorded.is_file() and not (args.reclassify or args.exit_code is not None):
            record = {k: v for k, v in _read_recorded(recorded).items() if k != READ_UPTO}  # sizes: for a reading
            print(json.dumps(record | {"source": RECORDED}))
            return 0
        on_disk = args.path.is_dir()  # a trial folder: read as the trial read it, from what its verdict.json kept
        verdict = classify(
            recalled(args.path, args.exit_code, _kept(recorded)) if on_disk else load_ending(args.path, args.exit_code)
        )
    except LadderError as err:
        print(f"ladder.failures: {err}", file=sys.stderr)
        return 2
    print(json.dumps(as_json(verdict) | {"source": "classified"}))
    return 0


SHOWN = 10  # trial folders listed where a folder above them was given
TRIAL_FILES = (paths.STDOUT, paths.VERDICT, paths.EXIT_CODE)  # what a trial folder holds that a sweep folder does not


def trials_below(folder: Path) -> list[Path]:
    """The trial folders under `folder` (a sweep folder, its `trials/`, an output root) where `folder` is none
    itself; [] for a trial folder, or a folder of logs that holds no trial."""
    if any((folder / name).is_file() for name in TRIAL_FILES):
        return []
    found = {p.parent for name in (paths.VERDICT, paths.STDOUT) for p in folder.glob(f"**/{name}")}
    return sorted(p for p in found if p != folder and not any(q in p.parents for q in found))


SNIFF_BYTES = 64 * 1024  # how much of a file is read to tell a text log from binary data


def _check_log(path: Path, exit_code: int | None) -> None:
    """A file given as a log holds text: a binary file, or an empty one with no exit code beside it, has nothing a
    verdict could rest on, and judged anyway it would read as a plain error said with confidence. (An empty log with
    its exit code is judged on the code: a process killed at once prints nothing.)"""
    try:
        with path.open("rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError as err:
        raise LadderError(f"{path} is unreadable: {err}", "give a log file you can read, or a trial folder") from None
    fix = "give the trainer's log (what it printed to stdout/stderr) or a trial folder"
    if b"\0" in head:
        raise LadderError(f"{path} is not a text log: it holds binary data", fix)
    if not head.strip() and exit_code is None:
        raise LadderError(f"{path} is empty: it holds no log line to judge", f"{fix}, or its exit code (--exit-code N)")


def _read_recorded(path: Path) -> dict[str, Any]:
    """A trial's own verdict, as it recorded it: ladder's stop (a finished window, its kill) is known only there."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LadderError(f"{path} is unreadable: {err}", "classify the folder's logs with --reclassify") from None
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        raise LadderError(f"{path} holds no verdict (no 'status')", "classify the folder's logs with --reclassify")
    return data


def _kept(path: Path) -> dict[str, Any]:
    """What a trial's verdict.json kept of its ending beside the verdict (`files.known`), for a new reading of its
    files; {} where it holds none or cannot be read (the files are classified as they stand: `--reclassify` is for a
    damaged record too)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_corpus(path: Path) -> list[dict[str, Any]]:
    """The rows of a labelled corpus; a clear error naming the file and line for anything malformed."""
    if not path.is_file():
        raise LadderError(f"no such corpus file: {path}", "give a JSON-lines file as tests/data/failure_logs holds")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not JSON ({err})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: a row must be a JSON object")
            scoring.check_row(row, where)
        except ValueError as err:
            fix = "fix that line (see tests/data/failure_logs/README.md for the format)"
            raise LadderError(str(err), fix) from None
        rows.append(row)
    if not rows:
        raise LadderError(f"{path} holds no rows", "give a JSON-lines file with one labelled excerpt per line")
    return rows
