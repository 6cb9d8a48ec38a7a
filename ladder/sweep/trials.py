"""One trial of the sweep, around its run: its spec and recorded info, the devices it leases and the preflight
before it, the measure settings of its phase, its samplers and memory cap, its repeat verdict, and its record."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ladder.core import policy, stats
from ladder.core.records import Phase, TrialRecord
from ladder.core.spec import TrialSpec
from ladder.runner import lease, preflight, trial
from ladder.runner.machine import Machine
from ladder.runner.monitor import Sampler, sampler_for
from ladder.settings.config import MeasureConf, Settings
from ladder.storage import reuse
from ladder.sweep import identity
from ladder.sweep.context import Run, plan

Held = lease.Lease | None  # the devices a trial holds (None: the machine has no pool to lease from)


def spec(run: Run, decision: policy.Decision, trial_dir: Path, port: int, held: Held) -> TrialSpec:
    """The trial as it launches: planned in its folder, on its port, seeing only its leased devices."""
    planned = plan(run, decision, trial_dir, port)
    if held is None:
        return planned
    return dataclasses.replace(planned, env={**planned.env, **lease.lease_env(held)})  # leased GPUs as cuda:0..n-1


def info(run: Run, decision: policy.Decision, planned: TrialSpec, trial_dir: Path, held: Held) -> dict[str, str]:
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


def sampler_factory(machine: Machine, held: Held, trial_id: str) -> Callable[[int], Sampler]:
    """NVML on the trial's GPUs (the leased ones where leased) with host figures alongside; host alone on CPU."""
    gpus = (list(held.devices) if held else list(machine.gpus)) if machine.device == "cuda" else []
    return lambda pid: sampler_for(gpus, pid, trial_id)


def card_mb(run: Run) -> float | None:
    """The real GPU's memory a trial's peak must stay clear of (MiB), where it runs on one with no emulated card (an
    emulated card's own use and size come from the trainer's progress lines)."""
    if run.machine.device != "cuda" or identity.card_gb(run):
        return None
    total = run.machine.describe.get("gpu_mem_total", "")
    return float(total) if total else None


def mem_limit(settings: Settings) -> int | None:
    """The whole trial's memory cgroup cap in bytes (`workload.host_mem_limit_gb`), None for none."""
    gb = settings.workload.host_mem_limit_gb
    return int(gb * 1024**3) if gb else None


def with_repeats(result: trial.Result, rates: list[stats.Rate], m: MeasureConf) -> trial.Result:
    """The result carrying the repeat verdict over every repeat of its configuration so far (this one included)."""
    rate = stats.Rate.of(result.figures)
    if rate is not None:
        rates.append(rate)
    verdict = stats.repeat_verdict(rates, m.max_repeat_spread, m.max_ci_frac)
    return dataclasses.replace(result, figures={**result.figures, **verdict.figures(), "repeats": float(len(rates))})


def record(
    settings: Settings, decision: policy.Decision, phase: Phase, result: trial.Result, info: dict[str, str]
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
