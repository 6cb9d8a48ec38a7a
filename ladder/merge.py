"""`python -m ladder.merge OUT IN...`: merge best_by_case.tsv files from several machines into OUT.

The rule is the one every sweep uses when it writes its own row (`ladder.core.rows`, module docstring): one row per
(case, gpu_name, gpu_mem_total, n_gpus); among rows with the same key, ok beats non-ok, confirm beats probe, then
the newer finished_at, then the larger num_envs. OUT's own rows take part (OUT may also be one of the INs); the
write happens under OUT's file lock and lands atomically, as a sweep's does.

`python -m ladder.merge --trials-from-storage STORAGE OUT [--sweep NAME]` rebuilds trials.tsv from the storage
alone: STORAGE is a sweep folder, its journal.log, or an Optuna storage URL (its password is never printed).

`python -m ladder.merge --best-from-storage STORAGE OUT [--sweep NAME] [--objective NAME]` rebuilds
best_by_case.tsv the same way: a damaged OUT is first set aside (`OUT.damaged-<stamp>`), and each row is computed
again, as the sweep computed it (`ladder.core.outcome`), from the storage of the sweep named in its `sweep` column:
STORAGE, or the sibling sweep folder `case_gpu_bench_<sweep>` holding its own journal.log. Rows of sweeps whose
storage is not reachable from here (another host's journal) are kept as far as they can be read, and the rest is
named as lost.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from ladder.core.errors import LadderError
from ladder.core.outcome import case_outcome
from ladder.core.records import Objective, Phase, TrialRecord
from ladder.settings.credentials import redact
from ladder.storage import merge, studies, tsv

EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.out is None:
        parser.error("give OUT: the file to write (see the usage above)")
    try:
        if args.trials_from_storage:
            return _rebuild(args)
        if args.best_from_storage:
            return _rebuild_best(args)
        return _merge(args)
    except LadderError as exc:
        print(f"ladder.merge: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _merge(args: argparse.Namespace) -> int:
    if not args.inputs:
        print("ladder.merge: give OUT and at least one IN (best_by_case.tsv files)", file=sys.stderr)
        return EXIT_USAGE
    held = len(merge.best_rows(Path(args.out))) if Path(args.out).is_file() else 0  # OUT's own rows merge too
    total = merge.merge_files(Path(args.out), [Path(p) for p in args.inputs])
    into = f" into its {held} row(s)" if held else ""
    print(f"{args.out}: {total} row(s) after merging {len(args.inputs)} file(s){into}")
    return 0


def _rebuild(args: argparse.Namespace) -> int:
    if args.inputs:
        print("ladder.merge: --trials-from-storage STORAGE OUT takes no further files", file=sys.stderr)
        return EXIT_USAGE
    count = merge.rebuild_trials(args.trials_from_storage, Path(args.out), args.sweep)
    print(f"{args.out}: {count} trial(s) from {redact(args.trials_from_storage)}")
    return 0


def _rebuild_best(args: argparse.Namespace) -> int:
    if args.inputs:
        print("ladder.merge: --best-from-storage STORAGE OUT takes no further files", file=sys.stderr)
        return EXIT_USAGE
    out, storage = Path(args.out), studies.open_storage_at(args.best_from_storage)
    damaged, moved = b"", None
    with FileLock(tsv.lock_path(out)):
        if out.exists():
            damaged, moved = out.read_bytes(), tsv.set_aside(out)
    rebuilt = merge.rebuild_best(out, storage, row_of(args.objective), damaged, moved, args.sweep)
    print(merge.describe(out, rebuilt))
    return 0


def row_of(objective: str) -> merge.RowOf:
    """A sweep's own rule for its row (`objective` as given, the decision table's default thresholds; a
    confirmation counts where the records hold one)."""

    def row(every: list[TrialRecord]) -> dict[str, str] | None:
        return case_outcome(every, objective, confirm=any(r.phase is Phase.CONFIRM for r in every)).row

    return row


def _parser() -> argparse.ArgumentParser:
    usage = (
        "\n  python -m ladder.merge OUT IN [IN ...]                    best_by_case.tsv files merged into OUT"
        "\n  python -m ladder.merge OUT --trials-from-storage STORAGE  trials.tsv rebuilt from a sweep's storage"
        "\n  python -m ladder.merge OUT --best-from-storage STORAGE    best_by_case.tsv rebuilt from it"
    )
    parser = argparse.ArgumentParser(prog="python -m ladder.merge", description=__doc__.split("\n\n")[0], usage=usage)
    parser.add_argument("out", metavar="OUT", nargs="?", help="the merged best_by_case.tsv (or trials.tsv to rebuild)")
    parser.add_argument("inputs", metavar="IN", nargs="*", help="best_by_case.tsv files to merge into OUT")
    parser.add_argument(
        "--trials-from-storage",
        metavar="STORAGE",
        default="",
        help="rebuild OUT as trials.tsv from a sweep folder, journal.log or storage URL",
    )
    parser.add_argument(
        "--best-from-storage",
        metavar="STORAGE",
        default="",
        help="rebuild OUT as best_by_case.tsv from a sweep folder, journal.log or storage URL "
        "(and the sweep folders beside OUT); a damaged OUT is set aside first",
    )
    parser.add_argument(
        "--objective",
        default=Objective.MIN_AVG_UTIL.value,
        choices=[o.value for o in Objective],
        help="with --best-from-storage: the sweeps' objective",
    )
    parser.add_argument("--sweep", default="", help="with a shared storage: only this sweep's studies")
    return parser


if __name__ == "__main__":
    sys.exit(main())
