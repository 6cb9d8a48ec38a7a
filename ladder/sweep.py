"""The sweep: the one module that composes the others for a case.

policy (next profile and rung) → workloads (trial spec) → trial (launch, watch, stop, classify, measure) →
store (Optuna trial) → results (trials.tsv after every trial, best_by_case.tsv with class and action at the end).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import socket
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import optuna
from filelock import FileLock

from ladder import (
    catalog,
    decide,
    launch,
    lease,
    merge,
    policy,
    preflight,
    results,
    reuse,
    stats,
    store,
    sweepsettings,
    trial,
)
from ladder import pick as rules
from ladder.config import MeasureConf, Settings
from ladder.monitor import Sampler, sampler_for
from ladder.records import Objective, Phase, Status, TrialRecord
from ladder.turns import Turns
from ladder.view import View
from ladder.workloads import planner
from ladder.workloads.builtin import Placement
from ladder.workloads.spec import TrialSpec

log = logging.getLogger(__name__)

# objectives that do not fall as num_envs grows (the seed's util); any other is measured below the largest fit too
GROWS_WITH_ENVS = frozenset({Objective.MIN_AVG_UTIL})


@dataclass(frozen=True)
class Machine:
    """What the sweep found to run on."""

    device: str  # cpu or cuda
    gpus: tuple[int, ...]  # NVML indices of the GPUs a trial uses (empty on cpu)
    nproc: int  # ranks per trial
    python: str  # interpreter for torchrun and the trainer
    describe: dict[str, str]  # gpu_name, gpu_mem_total, n_gpus, driver, host, ...
    pool: tuple[int, ...] = ()  # devices trials lease `nproc` of (NVML indices, or CPU cores); () = no leases
    env: dict[str, str] = dataclasses.field(default_factory=dict)  # what every trial's environment gets from it


@dataclass(frozen=True)
class Paths:
    sweep: str
    sweep_dir: Path

    @staticmethod
    def for_settings(settings: Settings, now: datetime) -> Paths:
        name = settings.sweep or now.strftime("%Y%m%d_%H%M%S")
        return Paths(name, Path(settings.output_root) / f"{store.SWEEP_PREFIX}{name}")

    @property
    def best_tsv(self) -> Path:
        return self.sweep_dir / "best_by_case.tsv"

    @property
    def trials_tsv(self) -> Path:
        return self.sweep_dir / "trials.tsv"

    def trial_dir(self, case: str, variant: str, num_envs: int, phase: Phase, n: int, knob: str = "num_envs") -> Path:
        """`default_e64_probe_1` for num_envs (the seed's scripts read `e<N>`), `default_update_interval10_probe_1`
        for another knob."""
        rung = f"e{num_envs}" if knob == "num_envs" else f"{knob}{num_envs}"
        return self.sweep_dir / "trials" / case / f"{variant}_{rung}_{phase}_{n}"


@dataclass(frozen=True)
class Summary:
    case: str
    best: TrialRecord | None
    best_row: dict[str, str] | None  # as written to best_by_case.tsv, with class and action
    walks: tuple[policy.Walk, ...]
    records: tuple[TrialRecord, ...]
    resumed: int  # finished trials found in storage and not run again


@dataclass(frozen=True)
class Run:
    """What every step of one sweep shares."""

    settings: Settings
    paths: Paths
    machine: Machine
    workload: planner.Workload
    study: optuna.Study
    storage: optuna.storages.BaseStorage
    view: View
    shown: set[int] = dataclasses.field(default_factory=set)  # numbers of the stored trials the view has shown

    @functools.cached_property
    def turns(self) -> Turns:
        """Who may launch now, between the processes that run this case's walk."""
        return Turns(self.study, self.settings.stale_after_s)


def workload_of(settings: Settings) -> planner.Workload:
    """The sweep's workload with `auto` resolved; says in one log line what runs and why."""
    workload, note = planner.build(settings.workload, settings.knob, os.environ)
    log.info(note)
    return workload


def plan(run: Run, decision: policy.Decision, trial_dir: Path, port: int) -> TrialSpec:
    profile = next(p for p in run.settings.profiles if p.name == decision.profile)
    place = Placement(
        run.machine.device, run.machine.nproc, port, run.machine.python, single_rank=run.settings.workload.single_rank
    )
    return planner.plan(run.workload, run.settings.case, profile, decision.rung, place, str(trial_dir.absolute()),
                        run.settings.measure.trial_timeout_s, {**run.settings.nccl_env, **run.machine.env})  # fmt: skip


def run(settings: Settings, paths: Paths, machine: Machine, view: View) -> Summary:
    storage = store.open_storage(settings.storage, paths.sweep_dir)
    study = store.open_study(storage, settings.case.name, paths.sweep)
    merge.check_best(paths.best_tsv, storage, lambda every: best_of(every, settings)[1])  # before any trial
    merge.check_trials(paths.trials_tsv, lambda: store.sweep_records(storage, paths.sweep))
    ctx = Run(settings, paths, machine, workload_of(settings), study, storage, view)
    _settle_settings(ctx)
    if abandoned := store.mark_abandoned(study, settings.stale_after_s):
        log.info("%d trial(s) left running by a stopped sweep are marked interrupted and will run again", abandoned)
    resumed = sum(1 for r in store.records(study) if r.status is not Status.INTERRUPTED)
    if settings.reuse:
        _reuse(ctx)
    ctx.shown.update(r.number for r in store.records(study))
    gate = _preflight(settings, machine)
    while _step(ctx, gate):
        pass
    return _conclude(ctx, resumed)


def _step(ctx: Run, gate: preflight.Preflight | None) -> bool:
    """Decide and launch the case's next trial; False once the walk has nothing left to launch.

    The case's records are loaded once, when this process's turn comes (`ladder.turns`: no other process runs a
    trial of the case; it waits holding no devices), and the decision is taken from them. Where trials lease
    devices, it is taken again inside the lease from records loaded then, so it never goes stale while it waits."""
    records = ctx.turns.wait()
    _show_others(ctx, records)
    if (step := _decide(ctx, records)) is None:
        return False
    with _lease(ctx) as held:
        if held is not None:  # waiting for devices can take long: another process may have moved the walk meanwhile
            if (records := ctx.turns.now()) is None:
                return True  # it began a trial of this case: its outcome comes first
            if (step := _decide(ctx, records)) is None:
                return False
        if gate is not None:
            gate.before_launch(ctx.machine.gpus)  # a refusal raises LaunchError, naming the processes and the fix
        _measure(ctx, *step, records, held)
    return True


def _show_others(ctx: Run, records: list[TrialRecord]) -> None:
    """Trials of this case that another process finished (see `_step`), shown as they land, like this one's."""
    for record in records:
        if record.number not in ctx.shown:
            ctx.shown.add(record.number)
            ctx.view.trial_finished(record)


def _decide(ctx: Run, records: list[TrialRecord]) -> tuple[policy.Decision, Phase] | None:
    """The walk's next probe; once none is left, the pick's confirmation (if `confirm_s` asks for one and it has
    not passed). A failed confirmation steps that profile down, and the walk goes on."""
    if (decision := _next(ctx, records)) is not None:
        return decision, Phase.PROBE
    if (pick := _to_confirm(ctx, records)) is not None:
        return pick, Phase.CONFIRM
    return None


def _reuse(ctx: Run) -> None:
    """Trials of earlier sweeps that answer for ours (same configuration, hardware and code) are copied in and
    shown, so the walk takes them as facts instead of launching them again."""
    s = ctx.settings
    wanted = _wanted(ctx)
    earlier = reuse.earlier_records(ctx.storage, s.case.name, ctx.paths.sweep, Path(s.output_root))
    # one process at a time copies into this case (the same command started twice would copy everything twice)
    ctx.paths.sweep_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(ctx.paths.sweep_dir / f".reuse.{s.case.name}.lock")):
        have = {(r.variant, r.num_envs) for r in store.records(ctx.study) if r.status is not Status.INTERRUPTED}
        copies = [_copied(ctx, r) for r in reuse.pick(earlier, wanted, have)]
        have |= {(c.variant, c.num_envs) for c in copies}
        card = _card(ctx)
        carried = [_copied(ctx, r, reuse.carried_why(r, card)) for r in
                   (reuse.carried(earlier, _shapes(ctx), card, have) if card else [])]  # fmt: skip
        for copy in copies + carried:
            store.add_finished(ctx.study, copy, catalog.known("profile"), results.objective_value(copy, s.objective))
    for copy in copies + carried:
        ctx.view.trial_finished(copy)
    if copies:
        log.info("%d trial(s) reused from earlier sweeps on the same hardware (reuse=false runs them again)",
                 len(copies))  # fmt: skip
    if carried:
        log.info("%d rung(s) not launched: they ran out of memory under a larger emulated card in an earlier sweep",
                 len(carried))  # fmt: skip
    if copies or carried:
        results.write_trials(ctx.paths.trials_tsv, lambda: store.sweep_records(ctx.storage, ctx.paths.sweep))


