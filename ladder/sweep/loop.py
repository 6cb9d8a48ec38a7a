"""The sweep of one case: each step reads load → decide → claim → run → record.

- load: the case's records, once this process's turn comes (`ladder.storage.turns`);
- decide: the walk's next launch (`ladder.core.walk`), the pick's confirmation, or its placement
  (`ladder.sweep.placement`: N one-device jobs side by side);
- claim: the trial begun in storage, unless another process's came first;
- run: the trial launched, watched and stopped (`ladder.runner.trial`), under its devices' lease;
- record: its outcome stored, trials.tsv rewritten; at the end, the case's outcome (`ladder.core.outcome`) merged
  into best_by_case.tsv.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from ladder.core import outcome, pick, walk, warmup
from ladder.core.measure.noise import carried_df, pooled_noise
from ladder.core.measure.rates import Rate
from ladder.core.paths import SweepPaths
from ladder.core.records import Objective, Phase, Status, TrialRecord
from ladder.runner import launch, preflight, trial
from ladder.runner.machine import Machine, with_trainer
from ladder.settings import catalog
from ladder.settings.config import Settings
from ladder.storage import merge, reuse, studies, tsv
from ladder.sweep import cards, identity, placement, prior, resume, trials
from ladder.sweep.context import Run, end_abandoned, workload_of
from ladder.sweep.events import View
from ladder.workloads import planner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Summary:
    case: str
    best: TrialRecord | None
    best_row: dict[str, str] | None  # as written to best_by_case.tsv, with class and action
    walks: tuple[walk.Standing, ...]
    records: tuple[TrialRecord, ...]
    resumed: int  # finished trials found in storage and not run again
    cards: tuple[str, ...] = ()  # cards.tsv's lines for this case: one per card (`cards` setting)


def run(
    settings: Settings, paths: SweepPaths, machine: Machine, view: View, workload: planner.Workload | None = None
) -> Summary:
    """The case's sweep to its end; `workload`: built already (`ladder.search` builds it before any file is
    written, so that a template that cannot be filled stops there), else built here."""
    storage = studies.open_storage(settings.storage, paths.sweep_dir, settings.storage_wait_s)
    study = studies.open_study(storage, settings.case.name, paths.sweep)
    merge.check_best(paths.best_tsv, storage, lambda every: case_outcome(every, settings).row)  # before any trial
    merge.check_trials(paths.trials_tsv, lambda: studies.sweep_records(storage, paths.sweep))
    work = workload or workload_of(settings)
    ctx = Run(settings, paths, with_trainer(machine, work), work, study, storage, view)
    ctx = dataclasses.replace(ctx, earlier=identity.earlier(ctx), priors=_priors(ctx))
    resume.settle(ctx)
    if abandoned := studies.mark_abandoned(study, settings.stale_after_s, end_abandoned):
        log.info("%d trial(s) left running by a stopped sweep are marked interrupted and will run again", abandoned)
    if found := studies.records(study):  # a resume, or a second process on this sweep: its rows, as they landed
        ctx.view.found(found)
    resumed = sum(1 for r in found if r.status is not Status.INTERRUPTED)
    if settings.reuse:
        identity.copy_in(ctx)
    ctx.shown.update(r.number for r in studies.records(study))
    _say_carried_noise(ctx)
    gate = trials.gate(settings, machine)
    while _step(ctx, gate):
        pass
    return _conclude(ctx, resumed)


def _step(ctx: Run, gate: preflight.Preflight | None) -> bool:
    """Decide and launch the case's next trial; False once the walk has nothing left to launch.

    The case's records are loaded once, when this process's turn comes (`ladder.storage.turns`: no other process runs a
    trial of the case; it waits holding no devices), and the decision is taken from them. Where trials lease
    devices, it is taken again inside the lease from records loaded then, so it never goes stale while it waits."""
    records = ctx.turns.wait(landed=lambda landed: _show_others(ctx, landed))
    _show_others(ctx, records)
    if (step := _decide(ctx, records)) is None:
        return False
    with trials.leased(ctx) as held:
        if held is not None:  # waiting for devices can take long: another process may have moved the walk meanwhile
            if (now := ctx.turns.now()) is None:
                return True  # it began a trial of this case: its outcome comes first
            records = now
            if (step := _decide(ctx, records)) is None:
                return False
        if gate is not None:
            gate.before_launch(ctx.machine.gpus)  # a refusal raises LaunchError, naming the processes and the fix
        with trials.ballast_held(ctx, held) as ballast_mb:  # the emulated card, where a ballast holds it
            if step[1] is Phase.PLACEMENT:
                placement.run_set(ctx, step[0], records, held, ballast_mb)
            else:
                _measure(ctx, *step, records, held, ballast_mb)
    return True


def _show_others(ctx: Run, records: list[TrialRecord]) -> None:
    """Trials of this case that another process finished (see `_step`), shown as they land, like this one's."""
    for record in records:
        if record.number not in ctx.shown:
            ctx.shown.add(record.number)
            ctx.view.trial_finished(record)


