"""The sweep: the one module that composes the others for a case.

policy (next profile and rung) → workload (trial spec) → trial (launch, watch, stop, classify, measure) →
store (Optuna trial) → results (trials.tsv after every trial, best_by_case.tsv at the end).
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import optuna

from ladder import launch, policy, preflight, results, store, trial
from ladder.config import Settings
from ladder.monitor import HostSampler, NvmlSampler, Sampler
from ladder.records import Phase, Status, TrialRecord, Verdict
from ladder.view import View
from ladder.workloads.builtin import Placement, plan_proxy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Machine:
    """What the sweep found to run on."""

    device: str  # cpu or cuda
    gpus: tuple[int, ...]  # NVML indices of the GPUs a trial uses (empty on cpu)
    nproc: int  # ranks per trial
    python: str  # interpreter for torchrun and the trainer
    describe: dict[str, str]  # gpu_name, gpu_mem_total, n_gpus, driver, host, ...


@dataclass(frozen=True)
class Paths:
    sweep: str
    sweep_dir: Path

    @staticmethod
    def for_settings(settings: Settings, now: datetime) -> Paths:
        name = settings.sweep or now.strftime("%Y%m%d_%H%M%S")
        return Paths(name, Path(settings.output_root) / f"case_gpu_bench_{name}")

    @property
    def best_tsv(self) -> Path:
        return self.sweep_dir / "best_by_case.tsv"

    @property
    def trials_tsv(self) -> Path:
        return self.sweep_dir / "trials.tsv"

    def trial_dir(self, case: str, variant: str, num_envs: int, phase: Phase, n: int) -> Path:
        return self.sweep_dir / "trials" / case / f"{variant}_e{num_envs}_{phase}_{n}"


@dataclass(frozen=True)
class Summary:
    case: str
    best: TrialRecord | None
    walks: tuple[policy.Walk, ...]
    records: tuple[TrialRecord, ...]
    resumed: int  # finished trials found in storage and not run again


def run(settings: Settings, paths: Paths, machine: Machine, view: View) -> Summary:
    storage = store.open_storage(settings.storage, paths.sweep_dir)
    study = store.open_study(storage, settings.case.name)
    if abandoned := store.mark_abandoned(study):
        log.info("%d trial(s) left running by a stopped sweep are marked interrupted and will run again", abandoned)
    resumed = sum(1 for r in store.records(study) if r.status is not Status.INTERRUPTED)
    profiles = tuple(p.name for p in settings.profiles)
    tuning = _tuning(settings)
    gate = _preflight(settings, machine)
    while (nxt := policy.next_trial(settings.rungs, profiles, _attempts(store.records(study)), tuning)) is not None:
        if gate is not None:
            gate.before_launch(machine.gpus)  # a refusal raises LaunchError, naming the processes and the fix
        view.trial_started(nxt.profile, nxt.rung)
        record = _run_one(settings, paths, machine, study, view, nxt)
        view.trial_finished(record)
        results.write_trials(paths.trials_tsv, _all_records(storage))
        if record.status is Status.INTERRUPTED:
            raise KeyboardInterrupt
    return _conclude(settings, paths, study, resumed)


def _run_one(
    settings: Settings, paths: Paths, machine: Machine, study: optuna.Study, view: View, decision: policy.Decision
) -> TrialRecord:
    case, phase, variant, num_envs = settings.case, Phase.PROBE, decision.profile, decision.rung
    n = 1 + sum(1 for r in store.records(study) if (r.variant, r.num_envs, r.phase) == (variant, num_envs, phase))
    trial_dir = paths.trial_dir(case.name, variant, num_envs, phase, n)
    profile = next(p for p in settings.profiles if p.name == variant)
    place = Placement(machine.device, machine.nproc, launch.free_port(), machine.python)
    spec = plan_proxy(case, profile, num_envs, settings.workload, place, str(trial_dir),
                      settings.measure.trial_timeout_s, settings.nccl_env)  # fmt: skip
    info = {
        "why": decision.why,
        **machine.describe,
        **spec.info,
        "sweep": paths.sweep,
        "trial_dir": str(trial_dir.relative_to(paths.sweep_dir)),
    }
    attrs = {"case": case.name, "method": case.method, "phase": str(phase), "info": info}
    otrial = store.begin(study, variant, num_envs, _variants(settings), attrs)
    started = _utc_now()
    log.debug("start %s %s e%d (%s)", case.name, variant, num_envs, trial_dir)
    trial_id = uuid.uuid4().hex[:12]
    sampler = _sampler_factory(machine)
    result = trial.run(spec, trial_dir, trial_id, settings.measure, sampler, _mem_limit(settings), view.tick)
    record = _record(settings, variant, num_envs, phase, result, info | _timing(started, result))
    store.finish(study, otrial, record, results.objective_value(record, settings.objective))
    return record


def _record(
    settings: Settings, variant: str, num_envs: int, phase: Phase, result: trial.Result, info: dict[str, str]
) -> TrialRecord:
    verdict: Verdict = result.verdict
    source = "nvml" if info.get("device") == "cuda" else "host"
    return TrialRecord(
        case=settings.case.name,
        method=settings.case.method,
        variant=variant,
        num_envs=num_envs,
        phase=phase,
        status=verdict.status,
        reason=verdict.reason,
        evidence=verdict.evidence,
        figures=result.figures,
        info={**info, "source": source, "exit_code": str(result.exit_code), "leftovers": str(result.leftovers)},
    )


def _conclude(settings: Settings, paths: Paths, study: optuna.Study, resumed: int) -> Summary:
    records = [r for r in store.records(study) if r.phase is Phase.PROBE]
    attempts = _attempts(records)
    walks = tuple(policy.walk(settings.rungs, p.name, attempts) for p in settings.profiles)
    pick = results.best(records, settings.objective)
    row_source = pick or _last_failure(records)
    if row_source is not None:
        results.write_best(paths.best_tsv, [results.best_row(row_source, len(records))])
    return Summary(settings.case.name, pick, walks, tuple(records), resumed)


def _last_failure(records: list[TrialRecord]) -> TrialRecord | None:
    """With no rung fitting, the case's row says how its lowest attempt ended (the seed keeps such rows)."""
    failed = [r for r in records if r.status is not Status.INTERRUPTED]
    return min(failed, key=lambda r: (r.num_envs, -r.number)) if failed else None