def _card(ctx: Run) -> float | None:
    """The emulated card this sweep's trials run under (GB per rank), where the workload applies one."""
    return ctx.settings.workload.emulate_gpu_mem_gb if ctx.workload.kind is planner.Kind.PROXY else None


def _copied(ctx: Run, record: TrialRecord, why: str = "") -> TrialRecord:
    """The reused trial as this sweep stores it, its evidence copied into this sweep's own trial folder."""
    source = Path(ctx.settings.output_root) / f"{store.SWEEP_PREFIX}{record.info.get('sweep', '')}"
    dest = _fresh_trial_dir(ctx, record.variant, record.num_envs, Phase.PROBE)
    copied = bool(record.info.get("trial_dir")) and reuse.copy_evidence(source / record.info["trial_dir"], dest)
    return reuse.as_reused(record, ctx.paths.sweep, str(dest.relative_to(ctx.paths.sweep_dir)) if copied else "", why)


def _fresh_trial_dir(ctx: Run, variant: str, rung: int, phase: Phase, n: int = 1) -> Path:
    """The first trial folder from number `n` on that nothing occupies yet (a set-aside or copied trial's stays)."""
    while (folder := ctx.paths.trial_dir(ctx.settings.case.name, variant, rung, phase, n, ctx.settings.knob)).exists():
        n += 1
    return folder


