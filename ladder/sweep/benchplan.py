"""The dry run of a bench: one table (case, profiles, first rungs, the trials the walk could launch, the expected
time, what an earlier bench took) and each case's first rungs with why, in place of a dry run per case. Reads
storages, launches and writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from optuna.storages import BaseStorage

from ladder.core import bench
from ladder.core.memory.similar import nearest
from ladder.core.records import Status, TrialRecord
from ladder.core.walk import next_trial
from ladder.runner.machine import Machine, find_machine, with_trainer
from ladder.settings.config import GROWS_WITH_ENVS, Settings
from ladder.storage import reuse, studies
from ladder.sweep import dryrun, prior
from ladder.sweep.bench import Bench, facts_of
from ladder.sweep.context import Run, workload_of
from ladder.sweep.events import Unwatched
from ladder.sweep.identity import would_reuse


def show(b: Bench) -> str:
    """The bench's plan: the table, then each case's first rungs and why."""
    if not b.runs:
        return bench.plan_table([bench.PlanRow(m.name, (), "", 0, 0.0, skip=m.skip) for m in b.members])
    first = b.settings[b.runs[0]]
    machine = find_machine(first)
    storage = _storage(first, b)
    rows, whys = [], []
    for i, name in enumerate(b.runs):
        row, why = _row(b, b.settings[name], machine, storage, b.runs[:i])
        rows.append(row)
        whys.append(f"first rungs of {name}: {why}")
    rows += [bench.PlanRow(m.name, (), "", 0, 0.0, skip=m.skip) for m in b.members if m.skip]
    return (
        f"bench plan: sweep {b.paths.sweep} ({b.paths.sweep_dir})\n" + bench.plan_table(rows) + "\n".join(whys) + "\n"
    )


def _row(
    b: Bench,
    s: Settings,
    machine: Machine,
    storage: BaseStorage | None,
    before: Sequence[str],
) -> tuple[bench.PlanRow, str]:
    work = workload_of(s)
    ctx = Run(s, b.paths, with_trainer(machine, work), work, None, storage, Unwatched())
    known = would_reuse(ctx)
    profiles = [p.name for p in s.profiles]
    left = [sum(1 for r in s.rungs if (p, r) not in known) for p in profiles]
    earlier = reuse.earlier_records(storage, s.case.name, b.paths.sweep, b.paths.output_root)
    kind = work.kind.value
    same = [r for r in earlier if r.info.get("workload") == kind and r.info.get("device") == machine.device]
    defaults = dryrun.default_durations(s.measure, s.objective not in GROWS_WITH_ENVS, kind)
    took = dryrun.from_history(same, defaults, f"case {s.case.name}", s.measure.window_s)
    cost = dryrun.estimate_left(left, took.fail_s, took.fit_s, took.cut_s)
    first, why = _first(ctx, [b.settings[n] for n in before])
    row = bench.PlanRow(s.case.name, tuple(profiles), first, sum(left), cost.expected_s, _earlier_s(earlier))
    return row, why


def _first(ctx: Run, before: Sequence[Settings]) -> tuple[str, str]:
    """The first profile's first rungs, short and with why: what the prior orders (the case's own history, else
    the cases most like it, `ladder.sweep.prior`), else the walk's own start, and the case of the bench before it
    whose model it will borrow once that case has run."""
    s = ctx.settings
    found = prior.openings(ctx).get(s.profiles[0].name)
    if found is not None and found.rungs:
        return ",".join(map(str, found.rungs)), found.why
    start = next_trial(s.rungs, [p.name for p in s.profiles], [], s.tuning)
    rung = str(start.rung) if start is not None else "-"
    if not history_on(s):
        return rung, f"{rung}, the walk's own start (history=false)"
    if found is not None:
        return rung, f"{rung}, the walk's own start: {found.why}"
    donor = nearest(facts_of(s), [facts_of(o) for o in before])
    if donor is None:
        return rung, f"{rung}, the walk's own start: the first case of its family ({s.case.robot}) goes cold"
    return f"{rung} (then {donor.name}'s)", f"{rung} now; once {donor.name} has run, from its memory model, scaled"


def history_on(s: Settings) -> bool:
    """`history=false` turns every prior off (the setting may be absent in an older schema: on)."""
    return bool(getattr(s, "history", True))


def _earlier_s(records: Sequence[TrialRecord]) -> float | None:
    """The trial-seconds the latest earlier sweep that ran this case spent on it; None where none did."""
    launched = [r for r in records if not r.info.get("reused_from") and r.status is not Status.INTERRUPTED]
    if not launched:
        return None
    latest = max(launched, key=lambda r: r.info.get("finished_at", "")).info.get("sweep", "")
    return sum(_seconds(r) for r in launched if r.info.get("sweep", "") == latest)


def _seconds(record: TrialRecord) -> float:
    try:
        return float(record.info.get("duration_s", "") or 0.0)
    except ValueError:
        return 0.0


def _storage(s: Settings, b: Bench) -> BaseStorage | None:
    if s.storage:
        return studies.open_storage(s.storage, b.paths.sweep_dir, s.storage_wait_s)
    journal: Path = b.paths.journal
    return studies.open_storage(None, b.paths.sweep_dir) if journal.is_file() else None