def _attempts(records: list[TrialRecord]) -> list[policy.Attempt]:
    return [policy.Attempt(r.variant, r.num_envs, r.status, mem_frac(r)) for r in records if r.phase is Phase.PROBE]


def mem_frac(record: TrialRecord) -> float | None:
    """Peak memory as a fraction of what the cap allows, in the cap's own units; None where they are unknown.

    The trainer's own figure (`cap_used_mb` against `cap_mb`: what an emulated card limits) comes first; NVML's
    device memory against the card's total serves on a real GPU. Host RSS against an emulated cap is not the same
    quantity, so it gives no fraction and the memory model stays off."""
    f = record.figures
    if f.get("cap_mb"):
        return f["cap_used_mb"] / f["cap_mb"] if "cap_used_mb" in f else None
    total = float(record.info.get("gpu_mem_total") or 0)
    mems = [v for k, v in f.items() if k.startswith("max_mem") and k[7:].isdigit()]
    if record.info.get("source") == "nvml" and total and mems and not record.info.get("emulate_gpu_mem_gb"):
        return max(mems) / total
    return None


def _preflight(settings: Settings, machine: Machine) -> preflight.Preflight | None:
    if machine.device != "cuda":
        return None
    conf = settings.preflight
    rules = preflight.Rules(preflight.parse_policy(conf.policy), conf.mem_slack_mb, conf.timeout_s, conf.poll_s)
    return preflight.Preflight.with_nvml(rules)


def _tuning(settings: Settings) -> policy.Tuning:
    return policy.Tuning(policy.Strategy(settings.strategy), settings.mem_headroom_frac, settings.mem_margin_frac)


def _all_records(storage: optuna.storages.BaseStorage) -> list[TrialRecord]:
    studies = optuna.get_all_study_names(storage)
    return [r for name in sorted(studies) for r in store.records(optuna.load_study(study_name=name, storage=storage))]


def _sampler_factory(machine: Machine) -> Callable[[int], Sampler]:
    if machine.device == "cuda":
        return lambda pid: NvmlSampler(list(machine.gpus))
    return HostSampler


def _mem_limit(settings: Settings) -> int | None:
    gb = settings.workload.host_mem_limit_gb
    return int(gb * 1024**3) if gb else None


def _variants(settings: Settings) -> tuple[str, ...]:
    return tuple(sorted({"default", "hiutil", *(p.name for p in settings.profiles)}))


def _timing(started: str, result: trial.Result) -> dict[str, str]:
    return {"started_at": started, "finished_at": _utc_now(), "duration_s": str(result.duration_s),
            "host": socket.gethostname()}  # fmt: skip


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
