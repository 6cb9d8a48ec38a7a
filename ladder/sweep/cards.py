"""`cards.tsv` in a sweep folder: for each case and profile of the sweep, every card's answer from the memory model
of its trials and of every earlier trial of the same case, profile, trainer code and machine
(`ladder.storage.history`), and the lines the sweep's end prints for it.

Which cards: the `cards` setting (GB), `DEFAULT_CARDS_GB` where none is given. The ladder and the headroom are the
sweep's recorded ones (`ladder.rungs`, `mem_headroom_frac`), so an older sweep folder gets its table too
(`python -m ladder.report`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ladder.core.memory import cards
from ladder.core.memory.model import Model
from ladder.core.paths import sweep_of
from ladder.core.records import TrialRecord
from ladder.core.rows import to_tsv
from ladder.settings.schema import CARDS_GB
from ladder.storage import history, studies, tsv

CARDS_TSV = "cards.tsv"
DEFAULT_CARDS_GB = CARDS_GB  # the `cards` setting's default
HEADROOM = 0.05  # the walk's default mem_headroom_frac, for a sweep that recorded none


@dataclass(frozen=True)
class Table:
    """One sweep's answers: per group its model, ladder, headroom and cards' answers; cards.tsv's rows and the
    console lines."""

    models: dict[history.Group, Model]
    answers: dict[history.Group, list[cards.Answer]]
    ladders: dict[history.Group, tuple[list[int], float]]
    rows: list[dict[str, str]]
    lines: list[str]


def table(
    sweep: str,
    records: Sequence[TrialRecord],
    settings: Mapping[str, Mapping[str, Any]],
    cards_gb: Sequence[float],
    notes: history.NotesOf | None = None,
) -> Table:
    """The answers for the groups that hold a trial of `sweep`, from every record (`settings`: case -> the sweep's
    recorded settings, for its ladder and headroom). Pure but for `notes` (what trial folders add)."""
    mine = {g for r in records if r.info.get("sweep") == sweep for g in history.groups(r)}
    found = {g: m for g, m in history.models(records, notes).items() if g in mine}
    answers, ladders, rows, lines = {}, {}, [], []
    for group in sorted(found, key=lambda g: (g.case, g.profile, g.cap)):
        rungs, headroom, knob = _ladder(group, records, settings.get(group.case, {}))
        answered = answers[group] = cards.answers(found[group], rungs, cards_gb, headroom)
        ladders[group] = (rungs, headroom)
        rows += [r | {"cap": group.cap} for r in cards.rows(group.case, group.profile, answered, knob)]
        lines += cards.console_lines(group.case, group.profile, answered)
    return Table(found, answers, ladders, rows, lines)


def _ladder(
    group: history.Group, records: Sequence[TrialRecord], recorded: Mapping[str, Any]
) -> tuple[list[int], float, str]:
    """The case's ladder, headroom and knob as the sweep recorded them; else the rungs its trials ran."""
    rungs = [int(r) for r in recorded.get("ladder.rungs") or ()]
    if not rungs:
        rungs = sorted({r.num_envs for r in records if r.case == group.case and r.profile == group.profile})
    headroom = float(recorded.get("mem_headroom_frac", HEADROOM))
    return rungs, headroom, str(recorded.get("ladder.knob") or "num_envs")


def recorded_cards(recorded: Mapping[str, Mapping[str, Any]]) -> tuple[float, ...]:
    """The cards a sweep's cases recorded (`cards`), in order, each once; the default list where none did."""
    named = [float(gb) for settings in recorded.values() for gb in settings.get("cards") or ()]
    return tuple(dict.fromkeys(named)) or DEFAULT_CARDS_GB


def lines_of(found: Table, case: str) -> list[str]:
    """The console's lines for one case of the table (a sweep of several cases holds them all)."""
    return [
        line
        for group in sorted(found.answers, key=lambda g: (g.profile, g.cap))
        if group.case == case
        for line in cards.console_lines(group.case, group.profile, found.answers[group])
    ]


def write(path: Path, rows: Sequence[dict[str, str]]) -> None:
    """cards.tsv, written whole (temp file, then renamed: a reader never sees half of it)."""
    cols = [*cards.COLUMNS, "cap", *sorted({k for r in rows for k in r} - set(cards.COLUMNS) - {"cap"})]
    tsv.atomic_write(path, to_tsv(rows, cols))


def for_sweep(sweep_dir: Path, cards_gb: Sequence[float] | None = None, storage: Any = None) -> Table:
    """Read every trial the sweep's storage and its sibling sweep folders hold, write `cards.tsv` in `sweep_dir`,
    and return the table (its `lines` for the console). `cards_gb`: None for the cards the sweep recorded (its
    `cards` setting; `DEFAULT_CARDS_GB` for a sweep that recorded none). `storage`: the sweep's own, where it is not
    the journal in its folder (a database URL's)."""
    sweep = sweep_of(sweep_dir.name) or sweep_dir.name
    storage = storage if storage is not None else studies.open_storage_at(str(sweep_dir))
    records = history.stored(storage, sweep_dir.parent)
    recorded = studies.sweep_settings(storage, sweep)
    cards_gb = cards_gb if cards_gb is not None else recorded_cards(recorded)
    found = table(sweep, records, recorded, cards_gb, history.trial_notes(sweep_dir.parent))
    write(sweep_dir / CARDS_TSV, found.rows)
    return found