def _decide(ctx: Run, records: list[TrialRecord]) -> tuple[walk.Decision, Phase] | None:
    """The walk's next probe; once none is left, the pick's confirmation (if `confirm_s` asks for one and it has
    not passed), then its placement (`placement=`). A failed confirmation steps that profile down, and the walk
    goes on."""
    profiles = tuple(p.name for p in ctx.settings.profiles)
    attempts = walk_facts(records, ctx.settings.objective)
    decision = walk.next_trial(ctx.settings.rungs, profiles, attempts, ctx.settings.tuning, ctx.priors)
    if decision is not None:
        return decision, Phase.PROBE
    if ctx.settings.measure.recheck_unstable and (again := pick.to_recheck(records, ctx.settings.objective)):
        why = "the pick's figure is unstable: a second window before it counts"
        return walk.Decision(again.profile, again.num_envs, why, step=walk.Step.RECHECK), Phase.PROBE
    if ctx.settings.confirm_s and (chosen := pick.to_confirm(records, ctx.settings.objective)) is not None:
        why = f"confirm the pick for {ctx.settings.confirm_s:.0f} s"
        return walk.Decision(chosen.profile, chosen.num_envs, why, step=walk.Step.CONFIRM), Phase.CONFIRM
    if (side := placement.next_decision(ctx, records)) is not None:  # placement=: one job or one per device
        return side, Phase.PLACEMENT
    return None


def _measure(
    ctx: Run,
    decision: walk.Decision,
    phase: Phase,
    records: list[TrialRecord],
    held: trials.Held,
    ballast_mb: dict[int, float],
) -> None:
    """One launch of the decision, and `measure.repeats - 1` more while it fits; each is its own trial, and
    each carries the repeat verdict over the rates so far (unstable: repeats disagree, or an interval is wide).
    `records`: the case's, as the decision was taken from them."""
    assert ctx.study is not None
    earlier = [r for r in records if _same_config(r, decision, phase) and r.status is Status.OK]
    rates = [rate for r in earlier if (rate := Rate.of(r.figures)) is not None]  # a recheck's first window
    storage, sweep = ctx.study.storage, ctx.paths.sweep
    for _ in range(ctx.settings.measure.repeats):
        record = _run_one(ctx, decision, phase, records, rates, held, ballast_mb)
        if record is None:  # another process's trial of the case came first: decide again after its outcome
            return
        records = [*records, record]
        ctx.view.trial_finished(record)
        tsv.write_trials(ctx.paths.trials_tsv, lambda: studies.sweep_records(storage, sweep))
        if record.status is Status.INTERRUPTED:
            raise KeyboardInterrupt
        if record.status is not Status.OK:
            return


def _run_one(
    ctx: Run,
    decision: walk.Decision,
    phase: Phase,
    records: list[TrialRecord],
    rates: list[Rate],
    held: trials.Held,
    ballast_mb: dict[int, float],
) -> TrialRecord | None:
    """Claim, run and record the decision as a new trial; None when another process's trial came first."""
    s, study = ctx.settings, ctx.study
    assert study is not None
    done = [r for r in records if _same_config(r, decision, phase)]
    trial_dir = identity.fresh_trial_dir(
        ctx.paths, s.case.name, decision.profile, decision.rung, phase, s.knob, len(done) + 1
    )
    spec = trials.spec(ctx, decision, trial_dir, launch.free_port(), held)
    info = trials.info(ctx, decision, spec, trial_dir, held)
    trial_id = uuid.uuid4().hex[:12]  # before begin: a crashed trial's processes are found by it
    attrs = {"case": s.case.name, "method": s.case.method, "phase": str(phase), "info": info, "trial_id": trial_id}
    claim = ctx.turns.claim(decision.profile, decision.rung, catalog.known("profile"), attrs)
    if claim is None:  # decided at the same moment as another process: the older trial runs
        return None
    ctx.shown.add(claim.number)
    ctx.view.trial_started(decision.profile, decision.rung)
    started = trials.utc_now()
    with studies.heartbeat(study, claim, s.heartbeat_s):
        beat = decision.beat if s.objective is Objective.SAMPLES_PER_S and phase is Phase.PROBE else None
        own, carried = _noise_windows(ctx, records)
        noise = pooled_noise(own, earlier=carried)
        request = trial.TrialRequest(
            spec,
            trial_dir,
            trial_id,
            trials.measure_conf(s, phase),
            mem_limit_bytes=trials.mem_limit(s),
            beat=beat,
            short=decision.short,
            card_mb=trials.card_mb(ctx),
            cadence_s=s.measure.window_s,  # a confirmation judges its memory on the probes' window
            noise=noise,
            early=warmup.pooled(own, noise),
        )
        result = trial.run(request, trials.sampler_factory(ctx.machine, held, trial_id, ballast_mb), ctx.view.tick)
    if noise is not None and (took := carried_df(own, carried)):
        result = dataclasses.replace(result, figures=result.figures | {"noise_carried_df": took})
    if ballast_mb:  # figures net of the ballast, the ballast beside them
        result = dataclasses.replace(result, figures=result.figures | trials.ballast_figures(ctx, ballast_mb))
    if (s.measure.repeats > 1 or rates) and result.verdict.status is Status.OK:
        result = trials.with_repeats(result, rates, s.measure)
    record = trials.record(s, decision, phase, result, info | trials.timing(started, result))
    studies.finish(study, claim, record, pick.objective_value(record, s.objective))
    return record