def _settle_settings(ctx: Run) -> None:
    """Record the sweep's settings for the case; where they changed (settings_change=accept: `ladder.search`
    refused otherwise), the trials that no longer answer for this sweep's are set aside, and their rungs run
    afresh."""
    now, recorded = sweepsettings.record(ctx.settings), store.load_settings(ctx.study)
    if recorded == now:
        return
    if recorded is not None:
        wanted = _wanted(ctx)
        stale = [r.number for r in store.records(ctx.study) if _stale(r, wanted)]
        store.set_aside(ctx.study, stale)
        log.info("the sweep's settings changed (settings_change=accept): %d earlier trial(s) no longer count and "
                 "their rungs run afresh", len(stale))  # fmt: skip
    store.save_settings(ctx.study, now)


def _stale(record: TrialRecord, wanted: reuse.Wanted) -> bool:
    """A finished trial that no longer answers for its rung; an interrupted one never counted: it stays as history."""
    return wanted.get((record.variant, record.num_envs)) != reuse.identity_of(record) and (
        record.status is not Status.INTERRUPTED
    )


def would_reuse(ctx: Run) -> dict[tuple[str, int], str]:
    """For a dry run: (profile, rung) -> what answers for it without a launch (a trial this sweep already has,
    or one an earlier sweep ran). Reads storages only; `ctx.storage` is this sweep's, or None where it has none."""
    s = ctx.settings
    study = _existing_study(ctx)
    known = {(r.variant, r.num_envs): f"already run in this sweep ({r.status})"
             for r in (store.records(study) if study else []) if r.status is not Status.INTERRUPTED}  # fmt: skip
    if s.reuse:
        earlier = reuse.earlier_records(ctx.storage, s.case.name, ctx.paths.sweep, Path(s.output_root))
        for r in reuse.pick(earlier, _wanted(ctx), set(known)):
            known[(r.variant, r.num_envs)] = f"reused from {reuse.origin(r)} ({r.status})"
        if card := _card(ctx):
            for r in reuse.carried(earlier, _shapes(ctx), card, set(known)):
                known[(r.variant, r.num_envs)] = reuse.carried_why(r, card)
    return known


def _existing_study(ctx: Run) -> optuna.Study | None:
    name = store.study_name(ctx.settings.case.name, ctx.paths.sweep)
    if ctx.storage is None or name not in optuna.get_all_study_names(ctx.storage):
        return None
    return optuna.load_study(study_name=name, storage=ctx.storage)


