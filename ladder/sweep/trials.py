"""One trial of the sweep, around its run: its spec and recorded info, the devices it leases and the preflight
before it, the measure settings of its phase, its samplers and memory cap, its repeat verdict, and its record."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path

from ladder.core import ballast, walk
from ladder.core.measure.rates import Rate
from ladder.core.measure.repeats import repeat_verdict
from ladder.core.records import Phase, TrialRecord
from ladder.core.spec import TrialSpec
from ladder.runner import lease, preflight, trial
from ladder.runner.ballast import Holder
from ladder.runner.machine import Machine, emulation
from ladder.runner.monitor import Sampler
from ladder.runner.nvml import sampler_for
from ladder.settings.config import MeasureConf, Settings
from ladder.storage import reuse
from ladder.sweep import identity
from ladder.sweep.context import Run, plan

Held = lease.Lease | None  # the devices a trial holds (None: the machine has no pool to lease from)


def spec(run: Run, decision: walk.Decision, trial_dir: Path, port: int, held: Held) -> TrialSpec:
    """The trial as it launches: planned in its folder, on its port, seeing only its leased devices."""
    planned = plan(run, decision, trial_dir, port)
    if held is None:
        return planned
    return dataclasses.replace(planned, env={**planned.env, **lease.lease_env(held)})  # leased GPUs as cuda:0..n-1


def info(run: Run, decision: walk.Decision, planned: TrialSpec, trial_dir: Path, held: Held) -> dict[str, str]:
    """What a trial records beside its outcome: why it ran, what it is (its identity for reuse), where, on what."""
    return {
        "devices": ",".join(str(d) for d in held.devices) if held else "",
        "why": decision.why,
        "step": str(decision.step),
        "knob": run.settings.knob,
        "config_sha": reuse.fingerprint(identity.placeholder_spec(run, decision.profile, decision.rung)),
        "shape_sha": reuse.fingerprint(identity.bare_spec(run, decision.profile, decision.rung)),
        **run.machine.describe,
        **planned.info,
        **identity.conditions(run),
        "sweep": run.paths.sweep,
        "trial_dir": run.paths.relative(trial_dir),
    }


@contextlib.contextmanager
def leased(run: Run) -> Iterator[Held]:
    """The trial's devices, held from before its decision to after its reap; none where the machine has no pool."""
    if not run.machine.pool:
        yield None
        return
    kind = lease.DeviceKind.GPU if run.machine.device == "cuda" else lease.DeviceKind.CPU
    w = run.settings.workload
    folder = Path(w.lease_dir) if w.lease_dir else lease.DEFAULT_DIR
    label = f"{run.settings.case.name} of sweep {run.paths.sweep} (pid {os.getpid()})"
    with lease.acquire(run.machine.nproc, run.machine.pool, folder, w.lease_timeout_s, kind, label) as held:
        yield held


def gate(settings: Settings, machine: Machine) -> preflight.Preflight | None:
    """The check before each launch on GPUs (no foreign process, memory back near its baseline); none on CPU."""
    if machine.device != "cuda":
        return None
    conf = settings.preflight
    rules = preflight.Rules(preflight.parse_policy(conf.policy), conf.mem_slack_mb, conf.timeout_s, conf.poll_s)
    return preflight.Preflight.with_nvml(rules)


def measure_conf(settings: Settings, phase: Phase) -> MeasureConf:
    """A probe measures as `measure.*` say; a confirmation as `confirmation` says."""
    return settings.measure if phase is Phase.PROBE else confirmation(settings.measure, settings.confirm_s)


def confirmation(m: MeasureConf, confirm_s: float) -> MeasureConf:
    """A confirmation's window is `confirm_s` long, and its time limit grows to fit it. A wide interval does not
    extend it (`extend_unstable`): the pick is then flagged unstable in `confirm_s`, not confirmed in twice that.
    Only a memory peak still rising at `confirm_s` holds it open (the record says `window_held`)."""
    limit = max(m.trial_timeout_s, confirm_s + m.startup_timeout_s + m.warmup_timeout_s)
    budget = max(m.budget_s, limit)
    return dataclasses.replace(m, window_s=confirm_s, trial_timeout_s=limit, budget_s=budget, extend_unstable=False)


