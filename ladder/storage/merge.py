"""Merging best_by_case.tsv files, and rebuilding both TSVs from storage (`python -m ladder.merge` is the command).

The rule is the one every sweep uses when it writes its own row (`ladder.core.rows`, module docstring): one row per
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

import csv
import io
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock
from optuna.storages import BaseStorage

from ladder.core.errors import LadderError
from ladder.core.paths import SweepPaths
from ladder.core.records import TrialRecord
from ladder.storage import studies, tsv

log = logging.getLogger(__name__)

RowOf = Callable[
    [list[TrialRecord]], "dict[str, str] | None"
]  # a case's records -> its best row (outcome.case_outcome)


def best_rows(path: Path) -> list[dict[str, str]]:
    if path.is_dir():
        raise LadderError(f"{path} is a folder", f"give the best_by_case.tsv in it: {path / 'best_by_case.tsv'}")
    if not path.is_file():
        raise LadderError(f"no such file: {path}", "give best_by_case.tsv files to merge")
    rows = tsv.read_tsv(path)
    if rows and "case" not in rows[0]:
        raise LadderError(f"{path} has no `case` column: not a best_by_case.tsv", "give best_by_case.tsv files")
    if rows and "number" in rows[0] and "class" not in rows[0]:  # trials.tsv's own columns, not the best row's
        raise LadderError(
            f"{path} is a trials.tsv (a row per trial, no class or action), not a best_by_case.tsv",
            f"give the best_by_case.tsv beside it: {path.with_name('best_by_case.tsv')}",
        )
    return rows


def merge_files(out: Path, inputs: Sequence[Path]) -> int:
    """Merge the INs' rows into OUT; returns how many rows OUT holds afterwards."""
    rows = [row for path in inputs for row in best_rows(path)]
    tsv.write_best(out, rows)
    return len(tsv.read_tsv(out))


def rebuild_trials(where: str, out: Path, sweep: str = "") -> int:
    """trials.tsv from the storage alone; returns how many trials it lists."""
    storage = studies.open_storage_at(where)
    found = studies.sweep_records(storage, sweep)
    tsv.write_trials(out, found)
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
    with FileLock(tsv.lock_path(path)):
        tsv.remove_stale_temps(path)
        try:
            tsv.read_tsv(path)
            return None
        except tsv.TsvError as exc:
            log.warning("%s", exc.problem)
            damaged, moved = path.read_bytes(), tsv.set_aside(path)
    rebuilt = rebuild_best(path, storage, row_of, damaged, moved)
    log.warning("%s", describe(path, rebuilt))
    return rebuilt


def check_trials(path: Path, load: Callable[[], Sequence[TrialRecord]]) -> None:
    """A sweep's trials.tsv, written again from storage as it starts: a damaged one is set aside first, and a
    write its last run did not finish (killed between writing and renaming) is not missed when nothing is left
    to run."""
    with FileLock(tsv.lock_path(path)):
        tsv.remove_stale_temps(path)
        try:
            tsv.read_tsv(path)
        except tsv.TsvError as exc:
            log.warning("%s; set aside as %s and written again from storage", exc.problem, tsv.set_aside(path).name)
    tsv.write_trials(path, load)


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
    tsv.write_best(out, rows)
    return Rebuilt(len(tsv.read_tsv(out)), tuple(found), tuple(kept), tuple(lost), moved)


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
        said.append(
            f"LOST: the rows of {', '.join(rebuilt.lost)} (no readable row, storage not reachable here: "
            "merge their best_by_case.tsv in again with python -m ladder.merge)"
        )
    return "; ".join(said)


def _sweeps_in(storage: BaseStorage, sweep: str) -> set[str]:
    names = {n.split("/", 1)[0] for n in studies.study_names(storage) if "/" in n}
    return {sweep} & names if sweep else names


def _storage_of(sweep: str, storage: BaseStorage, output_root: Path) -> BaseStorage | None:
    """Where a sweep's studies are: the given storage, else its own folder's journal; None if neither holds it."""
    if any(n.startswith(f"{sweep}/") for n in studies.study_names(storage)):
        return storage
    journal = SweepPaths.of(output_root, sweep).journal
    return studies.open_storage_at(str(journal)) if journal.is_file() else None


def _rows_of(storage: BaseStorage, sweep: str, row_of: RowOf) -> list[dict[str, str] | None]:
    names = sorted(n for n in studies.study_names(storage) if n.startswith(f"{sweep}/"))
    return [row_of(studies.records(study)) for n in names if (study := studies.load_study(storage, n)) is not None]
