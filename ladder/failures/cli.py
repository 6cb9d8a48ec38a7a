"""`python -m ladder.failures`: the verdict of a log file or a trial folder."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ladder.errors import LadderError
from ladder.failures.files import load_ending
from ladder.failures.rules import classify


def main(argv: list[str] | None = None) -> int:
    """`python -m ladder.failures PATH [--exit-code N]`: print one JSON verdict for a log file or trial folder."""
    parser = argparse.ArgumentParser(prog="python -m ladder.failures", description=main.__doc__)
    parser.add_argument("path", type=Path, help="a log file, or a trial folder")
    parser.add_argument("--exit-code", type=int, default=None, help="the launcher's exit code (beats exit_code.txt)")
    args = parser.parse_args(argv)
    if not args.path.exists():
        print(f"ladder.failures: no such file or folder: {args.path}", file=sys.stderr)
        return 2
    try:
        verdict = classify(load_ending(args.path, args.exit_code))
    except LadderError as err:
        print(f"ladder.failures: {err}", file=sys.stderr)
        return 2
    print(json.dumps({"status": str(verdict.status), "reason": str(verdict.reason), "evidence": verdict.evidence}))
    return 0