def gpus(machine: Machine, held: Held) -> list[int]:
    """The trial's GPUs by NVML index: the leased ones where leased, else the machine's; none on CPU."""
    return (list(held.devices) if held else list(machine.gpus)) if machine.device == "cuda" else []


def sampler_factory(
    machine: Machine, held: Held, trial_id: str, ballast_mb: Mapping[int, float] | None = None
) -> Callable[[int], Sampler]:
    """NVML on the trial's GPUs with host figures alongside, its memory net of any ballast; host alone on CPU."""
    devices = gpus(machine, held)
    return lambda pid: sampler_for(devices, pid, trial_id, ballast_mb=ballast_mb)


@contextlib.contextmanager
def ballast_held(run: Run, held: Held) -> Iterator[dict[int, float]]:
    """The ballast on the trial's GPUs while its trials run (`ladder.runner.ballast`), where the emulated card is
    held by one: what it holds per GPU (MiB, by NVML index); {} where none is. A holder that cannot make the card
    raises `LaunchError` before any trial is claimed; it is stopped however the trials end."""
    if emulation(run.settings, run.machine.device) is not ballast.Mode.BALLAST:
        yield {}
        return
    card = card_mb(run)
    assert card is not None
    holder = Holder.start(gpus(run.machine, held), card, os.environ)
    try:
        yield holder.held_mb
    finally:
        holder.stop()


def ballast_figures(run: Run, ballast_mb: Mapping[int, float]) -> dict[str, float]:
    """What a trial under a ballast records beside its figures (which the sampler took net of it)."""
    return ballast.figures(ballast_mb, card_mb(run) or 0.0)


def card_mb(run: Run) -> float | None:
    """The GPU memory a trial's peak must stay clear of (MiB), where it runs on a GPU: the card a ballast
    emulates, or the real one where none is emulated; None where the proxy caps itself (its progress lines say
    the card and its use) and on CPU."""
    if run.machine.device != "cuda":
        return None
    how = emulation(run.settings, run.machine.device)
    if how is ballast.Mode.BALLAST:
        return (run.settings.workload.emulate_gpu_mem_gb or 0.0) * 1024
    total = run.machine.describe.get("gpu_mem_total", "")
    return float(total) if total and how is ballast.Mode.NONE else None


def mem_limit(settings: Settings) -> int | None:
    """The whole trial's memory cgroup cap in bytes (`workload.host_mem_limit_gb`), None for none."""
    gb = settings.workload.host_mem_limit_gb
    return int(gb * 1024**3) if gb else None


def with_repeats(result: trial.Result, rates: list[Rate], m: MeasureConf) -> trial.Result:
    """The result carrying the repeat verdict over every repeat of its configuration so far (this one included)."""
    rate = Rate.of(result.figures)
    if rate is not None:
        rates.append(rate)
    verdict = repeat_verdict(rates, m.max_repeat_spread, m.max_ci_frac)
    return dataclasses.replace(result, figures={**result.figures, **verdict.figures(), "repeats": float(len(rates))})


def record(
    settings: Settings, decision: walk.Decision, phase: Phase, result: trial.Result, info: dict[str, str]
) -> TrialRecord:
    source = result.source or ("nvml" if info.get("device") == "cuda" else "host")
    extra = {
        "source": source,
        "exit_code": str(result.exit_code),
        "leftovers": str(result.leftovers),
        "confidence": str(result.verdict.confidence),
    }
    return TrialRecord(
        case=settings.case.name,
        method=settings.case.method,
        profile=decision.profile,
        num_envs=decision.rung,
        phase=phase,
        status=result.verdict.status,
        reason=result.verdict.reason,
        evidence=result.verdict.evidence,
        figures=result.figures,
        info={**info, **extra} | ({"basis": result.verdict.basis} if result.verdict.basis else {}),
    )


def timing(started: str, result: trial.Result) -> dict[str, str]:
    """What a trial's record says of when and where it ran (`started`: `utc_now()` at its launch)."""
    return {
        "started_at": started,
        "finished_at": utc_now(),
        "duration_s": str(result.duration_s),
        "host": socket.gethostname(),
    }


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
