"""`python -m ladder.merge OUT IN...`: merge best_by_case.tsv files from several machines into OUT.

The rule is the one every sweep uses when it writes its own row (`ladder.results`, module docstring): one row per
(case, gpu_name, gpu_mem_total, n_gpus); among rows with the same key, ok beats non-ok, confirm beats probe, then
the newer finished_at, then the larger num_envs. OUT's own rows take part (OUT may also be one of the INs); the
write happens under OUT's file lock and lands atomically, as a sweep's does.

`python -m ladder.merge --trials-from-storage STORAGE OUT [--sweep NAME]` rebuilds trials.tsv from the storage
alone: STORAGE is a sweep folder, its journal.log, or an Optuna storage URL (its password is never printed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ladder import results, store
from ladder.errors import LadderError

EXIT_USAGE = 2


def merge_files(out: Path, inputs: Sequence[Path]) -> int:
    """Merge the INs' rows into OUT; returns how many rows OUT holds afterwards."""
    rows = [row for path in inputs for row in _best_rows(path)]
    results.write_best(out, rows)
    return len(results.read_tsv(out))


def rebuild_trials(where: str, out: Path, sweep: str = "") -> int:
    """trials.tsv from the storage alone; returns how many trials it lists."""
    storage = store.open_storage_at(where)
    found = store.sweep_records(storage, sweep)
    results.write_trials(out, found)
    return len(found)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.trials_from_storage:
            return _rebuild(args)
        return _merge(args)
    except LadderError as exc:
        print(f"ladder.merge: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _merge(args: argparse.Namespace) -> int:
    if not args.inputs:
        print("ladder.merge: give OUT and at least one IN (best_by_case.tsv files)", file=sys.stderr)
        return EXIT_USAGE
    total = merge_files(Path(args.out), [Path(p) for p in args.inputs])
    print(f"{args.out}: {total} row(s) after merging {len(args.inputs)} file(s)")
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    if args.inputs:
        print("ladder.merge: --trials-from-storage STORAGE OUT takes no further files", file=sys.stderr)
        return EXIT_USAGE
    count = rebuild_trials(args.trials_from_storage, Path(args.out), args.sweep)
    print(f"{args.out}: {count} trial(s) from {store.redact(args.trials_from_storage)}")
    return 0


def _best_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        raise LadderError(f"no such file: {path}", "give best_by_case.tsv files to merge")
    rows = results.read_tsv(path)
    if rows and "case" not in rows[0]:
        raise LadderError(f"{path} has no `case` column: not a best_by_case.tsv", "give best_by_case.tsv files")
    return rows


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ladder.merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", metavar="OUT", help="the merged best_by_case.tsv (or trials.tsv to rebuild)")
    parser.add_argument("inputs", metavar="IN", nargs="*", help="best_by_case.tsv files to merge into OUT")
    parser.add_argument("--trials-from-storage", metavar="STORAGE", default="",
                        help="rebuild OUT as trials.tsv from a sweep folder, journal.log or storage URL")  # fmt: skip
    parser.add_argument("--sweep", default="", help="with a shared storage: only this sweep's studies")
    return parser


if __name__ == "__main__":
    sys.exit(main())