def _placeholder_spec(ctx: Run, profile: str, rung: int) -> TrialSpec:
    """The trial as planned in reuse's placeholder folder on port 0: its configuration, less where it runs."""
    return plan(ctx, policy.Decision(profile, rung, ""), Path(reuse.TRIAL_DIR), 0)


def _bare_spec(ctx: Run, profile: str, rung: int) -> TrialSpec:
    """The trial as `_placeholder_spec` plans it, without the emulated card (what `reuse.carried` compares)."""
    bare = dataclasses.replace(ctx.workload, proxy=dataclasses.replace(ctx.workload.proxy, emulate_gpu_mem_gb=None))
    return _placeholder_spec(dataclasses.replace(ctx, workload=bare), profile, rung)


def _shapes(ctx: Run) -> reuse.Shapes:
    """(profile, rung) -> the shape a failure under a larger card must have to answer for it (`reuse.shape`)."""
    out = {}
    for profile, rung in ((p.name, r) for p in ctx.settings.profiles for r in ctx.settings.rungs):
        spec = _bare_spec(ctx, profile, rung)
        describe = {**ctx.machine.describe, **spec.info, **_conditions(ctx)}
        out[(profile, rung)] = reuse.shape(ctx.settings.case.name, reuse.fingerprint(spec), describe)
    return out


def _wanted(ctx: Run) -> reuse.Wanted:
    """(profile, rung) -> the identity a trial that answers for it has."""
    return {(p.name, rung): _identity(ctx, p.name, rung) for p in ctx.settings.profiles for rung in ctx.settings.rungs}


def _identity(ctx: Run, profile: str, rung: int) -> str:
    spec = _placeholder_spec(ctx, profile, rung)
    return reuse.identity(ctx.settings.case.name, reuse.fingerprint(spec),
                          {**ctx.machine.describe, **spec.info, **_conditions(ctx)})  # fmt: skip


def _conditions(ctx: Run) -> dict[str, str]:
    return reuse.conditions(ctx.settings.workload, ctx.settings.measure, ctx.workload.kind is planner.Kind.PROXY)


def _to_confirm(ctx: Run, records: list[TrialRecord]) -> policy.Decision | None:
    """With `confirm_s`, the probes' pick runs that long; a pick whose confirmation has passed needs none."""
    if not ctx.settings.confirm_s:
        return None
    pick = rules.to_confirm(records, ctx.settings.objective)
    if pick is None:
        return None
    return policy.Decision(pick.variant, pick.num_envs, f"confirm the pick for {ctx.settings.confirm_s:.0f} s")


def _measure(
    ctx: Run, decision: policy.Decision, phase: Phase, records: list[TrialRecord], held: lease.Lease | None
) -> None:
    """One launch of the decision, and `measure.repeats - 1` more while it fits; each is its own trial, and
    each carries the repeat verdict over the rates so far (unstable: repeats disagree, or an interval is wide).
    `records`: the case's, as the decision was taken from them."""
    rates: list[stats.Rate] = []
    for _ in range(ctx.settings.measure.repeats):
        record = _run_one(ctx, decision, phase, records, rates, held)
        if record is None:  # another process's trial of the case came first: decide again after its outcome
            return
        records = [*records, record]
        ctx.view.trial_finished(record)
        results.write_trials(ctx.paths.trials_tsv, lambda: store.sweep_records(ctx.storage, ctx.paths.sweep))
        if record.status is Status.INTERRUPTED:
            raise KeyboardInterrupt
        if record.status is not Status.OK:
            return


def _next(ctx: Run, records: list[TrialRecord]) -> policy.Decision | None:
    profiles = tuple(p.name for p in ctx.settings.profiles)
    return policy.next_trial(ctx.settings.rungs, profiles, _attempts(records, ctx.settings.objective),
                             _tuning(ctx.settings))  # fmt: skip


