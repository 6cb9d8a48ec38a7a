"""The placement phase (`placement=measure`): once the walk and any confirmation are done, the pick's profile as N
one-device jobs side by side, against the pick as one job over N devices (its window is measured already).

Each job holds one of the trial's leased devices (on CPU, its own share of the cores, which its ranks are pinned
to), its own port and its own trial (phase `placement`); they start together and are measured over the pick's
window length; the failure of one is its own verdict and stops its twins; every process of each is reaped by its
trial. The answer is `ladder.core.placement`'s, from the stored records, so a resumed sweep never measures it twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence

from ladder.core import outcome, pick, walk
from ladder.core import placement as answer
from ladder.core.caseclass import CaseClass
from ladder.core.records import Phase, Status, TrialRecord
from ladder.runner import launch, lease, ranks, trial
from ladder.settings import catalog
from ladder.storage import studies, tsv
from ladder.sweep import identity, trials
from ladder.sweep.context import Run

log = logging.getLogger(__name__)
JOIN_S = 0.2  # how often the sweep looks whether the twins have ended (Ctrl-C is taken between looks)


class TwinStopped(KeyboardInterrupt):
    """Raised in a twin's watch (its tick) to stop it, as Ctrl-C would: its trial ends `interrupted`, reaped."""


def wanted(ctx: Run, records: Sequence[TrialRecord]) -> TrialRecord | None:
    """The pick to measure the placement of, where the setting asks for it: `measure`, or `auto` on GPUs for a
    throughput-bound pick; never with one device a trial (`off`, or N = 1). None otherwise."""
    mode, machine = ctx.settings.placement, ctx.machine
    if mode is answer.Mode.OFF or machine.nproc < 2:
        return None
    found = outcome.case_outcome(records, ctx.settings.objective, bool(ctx.settings.confirm_s), ctx.settings.decide)
    if found.pick is None or answer.SPS not in found.pick.figures:
        return None
    if mode is answer.Mode.AUTO and not (machine.device == "cuda" and _throughput(found.row)):
        return None
    return found.pick


def _throughput(row: Mapping[str, str] | None) -> bool:
    return row is not None and row.get("class") == CaseClass.THROUGHPUT


def next_decision(ctx: Run, records: Sequence[TrialRecord]) -> walk.Decision | None:
    """The next side-by-side launch, or None: not asked for, measured already, or nothing left to run."""
    if (chosen := wanted(ctx, records)) is None:
        return None
    rung = answer.next_rung(answer.sets(records, chosen), chosen.num_envs, ctx.settings.rungs)
    if rung is None:
        return None
    n = ctx.machine.nproc
    why = f"placement: {n} one-device jobs side by side against the pick ({chosen.profile} e{chosen.num_envs})"
    return walk.Decision(chosen.profile, rung, why, step=walk.Step.PLACEMENT)


def shares(ctx: Run, held: trials.Held) -> list[lease.Lease]:
    """One device for each job: the trial's leased ones (its GPUs, or its CPU slots), else the machine's GPUs, else
    the cores this process may use, cut into even shares. Empty where there are fewer cores than jobs."""
    n, machine = ctx.machine.nproc, ctx.machine
    kind = lease.DeviceKind.GPU if machine.device == "cuda" else lease.DeviceKind.CPU
    if held is not None:
        return [lease.Lease(kind, (d,)) for d in held.devices]
    if machine.device == "cuda":
        return [lease.Lease(kind, (d,)) for d in machine.gpus[:n]]
    cut = ranks.shares(os.sched_getaffinity(0), n) or []
    return [lease.Lease(kind, tuple(sorted(part))) for part in cut]


def twin_run(ctx: Run, share: lease.Lease) -> Run:
    """The sweep as one one-device job sees it: one rank, on its own device."""
    m = ctx.machine
    gpus = share.devices if m.device == "cuda" else ()
    return dataclasses.replace(
        ctx, machine=dataclasses.replace(m, nproc=1, gpus=gpus, describe=m.describe | {"n_gpus": "1"})
    )


@dataclasses.dataclass
class Twin:
    """One side-by-side job: its run, trial and claim; its result once it ended."""

    run: Run
    share: lease.Lease
    request: trial.TrialRequest
    info: dict[str, str]
    claim: studies.Claim | None = None
    result: trial.Result | None = None
    error: BaseException | None = None
    started: str = ""


def run_set(
    ctx: Run, decision: walk.Decision, records: Sequence[TrialRecord], held: trials.Held, ballast_mb: dict[int, float]
) -> None:
    """Claim, run side by side and record one launch of the N one-device jobs (`decision`: their profile and rung)."""
    chosen = wanted(ctx, records)
    parts = shares(ctx, held)
    if chosen is None or len(parts) < ctx.machine.nproc:
        log.warning("placement: fewer devices than %d jobs to put one on each; not measured", ctx.machine.nproc)
        return
    twins = _plan(ctx, decision, chosen, records, parts)
    if not _claim(ctx, decision, twins):
        return
    for _ in twins:
        ctx.view.trial_started(decision.profile, decision.rung)
    with contextlib.ExitStack() as beats:
        for t in twins:
            assert t.claim is not None and ctx.study is not None
            beats.enter_context(studies.heartbeat(ctx.study, t.claim, ctx.settings.heartbeat_s))
        interrupted = _side_by_side(ctx, twins, ballast_mb)
    _record(ctx, decision, twins)
    if interrupted:
        raise KeyboardInterrupt


