"""Trials of earlier sweeps that answer for trials this sweep would launch: reused, not rerun.

An earlier trial answers for one of ours when both are the same case, profile and num_envs, launched with the
same configuration (argv, environment and files, less the trial's folder and port: `fingerprint`) on the same
hardware and code (`MACHINE_KEYS` of the machine's description; on a CPU also the same host). Only facts that
do not depend on the moment are reused: a probe that ran (`ok`: it fits, and its figures stand) and a step-down
failure (`oom_or_nccl`: it does not fit). Errors, timeouts, retries and interrupted trials run again. Where
earlier sweeps disagree on a rung (it fitted once and failed once) the failure wins: a rung that ran out of
memory once is not a stable one.

`fingerprint` and `pick` are pure; `earlier_records` reads other sweeps' storage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

import optuna
from optuna.storages import BaseStorage

from ladder import store
from ladder.records import Phase, Status, TrialRecord
from ladder.workloads.spec import TrialSpec

log = logging.getLogger(__name__)

MACHINE_KEYS = ("device", "gpu_name", "gpu_mem_total", "n_gpus", "driver", "torch", "workload_version")
REUSABLE = frozenset({Status.OK, Status.OOM_OR_NCCL})
TRIAL_DIR = "/ladder-trial"  # what stands for the trial's folder in a fingerprint (plan with it, port 0)

Wanted = Mapping[tuple[str, int], str]  # (profile, num_envs) -> the identity a reused trial must have


# ---------------------------------------------------------------- pure


def fingerprint(spec: TrialSpec) -> str:
    """The trial's configuration, as a short hash: argv, environment and files of a spec planned with the
    placeholder folder `TRIAL_DIR` and port 0."""
    body = json.dumps({"argv": list(spec.argv), "env": dict(sorted(spec.env.items())), "files": spec.files,
                       "cwd": spec.cwd}, sort_keys=True)  # fmt: skip
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def identity(case: str, config: str, describe: Mapping[str, str]) -> str:
    """What must match, beyond profile and num_envs: case, configuration and machine (and host, on a CPU)."""
    keys = MACHINE_KEYS + (("host",) if describe.get("device", "cpu") == "cpu" else ())
    return json.dumps([case, config, *(describe.get(k, "") for k in keys)])


def identity_of(record: TrialRecord) -> str:
    return identity(record.case, record.info.get("config_sha", ""), record.info)


def pick(earlier: Iterable[TrialRecord], wanted: Wanted, have: set[tuple[str, int]]) -> list[TrialRecord]:
    """The earlier trials to reuse: one per wanted (profile, num_envs) that this sweep has not run, with the
    wanted identity and a reusable outcome; a failure beats a success, then the newest wins."""
    chosen: dict[tuple[str, int], TrialRecord] = {}
    for record in earlier:
        key = (record.variant, record.num_envs)
        if key in have or wanted.get(key) != identity_of(record) or not _reusable(record):
            continue
        if key not in chosen or _rank(record) > _rank(chosen[key]):
            chosen[key] = record
    return [chosen[k] for k in sorted(chosen, key=lambda k: (k[0], -k[1]))]


def _reusable(record: TrialRecord) -> bool:
    if record.info.get("reused_from"):
        return False  # a copy: its original is reused, if still there
    if record.phase is Phase.PROBE:
        return record.status in REUSABLE
    return record.status is Status.OOM_OR_NCCL  # a confirmation that failed: the rung does not hold


def _rank(record: TrialRecord) -> tuple[bool, str]:
    return record.status is not Status.OK, record.info.get("finished_at", "")


def as_reused(record: TrialRecord, sweep: str) -> TrialRecord:
    """The copy this sweep stores: the same outcome and figures, saying where it came from."""
    old = record.info.get("sweep", "?")
    origin = f"{old}#{record.number}"
    info = {**record.info, "sweep": sweep, "reused_from": origin, "why": f"reused from {origin}"}
    if record.info.get("trial_dir"):  # relative to this sweep's folder, like every trial_dir: the original's files
        info["trial_dir"] = f"../{store.SWEEP_PREFIX}{old}/{record.info['trial_dir']}"
    return dataclasses.replace(record, phase=Phase.PROBE, figures=dict(record.figures), info=info)


# ---------------------------------------------------------------- effects


def earlier_records(storage: BaseStorage, case: str, sweep: str, output_root: Path | None) -> list[TrialRecord]:
    """The case's finished trials in other sweeps: in this sweep's storage (a shared database holds every
    sweep), and, where each sweep keeps its own journal, in the sibling sweep folders under `output_root`."""
    found = _case_records(storage, case, skip=store.study_name(case, sweep))
    if output_root is not None and output_root.is_dir():
        for folder in sorted(output_root.iterdir()):
            journal = folder / store.JOURNAL
            if not journal.is_file() or folder.name == store.SWEEP_PREFIX + sweep:
                continue
            try:
                found += _case_records(store.open_storage(None, folder), case, skip="")
            except Exception as exc:  # noqa: BLE001 - another sweep's unreadable journal costs a rerun, not the sweep
                log.warning("not reusing trials from %s: %s", journal, exc)
    return found


def _case_records(storage: BaseStorage, case: str, skip: str) -> list[TrialRecord]:
    names = [n for n in optuna.get_all_study_names(storage) if n.endswith(f"/{case}") and n != skip]
    return [r for n in names for r in store.records(optuna.load_study(study_name=n, storage=storage))]