def _run_one(
    ctx: Run,
    decision: policy.Decision,
    phase: Phase,
    records: list[TrialRecord],
    rates: list[stats.Rate],
    held: lease.Lease | None,
) -> TrialRecord | None:
    """Launch the decision as a new trial and record it; None when another process's trial came first."""
    key = (decision.profile, decision.rung, phase)
    done = [r for r in records if (r.variant, r.num_envs, r.phase) == key]
    trial_dir = _fresh_trial_dir(ctx, decision.profile, decision.rung, phase, len(done) + 1)
    spec = plan(ctx, decision, trial_dir, launch.free_port())
    if held is not None:  # the trial sees only its leased GPUs (as cuda:0..n-1), or gets its CPU slots
        spec = dataclasses.replace(spec, env={**spec.env, **lease.lease_env(held)})
    info = _info(ctx, decision, spec, trial_dir, held)
    trial_id = uuid.uuid4().hex[:12]  # before begin: a crashed trial's processes are found by it
    attrs = {"case": ctx.settings.case.name, "method": ctx.settings.case.method, "phase": str(phase), "info": info,
             "trial_id": trial_id}  # fmt: skip
    otrial = ctx.turns.claim(decision.profile, decision.rung, catalog.known("profile"), attrs)
    if otrial is None:  # decided at the same moment as another process: the older trial runs
        return None
    ctx.shown.add(otrial.number)
    ctx.view.trial_started(decision.profile, decision.rung)
    started = _utc_now()
    sampler = _sampler_factory(ctx.machine, held, trial_id)
    with store.heartbeat(ctx.study, otrial, ctx.settings.heartbeat_s):
        beat = decision.beat if ctx.settings.objective is Objective.SAMPLES_PER_S and phase is Phase.PROBE else None
        result = trial.run(spec, trial_dir, trial_id, _measure_conf(ctx.settings, phase), sampler,
                           _mem_limit(ctx.settings), ctx.view.tick, beat, decision.short)  # fmt: skip
    if ctx.settings.measure.repeats > 1 and result.verdict.status is Status.OK:
        result = _with_repeats(result, rates, ctx.settings)
    record = _record(ctx.settings, decision, phase, result, info | _timing(started, result))
    store.finish(ctx.study, otrial, record, results.objective_value(record, ctx.settings.objective))
    return record


def _measure_conf(settings: Settings, phase: Phase) -> MeasureConf:
    """A confirmation's window is `confirm_s` long; its time limit grows to fit it."""
    m = settings.measure
    if phase is Phase.PROBE:
        return m
    limit = max(m.trial_timeout_s, settings.confirm_s + m.startup_timeout_s + m.warmup_timeout_s)
    return dataclasses.replace(m, window_s=settings.confirm_s, trial_timeout_s=limit)


def _with_repeats(result: trial.Result, rates: list[stats.Rate], settings: Settings) -> trial.Result:
    rate = stats.Rate.of(result.figures)
    if rate is not None:
        rates.append(rate)
    m = settings.measure
    verdict = stats.repeat_verdict(rates, m.max_repeat_spread, m.max_ci_frac)
    return dataclasses.replace(result, figures={**result.figures, **verdict.figures(), "repeats": float(len(rates))})


def _info(ctx: Run, decision: policy.Decision, spec: TrialSpec, trial_dir: Path, held: lease.Lease | None) -> dict:
    return {
        "devices": ",".join(str(d) for d in held.devices) if held else "",
        "why": decision.why,
        "knob": ctx.settings.knob,
        "config_sha": reuse.fingerprint(_placeholder_spec(ctx, decision.profile, decision.rung)),
        "shape_sha": reuse.fingerprint(_bare_spec(ctx, decision.profile, decision.rung)),
        **ctx.machine.describe,
        **spec.info,
        **_conditions(ctx),
        "sweep": ctx.paths.sweep,
        "trial_dir": str(trial_dir.relative_to(ctx.paths.sweep_dir)),
    }


@contextlib.contextmanager
def _lease(ctx: Run) -> Iterator[lease.Lease | None]:
    """The trial's devices, held from before its decision to after its reap; none where the machine has no pool."""
    if not ctx.machine.pool:
        yield None
        return
    kind = lease.DeviceKind.GPU if ctx.machine.device == "cuda" else lease.DeviceKind.CPU
    w = ctx.settings.workload
    folder = Path(w.lease_dir) if w.lease_dir else lease.DEFAULT_DIR
    label = f"{ctx.settings.case.name} of sweep {ctx.paths.sweep} (pid {os.getpid()})"
    with lease.acquire(ctx.machine.nproc, ctx.machine.pool, folder, w.lease_timeout_s, kind, label) as held:
        yield held


