"""`python -m ladder.merge OUT IN...`: merge best_by_case.tsv files from several machines into OUT.

The rule is the one every sweep uses when it writes its own row (`ladder.results`, module docstring): one row per
(case, gpu_name, gpu_mem_total, n_gpus); among rows with the same key, ok beats non-ok, confirm beats probe, then
the newer finished_at, then the larger num_envs. OUT's own rows take part (OUT may also be one of the INs); the
write happens under OUT's file lock and lands atomically, as a sweep's does.

`python -m ladder.merge --trials-from-storage STORAGE OUT [--sweep NAME]` rebuilds trials.tsv from the storage
alone: STORAGE is a sweep folder, its journal.log, or an Optuna storage URL (its password is never printed).

`python -m ladder.merge --best-from-storage STORAGE OUT [--sweep NAME] [--objective NAME]` rebuilds
best_by_case.tsv the same way: a damaged OUT is first set aside (`OUT.damaged-<stamp>`), and each row is computed
again, as the sweep computed it, from the storage of the sweep named in its `sweep` column: STORAGE, or the sibling
sweep folder `case_gpu_bench_<sweep>` holding its own journal.log. Rows of sweeps whose storage is not reachable
from here (another host's journal) are kept as far as they can be read, and the rest is named as lost. A sweep
does this itself (`check_best`) before it launches anything, when its best_by_case.tsv cannot be read.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import optuna
from filelock import FileLock
from optuna.storages import BaseStorage

from ladder import results, store
from ladder.errors import LadderError
from ladder.records import TrialRecord

log = logging.getLogger(__name__)

RowOf = Callable[[list[TrialRecord]], "dict[str, str] | None"]  # a case's records -> its best row (sweep.best_of)

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


@dataclass(frozen=True)
class Rebuilt:
    rows: int  # rows OUT holds afterwards
    from_storage: tuple[str, ...]  # sweeps whose rows were computed again from storage
    kept_as_read: tuple[str, ...]  # sweeps with no reachable storage whose readable rows were kept
    lost: tuple[str, ...]  # sweeps with no reachable storage and no readable row
    damaged: Path | None  # where the damaged file was set aside


def check_best(path: Path, storage: BaseStorage, row_of: RowOf) -> Rebuilt | None:
    """A sweep's best_by_case.tsv that cannot be read is set aside and rebuilt from storage (before any trial
    launches, so a damaged file never costs a sweep's work); None when it reads whole (or is absent)."""
    with FileLock(results.lock_path(path)):
        results.remove_stale_temps(path)
        try:
            results.read_tsv(path)
            return None
        except results.TsvError as exc:
            log.warning("%s", exc.problem)
            damaged, moved = path.read_bytes(), results.set_aside(path)
    rebuilt = rebuild_best(path, storage, row_of, damaged, moved)
    log.warning("%s", describe(path, rebuilt))
    return rebuilt


def check_trials(path: Path, load: Callable[[], Sequence[TrialRecord]]) -> None:
    """A sweep's trials.tsv, written again from storage as it starts: a damaged one is set aside first, and a
    write its last run did not finish (killed between writing and renaming) is not missed when nothing is left
    to run."""
    with FileLock(results.lock_path(path)):
        results.remove_stale_temps(path)
        try:
            results.read_tsv(path)
        except results.TsvError as exc:
            log.warning("%s; set aside as %s and written again from storage", exc.problem, results.set_aside(path).name)
    results.write_trials(path, load)


def rebuild_best(
    out: Path, storage: BaseStorage, row_of: RowOf, damaged: bytes = b"", moved: Path | None = None, sweep: str = ""
) -> Rebuilt:
    """best_by_case.tsv at OUT from the sweeps' storages: the sweeps named in `damaged` (the old file's bytes) and
    those `storage` holds (only `sweep`, if given), each from `storage` or its own sweep folder beside OUT's."""
    salvaged = salvage(damaged)
    named = named_sweeps(damaged) | _sweeps_in(storage, sweep)
    rows, found, kept, lost = [], [], [], []
    for name in sorted(named - {""}):
        where = _storage_of(name, storage, out.parent.parent)
        if where is not None:
            rows += [r for r in _rows_of(where, name, row_of) if r]
            found.append(name)
        elif own := [r for r in salvaged if r.get("sweep") == name]:
            rows += own
            kept.append(name)
        else:
            lost.append(name)
    results.write_best(out, rows)
    return Rebuilt(len(results.read_tsv(out)), tuple(found), tuple(kept), tuple(lost), moved)