def _plan(
    ctx: Run, decision: walk.Decision, chosen: TrialRecord, records: Sequence[TrialRecord], parts: list[lease.Lease]
) -> list[Twin]:
    """Each job's trial: its folder, port, devices and request; measured like the pick (its phase's window)."""
    s, set_id, ports = ctx.settings, uuid.uuid4().hex[:8], _ports(len(parts))
    done = sum(1 for r in records if r.phase is Phase.PLACEMENT and r.num_envs == decision.rung)
    limit = trials.mem_limit(s)
    out = []
    for i, (share, port) in enumerate(zip(parts, ports, strict=True)):
        run = twin_run(ctx, share)
        folder = identity.fresh_trial_dir(
            ctx.paths, s.case.name, decision.profile, decision.rung, Phase.PLACEMENT, s.knob, done + i + 1
        )
        folder.mkdir(parents=True, exist_ok=True)  # taken: the next twin's folder is another
        spec = trials.spec(run, decision, folder, port, share)
        info = trials.info(run, decision, spec, folder, share) | {
            answer.OF: answer.key_of(chosen),
            answer.SET: set_id,
            answer.TWIN: str(i),
            answer.TWINS: str(len(parts)),
        }
        request = trial.TrialRequest(
            spec,
            folder,
            uuid.uuid4().hex[:12],
            trials.measure_conf(s, chosen.phase),
            mem_limit_bytes=limit // len(parts) if limit else None,  # the host's memory, shared by the jobs
            card_mb=trials.card_mb(ctx),
            cadence_s=s.measure.window_s,
        )
        out.append(Twin(run, share, request, info))
    return out


def _ports(n: int) -> list[int]:
    """`n` distinct free ports (a freed port may be handed out twice in a row)."""
    found: list[int] = []
    while len(found) < n:
        if (port := launch.free_port()) not in found:
            found.append(port)
    return found


def _claim(ctx: Run, decision: walk.Decision, twins: list[Twin]) -> bool:
    """The first twin is claimed as any trial is (it takes the case's turn); the others begin beside it."""
    s, study = ctx.settings, ctx.study
    assert study is not None
    known = catalog.known("profile")
    for i, t in enumerate(twins):
        attrs = {"case": s.case.name, "method": s.case.method, "phase": str(Phase.PLACEMENT), "info": t.info}
        attrs["trial_id"] = t.request.trial_id
        if i == 0:
            t.claim = ctx.turns.claim(decision.profile, decision.rung, known, attrs)
            if t.claim is None:  # another process's trial came first: decide again after its outcome
                return False
        else:
            t.claim = studies.begin(study, decision.profile, decision.rung, known, attrs)
        ctx.shown.add(t.claim.number)
    return True


def _side_by_side(ctx: Run, twins: list[Twin], ballast_mb: dict[int, float]) -> bool:
    """Run the twins together, each in a thread of its own; True where the sweep was interrupted meanwhile. The wait
    is on each twin's own event, not on `Thread.join`, which a KeyboardInterrupt can leave reporting a live thread
    as ended."""
    stop, ended = threading.Event(), [threading.Event() for _ in twins]
    for i, t in enumerate(twins):
        threading.Thread(target=_one, args=(ctx, t, i, stop, ended[i], ballast_mb), daemon=True).start()
    interrupted = False
    while not all(e.is_set() for e in ended):
        try:
            for e in ended:
                e.wait(JOIN_S)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every twin is stopped and reaped, then it goes on up
            interrupted = True
            stop.set()
    if errors := [t.error for t in twins if t.error is not None]:
        raise errors[0]
    return interrupted


def _one(
    ctx: Run, t: Twin, i: int, stop: threading.Event, ended: threading.Event, ballast_mb: Mapping[int, float]
) -> None:
    """One twin's trial (its thread): it stops as soon as `stop` is set, and sets it where it failed itself."""
    mine = {d: mb for d, mb in ballast_mb.items() if d in t.share.devices}
    sampler = trials.sampler_factory(t.run.machine, t.share, t.request.trial_id, mine)
    t.started = trials.utc_now()
    try:
        t.result = trial.run(t.request, sampler, _ticker(ctx, i, stop))
        if t.result.verdict.status is not Status.OK:
            stop.set()
    except BaseException as e:  # noqa: BLE001 - it goes on up in the sweep's thread, once every twin has ended
        t.error = e
        stop.set()
    finally:
        ended.set()


def _ticker(ctx: Run, i: int, stop: threading.Event) -> Callable[[trial.Tick], None]:
    def tick(now: trial.Tick) -> None:
        if stop.is_set():
            raise TwinStopped
        if i == 0:  # the live view follows one trial: the first twin stands for the set
            ctx.view.tick(now)

    return tick


def _record(ctx: Run, decision: walk.Decision, twins: list[Twin]) -> None:
    """Each twin's record stored; one stopped for another's failure says so (and is not a failure of its own)."""
    s, study = ctx.settings, ctx.study
    assert study is not None
    failed = next(
        (t for t in twins if t.result and t.result.verdict.status not in (Status.OK, Status.INTERRUPTED)), None
    )
    for t in twins:
        if t.result is None or t.claim is None:
            continue
        result, info = t.result, t.info | trials.timing(t.started, t.result)
        if failed is not None and t is not failed and result.verdict.status is Status.INTERRUPTED:
            assert failed.claim is not None and failed.result is not None
            said = f"stopped: its twin, trial {failed.claim.number}, ended {failed.result.verdict.status}"
            result = dataclasses.replace(result, verdict=dataclasses.replace(result.verdict, evidence=said))
            info |= {answer.STOPPED: str(failed.claim.number)}
        record = trials.record(s, decision, Phase.PLACEMENT, result, info)
        studies.finish(study, t.claim, record, pick.objective_value(record, s.objective))
        ctx.view.trial_finished(record)
    tsv.write_trials(ctx.paths.trials_tsv, lambda: studies.sweep_records(study.storage, ctx.paths.sweep))
