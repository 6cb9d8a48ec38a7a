"""`python -m ladder.repair <sweep folder>`: a journal with unreadable lines made whole again.

Every readable record is kept and the rest set aside in a side file (`ladder.storage.repair` says how); the journal
before the repair is kept beside it, and the same sweep command resumes afterwards.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ladder.core.errors import LadderError
from ladder.storage.repair import repair

EXIT_BAD = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ladder.repair", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", metavar="SWEEP_FOLDER", help="a sweep folder (or its journal.log)")
    args = parser.parse_args(argv)
    try:
        kept, aside, where, open_trials = repair(Path(args.folder))
    except LadderError as exc:
        print(f"ladder.repair: {exc}", file=sys.stderr)
        return EXIT_BAD
    if where is None:
        print(f"{args.folder}: the journal reads whole ({kept} records); nothing to repair")
    else:
        print(
            f"{args.folder}: {kept} record(s) kept, {aside} line(s) set aside in {where} (the journal before the "
            "repair is kept beside it); resume the sweep as before"
        )
        if open_trials:
            print(
                f"{len(open_trials)} trial(s) lost their outcome with the lines set aside ({', '.join(open_trials)}): "
                "the resumed sweep no longer counts them and runs their rungs again"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
