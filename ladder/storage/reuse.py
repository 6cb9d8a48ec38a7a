"""Trials of earlier sweeps that answer for trials this sweep would launch: reused, not rerun.

An earlier trial answers for ours when it is the same case, profile and rung, launched with the same configuration
(`fingerprint`) under the same conditions (`conditions`: caps and measure settings) on the same hardware and code.
Only facts that do not depend on the moment are reused (a fit with its figures, a step-down failure); a failure under
a larger emulated card carries to a smaller one (`carried`), and earlier windows' step noise fills a first window's
pool (`noise_windows`). docs/searching.md ("Reuse") has the rules and their reasons."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path

from optuna.storages import BaseStorage

from ladder.core.pick import weak
from ladder.core.records import Phase, Status, TrialRecord
from ladder.core.spec import TrialSpec
from ladder.failures.patterns import is_memory
from ladder.settings.config import MeasureConf, WorkloadConf
from ladder.storage import studies, sweeps

log = logging.getLogger(__name__)

# `trainer_version`: the trainer's own code and files where they are not ladder's (`ladder.runner.machine`)
MACHINE_KEYS = (
    "device",
    "gpu_name",
    "gpu_mem_total",
    "n_gpus",
    "driver",
    "torch",
    "workload_version",
    "trainer_version",
    "conditions",
)
REUSABLE = frozenset({Status.OK, Status.OOM_OR_NCCL})
IGNORED_MEASURE = frozenset({"kill_grace_s"})  # how long a stop may take changes no outcome
TRIAL_DIR = "/ladder-trial"  # what stands for the trial's folder in a fingerprint (plan with it, port 0)

Wanted = Mapping[tuple[str, int], str]  # (profile, num_envs) -> the identity a reused trial must have
Shapes = Mapping[tuple[str, int], str]  # (profile, num_envs) -> the shape a carried failure must have (`shape`)
# the machine less the card (`gpu_mem_total` is the emulated card where one is) and the conditions, with the host cap
SHAPE_KEYS = tuple(k for k in MACHINE_KEYS if k not in ("conditions", "gpu_mem_total")) + ("host_mem_limit_gb",)
# what must match for a window's step noise to speak for ours: the trainer, its ranks, the hardware, code and host
NOISE_KEYS = (
    "workload",
    "nproc",
    "device",
    "gpu_name",
    "n_gpus",
    "driver",
    "torch",
    "workload_version",
    "trainer_version",
    "host",
)


# ---------------------------------------------------------------- pure


def fingerprint(spec: TrialSpec) -> str:
    """The trial's configuration, as a short hash: argv, environment and files of a spec planned with the
    placeholder folder `TRIAL_DIR` and port 0."""
    return _sha(
        {
            "argv": list(spec.argv),
            "env": dict(sorted(spec.env.items())),
            "files": spec.files,
            "cwd": spec.cwd,
            "launcher": str(spec.launcher),
            "nproc": spec.nproc,
            "progress": [
                str(spec.progress_kind),
                spec.progress_file,
                spec.progress_regex,
                spec.progress_samples_per_iter,
            ],
        }
    )


def conditions(workload: WorkloadConf, measure: MeasureConf, card_applies: bool = True) -> dict[str, str]:
    """What a trial ran under beyond its configuration, as the trial's info: the caps (columns of trials.tsv) and
    `conditions`, a hash of the caps and every measure setting that changes an outcome or a figure. The emulated
    card counts only where the workload applies it (`card_applies`: the built-in proxy)."""
    rule = {k: v for k, v in dataclasses.asdict(measure).items() if k not in IGNORED_MEASURE}
    card = workload.emulate_gpu_mem_gb if card_applies else None
    caps = {"host_mem_limit_gb": str(workload.host_mem_limit_gb or ""), "emulate_gpu_mem_gb": str(card or "")}
    return {**caps, "conditions": _sha({**caps, "measure": rule})}


def _sha(body: object) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


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
        key = (record.profile, record.num_envs)
        if key in have or wanted.get(key) != identity_of(record) or not _reusable(record):
            continue
        if key not in chosen or _rank(record) > _rank(chosen[key]):
            chosen[key] = record
    return [chosen[k] for k in sorted(chosen, key=lambda k: (k[0], -k[1]))]


def shape(case: str, shape_sha: str, describe: Mapping[str, str]) -> str:
    """What must match for a memory failure to carry to a smaller card: `identity` less the emulated card and the
    measure rule (`shape_sha`: the configuration planned without the card)."""
    keys = SHAPE_KEYS + (("host",) if describe.get("device", "cpu") == "cpu" else ())
    return json.dumps([case, shape_sha, *(describe.get(k, "") for k in keys)])


def shape_of(record: TrialRecord) -> str:
    return shape(record.case, record.info.get("shape_sha", ""), record.info)


def noise_source(case: str, describe: Mapping[str, str]) -> str:
    """Where a window's step noise comes from (`NOISE_KEYS`): windows of one source pool into one case's noise."""
    return json.dumps([case, *(describe.get(k, "") for k in NOISE_KEYS)])


def noise_windows(
    earlier: Iterable[TrialRecord],
    source: str,
    now: datetime,
    max_age_h: float | None,
    have: Iterable[TrialRecord] = (),
) -> list[Mapping[str, float]]:
    """The figures of earlier sweeps' whole windows of `source` (`noise_source`) that finished within `max_age_h`
    hours before `now`, newest first: each a trial that ran (not a copy), measured its step noise, and is not
    among `have` as a copy (this sweep's records: a reused window is this sweep's own already). None where
    `max_age_h` is None or 0."""
    if not max_age_h:
        return []
    copied = {r.info.get("reused_from") for r in have}
    found: list[tuple[datetime, Mapping[str, float]]] = []
    for record in earlier:
        finished = _when(record.info.get("finished_at", ""))
        if (
            finished is not None
            and timedelta(0) <= now - finished <= timedelta(hours=max_age_h)
            and record.status is Status.OK
            and not record.info.get("reused_from")
            and origin(record) not in copied
            and "step_sd_frac" in record.figures
            and noise_source(record.case, record.info) == source
        ):
            found.append((finished, record.figures))
    return [figures for _, figures in sorted(found, key=lambda f: f[0], reverse=True)]


def _when(stamp: str) -> datetime | None:
    """An ISO time stamp with its zone (as trials record `finished_at`); None where there is none or it has none."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def card_gb(info: Mapping[str, str]) -> float | None:
    """The emulated card a trial ran under (GB per rank); None where none was emulated."""
    try:
        return float(info.get("emulate_gpu_mem_gb") or "") or None
    except ValueError:
        return None