def _record(
    settings: Settings, decision: policy.Decision, phase: Phase, result: trial.Result, info: dict[str, str]
) -> TrialRecord:
    source = result.source or ("nvml" if info.get("device") == "cuda" else "host")
    return TrialRecord(
        case=settings.case.name,
        method=settings.case.method,
        variant=decision.profile,
        num_envs=decision.rung,
        phase=phase,
        status=result.verdict.status,
        reason=result.verdict.reason,
        evidence=result.verdict.evidence,
        figures=result.figures,
        info={
            **info,
            "source": source,
            "exit_code": str(result.exit_code),
            "leftovers": str(result.leftovers),
            "confidence": str(result.verdict.confidence),
        }
        | ({"basis": result.verdict.basis} if result.verdict.basis else {}),  # fmt: skip
    )


def _conclude(ctx: Run, resumed: int) -> Summary:
    settings = ctx.settings
    every = store.records(ctx.study)
    attempts, tuning = _attempts(every, settings.objective), _tuning(settings)
    walks = tuple(policy.walk(settings.rungs, p.name, attempts, tuning) for p in settings.profiles)
    pick, row = best_of(every, settings)
    if row is not None:
        results.write_best(ctx.paths.best_tsv, [row])
    return Summary(settings.case.name, pick, row, walks, tuple(every), resumed)


def best_of(every: list[TrialRecord], settings: Settings) -> tuple[TrialRecord | None, dict[str, str] | None]:
    """The case's pick and its best_by_case.tsv row (class and action included), from its records alone: what a
    sweep writes at its end, and what `ladder.merge --best-from-storage` rebuilds from storage."""
    records = [r for r in every if r.phase is Phase.PROBE]
    choice = rules.choose_best(records, settings.objective)
    pick = rules.confirmed(every, settings.objective) if settings.confirm_s else choice.item if choice else None
    tie = _tie(choice, settings.objective) if choice and pick is choice.item else ""
    row_source = pick or rules.fallback(records)
    row = None
    if row_source is not None:
        measured = {r.variant for r in records if r.status is Status.OK}
        row = classified(results.best_row(row_source, len(records)) | ({"tie": tie} if tie else {}), settings, measured)
    return pick, row


def _tie(choice: rules.Choice[TrialRecord], objective: str) -> str:
    """What the pick was tied with, within the objective's measured noise, and what broke the tie."""
    if not choice.tied:
        return ""
    others = ", ".join(f"{r.variant} e{r.num_envs}" for r in choice.tied)
    return f"tied on {objective} with {others} (within the measured noise); broken by {choice.by}"


def classified(row: dict[str, str], settings: Settings, measured: Collection[str] = ()) -> dict[str, str]:
    """The best row with the decision table's class and action (agreeing with the profiles the walk measured)."""
    cls, action = decide.classify_row(row, settings.decide, measured)
    return row | {"class": str(cls), "action": action}


def _attempts(records: list[TrialRecord], objective: str) -> list[policy.Attempt]:
    return [policy.Attempt(*fact) for fact in rules.attempts(records, objective)]


def _preflight(settings: Settings, machine: Machine) -> preflight.Preflight | None:
    if machine.device != "cuda":
        return None
    conf = settings.preflight
    rules = preflight.Rules(preflight.parse_policy(conf.policy), conf.mem_slack_mb, conf.timeout_s, conf.poll_s)
    return preflight.Preflight.with_nvml(rules)


def _tuning(settings: Settings) -> policy.Tuning:
    descend = settings.objective not in GROWS_WITH_ENVS
    return policy.Tuning(settings.strategy, settings.mem_headroom_frac, settings.mem_margin_frac,
                         descend, settings.descent_gain_max, settings.objective is Objective.SAMPLES_PER_S,
                         settings.descent_short, settings.descent_idle_util,
                         rules.noise_of(settings.objective))  # fmt: skip


def _sampler_factory(machine: Machine, held: lease.Lease | None, trial_id: str) -> Callable[[int], Sampler]:
    """NVML on the trial's GPUs (the leased ones where leased) with host figures alongside; host alone on CPU."""
    gpus = (list(held.devices) if held else list(machine.gpus)) if machine.device == "cuda" else []
    return lambda pid: sampler_for(gpus, pid, trial_id)


def _mem_limit(settings: Settings) -> int | None:
    gb = settings.workload.host_mem_limit_gb
    return int(gb * 1024**3) if gb else None


def _timing(started: str, result: trial.Result) -> dict[str, str]:
    return {"started_at": started, "finished_at": _utc_now(), "duration_s": str(result.duration_s),
            "host": socket.gethostname()}  # fmt: skip


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