def _noise_windows(ctx: Run, records: list[TrialRecord]) -> tuple[list[dict[str, float]], list[Mapping[str, float]]]:
    """The figures of the case's windows the step-noise pool draws on: this sweep's own, and the earlier sweeps'
    that may fill it (`reuse.noise_windows`, newest first)."""
    own = [r.figures for r in records if r.status is Status.OK]
    now = datetime.now(timezone.utc)
    carried = reuse.noise_windows(ctx.earlier, identity.noise_source(ctx), now, ctx.settings.noise_carry_h, records)
    return own, carried


def _say_carried_noise(ctx: Run) -> None:
    """One log line, where earlier sweeps' windows fill the case's pool of step noise from the start."""
    assert ctx.study is not None
    own, carried = _noise_windows(ctx, studies.records(ctx.study))
    if (took := carried_df(own, carried)) and (pool := pooled_noise(own, earlier=carried)) is not None:
        log.info(
            "step noise: windows of this case in earlier sweeps on this host (within %g h: noise_carry_h) fill its "
            "pool with %g degree(s) of freedom, %.1f%% a step",
            ctx.settings.noise_carry_h,
            took,
            100 * pool.sd_frac,
        )


def _same_config(record: TrialRecord, decision: walk.Decision, phase: Phase) -> bool:
    return (record.profile, record.num_envs, record.phase) == (decision.profile, decision.rung, phase)


def _conclude(ctx: Run, resumed: int) -> Summary:
    assert ctx.study is not None
    settings, every = ctx.settings, studies.records(ctx.study)
    attempts, walk_tuning = walk_facts(every, settings.objective), settings.tuning
    walks = tuple(walk.standing(settings.rungs, p.name, attempts, walk_tuning) for p in settings.profiles)
    found = case_outcome(every, settings)
    if found.row is not None:
        tsv.write_best(ctx.paths.best_tsv, [found.row])
    lines = tuple(_cards(ctx))
    return Summary(settings.case.name, found.pick, found.row, walks, tuple(every), resumed, lines)


def _priors(ctx: Run) -> dict[str, walk.Seed]:
    """Where each profile's walk starts on this card, from memory history (`ladder.sweep.prior`), said in the log."""
    try:
        found = prior.openings(ctx)
    except Exception as exc:  # noqa: BLE001 - a prior only orders launches: without one, the walk starts cold
        log.warning("history: no prediction for this card (%s): the walk starts as without history", exc)
        return {}
    for line in prior.lines(found, ctx.settings.knob):
        log.info("history: %s", line)
    return prior.seeds(found)


def _cards(ctx: Run) -> list[str]:
    """cards.tsv written for the sweep (every case it holds), and this case's lines, one per card."""
    try:
        table = cards.for_sweep(ctx.paths.sweep_dir, ctx.settings.cards, ctx.storage)
    except Exception as exc:  # noqa: BLE001 - the case's outcome is written already; the table is a reading of it
        log.warning("cards.tsv not written (%s); python -m ladder.report %s writes it", exc, ctx.paths.sweep_dir)
        return []
    return cards.lines_of(table, ctx.settings.case.name)


def case_outcome(every: list[TrialRecord], settings: Settings) -> outcome.CaseOutcome:
    """The case's pick and best_by_case.tsv row under the sweep's settings (`ladder.core.outcome`)."""
    return outcome.case_outcome(every, settings.objective, bool(settings.confirm_s), settings.decide)


def walk_facts(records: list[TrialRecord], objective: str) -> list[walk.Attempt]:
    """The records as the walk sees them (`walk.attempts`)."""
    return walk.attempts(records, objective)