def carried(
    earlier: Iterable[TrialRecord], shapes: Shapes, card: float, have: set[tuple[str, int]]
) -> list[TrialRecord]:
    """Memory failures under a larger emulated card (`card` GB is ours) of the same shape, one per (profile,
    num_envs) that this sweep has not run: the smallest such card (the closest evidence), then the newest."""
    found: dict[tuple[str, int], list[TrialRecord]] = {}
    for record in earlier:
        key, theirs = (record.profile, record.num_envs), card_gb(record.info)
        if (
            key not in have
            and theirs is not None
            and theirs >= card
            and record.info.get("shape_sha")
            and shapes.get(key) == shape_of(record)
            and _memory_failure(record)
        ):
            found.setdefault(key, []).append(record)
    return [_closest(found[k]) for k in sorted(found, key=lambda k: (k[0], -k[1]))]


def _closest(records: list[TrialRecord]) -> TrialRecord:
    """The one under the smallest card; among equal cards, the newest."""
    newest_first = sorted(records, key=lambda r: r.info.get("finished_at", ""), reverse=True)
    return min(newest_first, key=lambda r: card_gb(r.info) or 0.0)


def _memory_failure(record: TrialRecord) -> bool:
    """Out of memory for sure: a memory verdict of high confidence, in a trial that ran (not a copy)."""
    return (
        record.status is Status.OOM_OR_NCCL
        and is_memory(record.reason)
        and not record.info.get("reused_from")
        and not weak(record)
    )


def carried_why(record: TrialRecord, card: float) -> str:
    return (
        f"ran out of memory under a larger card ({card_gb(record.info):g} GB, {origin(record)}): it cannot fit "
        f"under {card:g} GB"
    )


def _reusable(record: TrialRecord) -> bool:
    if record.info.get("reused_from"):
        return False  # a copy: its original is reused, if still there
    if not record.info.get("conditions"):
        return False  # recorded before its caps and measure settings were: what it ran under is unknown
    if record.phase is Phase.PROBE:
        return record.status in REUSABLE
    # a confirmation that failed: the rung does not hold (a side-by-side job, on fewer devices, says nothing of it)
    return record.phase is Phase.CONFIRM and record.status is Status.OOM_OR_NCCL


def _rank(record: TrialRecord) -> tuple[bool, str]:
    return record.status is not Status.OK, record.info.get("finished_at", "")


def origin(record: TrialRecord) -> str:
    return f"{record.info.get('sweep', '?')}#{record.number}"


def as_reused(record: TrialRecord, sweep: str, trial_dir: str, why: str = "") -> TrialRecord:
    """The copy this sweep stores: the same outcome and figures, saying where it came from (`why`, else "reused
    from <sweep>#<n>"); its evidence is in `trial_dir` (relative to this sweep's folder, like every trial_dir; ""
    where the original's was gone). A carried failure keeps the card it ran under."""
    where = origin(record)
    info = {
        **record.info,
        "sweep": sweep,
        "reused_from": where,
        "why": why or f"reused from {where}",
        "trial_dir": trial_dir,
    }
    return dataclasses.replace(record, phase=Phase.PROBE, figures=dict(record.figures), info=info)


# ---------------------------------------------------------------- effects


def copy_evidence(source: Path, dest: Path) -> bool:
    """The original trial's folder, hard-linked (copied where links cannot be made) into `dest`, whole or not at
    all (built beside it, then renamed); False where the original's folder is gone."""
    if not source.is_dir():
        log.warning("the evidence of a reused trial is gone (%s): its outcome is reused without it", source)
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(source, tmp, copy_function=_link_or_copy, symlinks=True)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def _link_or_copy(src: str, dst: str) -> None:
    with contextlib.suppress(OSError):
        os.link(src, dst)
        return
    shutil.copy2(src, dst)


def earlier_records(storage: BaseStorage | None, case: str, sweep: str, output_root: Path | None) -> list[TrialRecord]:
    """The case's finished trials in other sweeps: in this sweep's storage (a shared database holds every
    sweep; None: there is none yet), and, where each sweep keeps its own journal, in the sibling sweep folders
    under `output_root`."""
    found = studies.case_records(storage, case, skip=studies.study_name(case, sweep)) if storage is not None else []
    for other in sweeps.with_journals(output_root, but=sweep) if output_root is not None else ():
        try:
            found += studies.case_records(studies.open_storage(None, other.sweep_dir), case)
        except Exception as exc:  # noqa: BLE001 - another sweep's unreadable journal costs a rerun, not the sweep
            why = "none of its trials is reused, nor its step noise carried"
            log.warning("set aside %s, which cannot be read (%s): %s", other.journal, exc, why)
    return found
