"""A case's outcome: its pick, its best_by_case.tsv row with the decision table's class and action, and the exit code
a sweep ends with. Pure: records in, answers out.

The sweep writes this row at its end, `python -m ladder.merge --best-from-storage` rebuilds it from storage alone,
and the summary prints it: all three ask `case_outcome`, the one place that composes the pick (`ladder.core.pick`),
the row (`ladder.core.rows`) and the class (`ladder.core.caseclass`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ladder.core import caseclass, pick, placement, rows, walk
from ladder.core.errors import ExitCode
from ladder.core.records import Objective, Phase, Status, TrialRecord

# the order in which a multirun's codes win, worst first: a sweep cut short or a bug says more than any answer; a
# job that could not start, or a broken configuration, must be fixed before any case's answer can be trusted
WORST_FIRST = (
    ExitCode.TERMINATED,
    ExitCode.INTERRUPTED,
    ExitCode.NO_SPACE,
    ExitCode.STORAGE,
    ExitCode.CRASH,
    ExitCode.BAD_SETTINGS,
    ExitCode.BROKEN_CONFIG,
    ExitCode.NO_RUNG_FITS,
    ExitCode.PICK_FOUND,
)


@dataclass(frozen=True)
class CaseOutcome:
    """What a case's records answer."""

    pick: TrialRecord | None  # the case's pick (its passed confirmation, where one was asked for)
    row: dict[str, str] | None  # its best_by_case.tsv row, with class and action (None: no trial to write)


def case_outcome(
    every: Sequence[TrialRecord],
    objective: Objective | str,
    confirm: bool = False,
    thresholds: caseclass.Thresholds = caseclass.DEFAULT,
) -> CaseOutcome:
    """The case's pick and its row, from its records alone. With `confirm`, the pick is the probes' pick whose
    confirmation passed (None until one has)."""
    probes = [r for r in every if r.phase is Phase.PROBE]
    choice = pick.choose_best(probes, objective)
    chosen = pick.confirmed(every, objective) if confirm else choice.item if choice else None
    tie = tie_words(choice, objective) if choice and chosen is choice.item else ""
    same = None if chosen else not_num_envs(probes)
    source = chosen or same or pick.fallback(probes)
    if source is None:
        return CaseOutcome(chosen, None)
    measured = {r.profile for r in probes if r.status is Status.OK}
    row = rows.best_row(source, len(probes)) | {"objective": str(objective)} | ({"tie": tie} if tie else {})
    if same is not None:  # its status says how it failed; its class, that a lower rung fails the same way
        return CaseOutcome(chosen, as_broken(row, caseclass.broken_action(row, caseclass.NOT_NUM_ENVS)))
    errors = [r for r in probes if r.status is Status.ERROR]
    if chosen is None and errors and source.status is not Status.ERROR:  # the row is the lowest failure's rung ...
        error = max(errors, key=lambda r: r.number)  # ... but a walk stopped on an error: no lower rung is the fix
        said = {"evidence": error.evidence, "trial_dir": error.info.get("trial_dir", ""), "knob": row.get("knob", "")}
        return CaseOutcome(chosen, as_broken(row, caseclass.broken_action(said)))
    row = classified(row, thresholds, measured)
    return CaseOutcome(chosen, measured_placement(row, chosen, every) if chosen else row)


def measured_placement(row: dict[str, str], chosen: TrialRecord, every: Sequence[TrialRecord]) -> dict[str, str]:
    """The row with the placement the case measured against its pick, where it did (`ladder.core.placement`)."""
    found = placement.answer(chosen, placement.sets(every, chosen))
    return placement.with_answer(row, found, row.get("class") == caseclass.CaseClass.THROUGHPUT)


def as_broken(row: dict[str, str], action: str) -> dict[str, str]:
    """The row, classed a broken configuration, with `action`."""
    return row | {"class": str(caseclass.CaseClass.BROKEN), "action": action}


def failed_at_bottom(r: TrialRecord) -> bool:
    """A launch of the ladder's lowest rung after failures that named no memory (`walk.Step.BOTTOM`), which
    failed with no memory evidence either."""
    at_bottom = r.info.get("step") == walk.Step.BOTTOM
    return at_bottom and r.status in walk.STEP_DOWN and pick.names_no_memory(r.reason, pick.mem_frac(r))


def not_num_envs(probes: Sequence[TrialRecord]) -> TrialRecord | None:
    """With nothing of the case fitting anywhere, its latest failure at the lowest rung that named no memory, as
    above it (the walk's `Outcome.UNRELATED`): num_envs is not the cause. None otherwise."""
    if any(r.status in walk.FITS | {Status.DIVERGED} for r in probes):
        return None
    return max((r for r in probes if failed_at_bottom(r)), key=lambda r: r.number, default=None)


def tie_words(choice: pick.Choice[TrialRecord], objective: str) -> str:
    """What the pick was tied with, within the objective's measured noise, and what broke the tie ("" for none)."""
    if not choice.tied:
        return ""
    others = ", ".join(f"{r.profile} e{r.num_envs}" for r in choice.tied)
    return f"tied on {objective} with {others} (within the measured noise); broken by {choice.by}"


def classified(
    row: dict[str, str], thresholds: caseclass.Thresholds = caseclass.DEFAULT, measured: Collection[str] = ()
) -> dict[str, str]:
    """The best row with the decision table's class and action (agreeing with the profiles the walk measured)."""
    cls, action = caseclass.classify_row(row, thresholds, measured)
    return row | {"class": str(cls), "action": action}


def exit_code(best: TrialRecord | None, records: Sequence[TrialRecord], broken: bool) -> ExitCode:
    """A finished sweep's code: a broken configuration (`broken`: a profile's walk stopped on `error`, or any trial
    ended `error`) whether or not another profile found a pick, since the walk is incomplete until it is fixed; else
    a pick found; else no rung fits (also where rungs fit but none was measured by the objective: no answer either)."""
    if broken or any(r.status is Status.ERROR for r in records):
        return ExitCode.BROKEN_CONFIG
    return ExitCode.NO_RUNG_FITS if best is None else ExitCode.PICK_FOUND


def worst(codes: Sequence[int]) -> int:
    """The code a multirun exits with: the worst of its jobs' by `WORST_FIRST` (an unknown code counts as a crash)."""
    rank = {int(c): i for i, c in enumerate(WORST_FIRST)}
    known = [c if c in rank else ExitCode.CRASH for c in codes]
    return min(known, key=lambda c: rank[c], default=ExitCode.PICK_FOUND)