def salvage(damaged: bytes) -> list[dict[str, str]]:
    """The rows of a damaged TSV that read whole: valid UTF-8, no NUL, every field of the header, a newline."""
    lines = damaged.decode("utf-8", "replace").split("\n")
    if len(lines) < 2:
        return []
    head = lines[0].split("\t")
    whole = [ln for ln in lines[1:-1] if "\ufffd" not in ln and "\x00" not in ln and ln.count("\t") == len(head) - 1]
    return list(csv.DictReader(io.StringIO("\n".join([lines[0], *whole]) + "\n"), delimiter="\t"))


def named_sweeps(damaged: bytes) -> set[str]:
    """Every sweep a damaged TSV's rows name where their `sweep` field can still be read, whole rows or not."""
    lines = damaged.decode("utf-8", "replace").split("\n")
    head = lines[0].split("\t")
    if "sweep" not in head:
        return set()
    at = head.index("sweep")
    fields = (ln.split("\t") for ln in lines[1:])
    return {f[at] for f in fields if len(f) > at + 1 and "\ufffd" not in f[at] and "\x00" not in f[at]} - {""}


def describe(path: Path, rebuilt: Rebuilt) -> str:
    said = [f"{path}: rebuilt with {rebuilt.rows} row(s)"]
    if rebuilt.damaged is not None:
        said.append(f"the damaged file is kept as {rebuilt.damaged.name}")
    if rebuilt.from_storage:
        said.append(f"from the storage of sweep(s) {', '.join(rebuilt.from_storage)}")
    if rebuilt.kept_as_read:
        said.append(f"rows of {', '.join(rebuilt.kept_as_read)} kept as read (their storage is not reachable here)")
    if rebuilt.lost:
        said.append(f"LOST: the rows of {', '.join(rebuilt.lost)} (no readable row, storage not reachable here: "
                    "merge their best_by_case.tsv in again with python -m ladder.merge)")  # fmt: skip
    return "; ".join(said)


def _sweeps_in(storage: BaseStorage, sweep: str) -> set[str]:
    names = {n.split("/", 1)[0] for n in optuna.get_all_study_names(storage) if "/" in n}
    return {sweep} & names if sweep else names


def _storage_of(sweep: str, storage: BaseStorage, output_root: Path) -> BaseStorage | None:
    """Where a sweep's studies are: the given storage, else its own folder's journal; None if neither holds it."""
    if any(n.startswith(f"{sweep}/") for n in optuna.get_all_study_names(storage)):
        return storage
    journal = output_root / f"{store.SWEEP_PREFIX}{sweep}" / store.JOURNAL
    return store.open_storage_at(str(journal)) if journal.is_file() else None


def _rows_of(storage: BaseStorage, sweep: str, row_of: RowOf) -> list[dict[str, str] | None]:
    names = sorted(n for n in optuna.get_all_study_names(storage) if n.startswith(f"{sweep}/"))
    return [row_of(store.records(optuna.load_study(study_name=n, storage=storage))) for n in names]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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


def _rebuild_best(args: argparse.Namespace) -> int:
    if args.inputs:
        print("ladder.merge: --best-from-storage STORAGE OUT takes no further files", file=sys.stderr)
        return EXIT_USAGE
    out, storage = Path(args.out), store.open_storage_at(args.best_from_storage)
    damaged, moved = b"", None
    with FileLock(results.lock_path(out)):
        if out.exists():
            damaged, moved = out.read_bytes(), results.set_aside(out)
    rebuilt = rebuild_best(out, storage, _row_of(args.objective), damaged, moved, args.sweep)
    print(describe(out, rebuilt))
    return 0


def _row_of(objective: str) -> RowOf:
    """A sweep's own rule for its row, under the default settings (`objective` as given; a confirmation counts
    where the records hold one). Imported here: ladder.sweep imports this module."""
    import dataclasses

    from hydra import compose, initialize_config_dir

    from ladder import sweep
    from ladder.catalog import CONF_DIR
    from ladder.config import register, settings_from
    from ladder.records import Phase

    register()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        settings = settings_from(compose("config", overrides=[f"objective={objective}"]))

    def row_of(every: list[TrialRecord]) -> dict[str, str] | None:
        confirm_s = 1.0 if any(r.phase is Phase.CONFIRM for r in every) else 0.0
        return sweep.best_of(every, dataclasses.replace(settings, confirm_s=confirm_s))[1]

    return row_of


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
    parser.add_argument("--best-from-storage", metavar="STORAGE", default="",
                        help="rebuild OUT as best_by_case.tsv from a sweep folder, journal.log or storage URL "
                        "(and the sweep folders beside OUT); a damaged OUT is set aside first")  # fmt: skip
    parser.add_argument("--objective", default="min_avg_util", help="with --best-from-storage: the sweeps' objective")
    parser.add_argument("--sweep", default="", help="with a shared storage: only this sweep's studies")
    return parser


if __name__ == "__main__":
    sys.exit(main())
