"""The sweep's storage: one Optuna study per case, a trial per launch, records rebuilt from storage alone.

The embedded default is Optuna's journal file in the sweep folder; any Optuna storage URL works the same.
A trial is RUNNING in storage while it runs, with its owner (host, pid) as user attributes; when a sweep
starts, a RUNNING trial whose owner on this host is gone was left by a crash and is marked `interrupted`.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any

import optuna
import psutil
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from ladder.records import Phase, Reason, Status, TrialRecord

log = logging.getLogger(__name__)

NUM_ENVS = IntDistribution(1, 1 << 24)  # an int range, so a changed ladder never conflicts with stored trials


def open_storage(url: str | None, sweep_dir: Path) -> BaseStorage:
    if url:
        return optuna.storages.get_storage(url)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    return JournalStorage(JournalFileBackend(str(sweep_dir / "journal.log")))


def open_study(storage: BaseStorage, case: str) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name=case, storage=storage, direction="maximize", load_if_exists=True)


def begin(study: optuna.Study, variant: str, num_envs: int, variants: tuple[str, ...], attrs: dict[str, Any]) -> optuna.Trial:
    """A RUNNING trial with its params and owner, so a crash leaves a trace that resume can see."""
    study.enqueue_trial({"variant": variant, "num_envs": num_envs})
    trial = study.ask({"variant": CategoricalDistribution(variants), "num_envs": NUM_ENVS})
    owner = {"owner_host": socket.gethostname(), "owner_pid": os.getpid()}
    for key, value in {**attrs, **owner}.items():
        trial.set_user_attr(key, value)
    return trial


def finish(study: optuna.Study, trial: optuna.Trial, record: TrialRecord, value: float | None) -> None:
    for key, attr in _attrs(record).items():
        trial.set_user_attr(key, attr)
    if value is None:
        study.tell(trial, state=TrialState.FAIL)
    else:
        study.tell(trial, value)


def records(study: optuna.Study) -> list[TrialRecord]:
    """Every finished trial of the study, rebuilt from its stored attributes."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
    return [_record(t) for t in trials if "status" in t.user_attrs]


def mark_abandoned(study: optuna.Study) -> int:
    """RUNNING trials whose owner process on this host is gone become `interrupted`; returns how many."""
    storage = study._storage
    host = socket.gethostname()
    count = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        attrs = trial.user_attrs
        if attrs.get("owner_host") == host and not psutil.pid_exists(int(attrs.get("owner_pid", -1))):
            storage.set_trial_user_attr(trial._trial_id, "status", str(Status.INTERRUPTED))
            storage.set_trial_user_attr(trial._trial_id, "reason", str(Reason.INTERRUPTED))
            storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
            count += 1
    return count


def _attrs(record: TrialRecord) -> dict[str, Any]:
    return {
        "case": record.case,
        "method": record.method,
        "phase": str(record.phase),
        "status": str(record.status),
        "reason": str(record.reason),
        "evidence": record.evidence[:2000],
        "figures": dict(record.figures),
        "info": dict(record.info),
    }


def _record(trial: FrozenTrial) -> TrialRecord:
    attrs = trial.user_attrs
    return TrialRecord(
        case=str(attrs.get("case", "")),
        method=str(attrs.get("method", "")),
        variant=str(trial.params.get("variant", "")),
        num_envs=int(trial.params.get("num_envs", 0)),
        phase=Phase(attrs.get("phase", "probe")),
        status=Status(attrs["status"]),
        reason=Reason(attrs.get("reason", "")),
        evidence=str(attrs.get("evidence", "")),
        figures={k: float(v) for k, v in (attrs.get("figures") or {}).items()},
        info={k: str(v) for k, v in (attrs.get("info") or {}).items()},
        number=trial.number,
    )
