"""The sweep's storage: one Optuna study per case, a trial per launch, records rebuilt from storage alone.

The embedded default is Optuna's journal file in the sweep folder; any Optuna storage URL (PostgreSQL for many
hosts) works the same. A study is named `<sweep>/<case>` when a sweep name is given, so one shared server holds
many sweeps apart. Everything goes through Optuna's public storage API (`BaseStorage`: create, read and update
studies and trials by id), so an Optuna release changes nothing here without a deprecation first.

A trial is created RUNNING in one write, with its params and its owner (`heartbeat.Owner`), and carries a
heartbeat while it runs (`heartbeat(...)` around the run). `mark_abandoned` finds the RUNNING trials whose owner is
dead (see `ladder.storage.heartbeat` for the rule), hands each to the caller to end what is left of it (storage
starts and stops no process), and marks it `interrupted`, so the walk runs it again; finished trials are never
touched.

Turn-taking between the processes that run one case's walk is `ladder.storage.turns`, built on `live_running`,
`begin` and `withdraw` here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.exceptions import DuplicatedStudyError, UpdateFinishedTrialError
from optuna.storages import BaseStorage, JournalStorage
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from ladder.core.errors import StorageError
from ladder.core.paths import JOURNAL
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.settings.credentials import redact, scrub, with_password
from ladder.storage import fault, outage
from ladder.storage import heartbeat as hb
from ladder.storage.journal import SafeJournal

log = logging.getLogger(__name__)

NUM_ENVS = IntDistribution(1, 1 << 24)  # an int range, so a changed ladder never conflicts with stored trials
TERMINAL = (TrialState.COMPLETE, TrialState.FAIL)
SCHEMA_RACE_TRIES, SCHEMA_RACE_WAIT_S = 6, 0.25  # a fresh database's tables created by several processes at once
SETTINGS_ATTR = "ladder_settings"  # study user attr: the sweep's settings for the case (ladder.settings.recorded)
SET_ASIDE_ATTR = "set_aside"  # study user attr: numbers of finished trials that no longer count (settings changed)


@dataclass(frozen=True)
class CaseStudy:
    """One case's study (of one sweep) in its storage: what every function here works on."""

    storage: BaseStorage
    name: str  # `<sweep>/<case>`, or the case alone
    id: int  # the storage's id of the study

    @property
    def study_name(self) -> str:
        return self.name

    @property
    def user_attrs(self) -> dict[str, Any]:
        return self.storage.get_study_user_attrs(self.id)

    def set_user_attr(self, key: str, value: Any) -> None:
        self.storage.set_study_user_attr(self.id, key, value)

    def trials(self, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return self.storage.get_all_trials(self.id, deepcopy=False, states=tuple(states) if states else None)

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(self.id, number)


@dataclass(frozen=True)
class Claim:
    """A trial this process began: its number in the study and its id in the storage."""

    number: int
    trial_id: int


@dataclass(frozen=True)
class Abandoned:
    """A RUNNING trial whose owner is dead, as `mark_abandoned` hands it to the caller to end."""

    number: int
    trial_id: str  # the launcher's id of the trial (`LADDER_TRIAL_ID`), "" where none was recorded
    reachable: bool  # its processes, if any are left, are on this machine and in this pid namespace
    owner_host: str
    why: str


def open_storage(url: str | None, sweep_dir: Path, wait_s: float = outage.RETRY_S) -> BaseStorage:
    """The sweep's storage: the server at `url` (its outages waited out for up to `wait_s`), else the journal in
    the sweep folder."""
    if url:
        return _open_url(url, wait_s)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    return JournalStorage(SafeJournal(str(sweep_dir / JOURNAL)))


def open_storage_at(where: str) -> BaseStorage:
    """A storage named the way a user types it: a URL, a journal file, or a sweep folder holding journal.log."""
    path = Path(where)
    if path.is_dir():
        path = path / JOURNAL
    if path.is_file():
        return JournalStorage(SafeJournal(str(path)))
    if "://" not in where:
        raise StorageError(f"no journal file or storage URL at {where}", "give a sweep folder, journal.log or a URL")
    return _open_url(where)


def study_name(case: str, sweep: str = "") -> str:
    return f"{sweep}/{case}" if sweep else case


def open_study(storage: BaseStorage, case: str, sweep: str = "") -> CaseStudy:
    """The case's study of `sweep`, created where it is not there yet."""
    name = study_name(case, sweep)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study_id = storage.create_new_study([StudyDirection.MAXIMIZE], name)
    except DuplicatedStudyError:
        study_id = storage.get_study_id_from_name(name)
    study = CaseStudy(storage, name, study_id)
    if sweep and study.user_attrs.get("sweep") != sweep:
        study.set_user_attr("sweep", sweep)
    return study


def load_study(storage: BaseStorage, name: str) -> CaseStudy | None:
    """The study called `name`, None where the storage has none."""
    try:
        return CaseStudy(storage, name, storage.get_study_id_from_name(name))
    except KeyError:
        return None


def study_names(storage: BaseStorage) -> list[str]:
    return [s.study_name for s in storage.get_all_studies()]


def begin(study: CaseStudy, profile: str, num_envs: int, profiles: tuple[str, ...], attrs: dict[str, Any]) -> Claim:
    """A RUNNING trial with its params, owner and first heartbeat, created in one write: a crash at any point
    leaves either nothing or a trial that `mark_abandoned` can judge. Put the launcher's `trial_id` in `attrs`
    so the processes of a crashed trial can be found and ended."""
    template = optuna.trial.create_trial(
        state=TrialState.RUNNING,
        params={"variant": profile, "num_envs": num_envs},
        distributions={"variant": _variants(study, profile, profiles), "num_envs": NUM_ENVS},
        user_attrs={**attrs, **hb.Owner.here().attrs(), hb.HEARTBEAT_ATTR: time.time()},
    )
    trial_id = _create(study, template, profile)
    return Claim(study.storage.get_trial_number_from_id(trial_id), trial_id)


def add_finished(study: CaseStudy, record: TrialRecord, profiles: tuple[str, ...], value: float | None) -> None:
    """A trial that is finished as it is stored: a copy of another sweep's (`reuse`), launched by nobody."""
    template = optuna.trial.create_trial(
        state=TrialState.FAIL if value is None else TrialState.COMPLETE,
        value=value,
        params={"variant": record.profile, "num_envs": record.num_envs},
        distributions={"variant": _variants(study, record.profile, profiles), "num_envs": NUM_ENVS},
        user_attrs=_attrs(record),
    )
    fault.point("reuse.copy")
    _create(study, template, record.profile)


def _variants(study: CaseStudy, profile: str, known: tuple[str, ...]) -> CategoricalDistribution:
    """The profiles a study's trials are stored against: those of its first trial, so that a profile added to
    the config later does not change them (a database storage refuses a second set); else the known ones."""
    for trial in study.trials():
        dist = trial.distributions.get("variant")
        if isinstance(dist, CategoricalDistribution) and profile in dist.choices:
            return dist
    return CategoricalDistribution(known)


def _create(study: CaseStudy, template: FrozenTrial, profile: str) -> int:
    try:
        return study.storage.create_new_trial(study.id, template_trial=template)
    except ValueError as exc:
        if "dynamic value space" not in str(exc):
            raise
        raise StorageError(
            f"profile '{profile}' is not among the profiles sweep study '{study.name}' was "
            "started with, and this storage keeps that set fixed",
            "run the new profile as a new sweep (sweep=<another name>)",
        ) from None


def heartbeat(study: CaseStudy, claim: Claim, every_s: float = hb.HEARTBEAT_S) -> hb.Heartbeat:
    """`with studies.heartbeat(study, claim):` around the trial's run keeps its heartbeat fresh."""
    return hb.Heartbeat(lambda now: study.storage.set_trial_user_attr(claim.trial_id, hb.HEARTBEAT_ATTR, now), every_s)


def finish(study: CaseStudy, claim: Claim, record: TrialRecord, value: float | None) -> None:
    """Record the outcome and end the trial. If another sweep already took it for abandoned (its heartbeat went
    stale) the storage keeps `interrupted` and the walk runs it again; the trial folder keeps this outcome."""
    fault.point("trial.before_finish")
    try:
        for key, attr in _attrs(record).items():
            study.storage.set_trial_user_attr(claim.trial_id, key, attr)
        if value is None:
            study.storage.set_trial_state_values(claim.trial_id, TrialState.FAIL)
        else:
            study.storage.set_trial_state_values(claim.trial_id, TrialState.COMPLETE, [value])
    except UpdateFinishedTrialError:
        log.warning("trial %d was marked interrupted by another sweep while it ran; it will run again", claim.number)


def live_running(study: CaseStudy, stale_after_s: float = hb.STALE_AFTER_S) -> list[FrozenTrial]:
    """The study's RUNNING trials whose owner may be alive (see `mark_abandoned` for the dead ones)."""
    here = hb.Owner.here()
    return [t for t in study.trials((TrialState.RUNNING,)) if not _abandoned_because(t, here, stale_after_s)]


def withdraw(study: CaseStudy, claim: Claim) -> None:
    """End a trial that was begun but never launched, with no outcome: no record shows it (`records` keeps only
    trials with a status), and nothing waits on it."""
    study.storage.set_trial_user_attr(claim.trial_id, "withdrawn", True)
    study.storage.set_trial_state_values(claim.trial_id, TrialState.FAIL)


def records(study: CaseStudy) -> list[TrialRecord]:
    """Every finished trial of the study, rebuilt from its stored attributes (less those `set_aside`)."""
    aside = set(study.user_attrs.get(SET_ASIDE_ATTR) or ())
    return [_record(t) for t in study.trials(TERMINAL) if "status" in t.user_attrs and t.number not in aside]


def save_settings(study: CaseStudy, record: dict[str, Any]) -> None:
    """The sweep's settings for this case (`ladder.settings.recorded`), kept with its study in any storage."""
    study.set_user_attr(SETTINGS_ATTR, record)


def load_settings(study: CaseStudy) -> dict[str, Any] | None:
    return study.user_attrs.get(SETTINGS_ATTR)


def sweep_settings(storage: BaseStorage, sweep: str) -> dict[str, dict[str, Any]]:
    """Case name -> the settings recorded for it, for every case study of `sweep` that has them."""
    found = {}
    for study in storage.get_all_studies():
        if study.study_name.startswith(f"{sweep}/") and SETTINGS_ATTR in study.user_attrs:
            found[study.study_name[len(sweep) + 1 :]] = study.user_attrs[SETTINGS_ATTR]
    return found


def set_aside(study: CaseStudy, numbers: Iterable[int]) -> None:
    """Finished trials that no longer count (their sweep's settings changed): kept in storage as they are (a
    finished trial cannot change), named in the study, left out of `records`."""
    aside = set(study.user_attrs.get(SET_ASIDE_ATTR) or ()) | set(numbers)
    study.set_user_attr(SET_ASIDE_ATTR, sorted(aside))


def sweep_records(storage: BaseStorage, sweep: str = "") -> list[TrialRecord]:
    """Every finished trial of one sweep's studies (of all studies with no sweep given), by case, then number:
    all that trials.tsv needs, from the storage alone."""
    names = sorted(n for n in study_names(storage) if not sweep or n.startswith(f"{sweep}/"))
    return [r for n in names if (study := load_study(storage, n)) is not None for r in records(study)]


def case_records(storage: BaseStorage, case: str, skip: str = "") -> list[TrialRecord]:
    """Every finished trial of the case in every sweep the storage holds, less the study named `skip`."""
    names = [n for n in study_names(storage) if n.endswith(f"/{case}") and n != skip]
    return [r for n in names if (study := load_study(storage, n)) is not None for r in records(study)]


def mark_abandoned(
    study: CaseStudy, stale_after_s: float = hb.STALE_AFTER_S, end: Callable[[Abandoned], None] | None = None
) -> int:
    """RUNNING trials whose owner is dead become `interrupted`, each first handed to `end` (the sweep ends what is
    left of its processes); returns how many. Trials of a live owner, and finished trials, are left as they are."""
    here, count = hb.Owner.here(), 0
    for trial in study.trials((TrialState.RUNNING,)):
        why = _abandoned_because(trial, here, stale_after_s)
        if not why:
            continue
        owner = hb.Owner.from_attrs(trial.user_attrs)
        left = Abandoned(
            trial.number,
            str(trial.user_attrs.get("trial_id", "")),
            hb.same_pid_space(owner, here),
            owner.host if owner else "",
            why,
        )
        if end is not None:
            end(left)
        if _interrupt(study, trial, why):
            count += 1
    return count


def _open_url(url: str, wait_s: float = outage.RETRY_S) -> BaseStorage:
    """Optuna's RDB storage creates its tables on first use; on PostgreSQL two processes doing so at once can fail
    with a unique violation (CREATE TABLE is not safe against itself), so that error is retried a few times."""
    import sqlalchemy.exc  # here, not at the top: a sweep on a journal file never loads SQLAlchemy

    url = with_password(url)
    for attempt in range(1, SCHEMA_RACE_TRIES + 1):
        try:
            return outage.Waiting(optuna.storages.get_storage(url), redact(url), wait_s)  # type: ignore[abstract]  # methods set below its class
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as exc:
            if attempt == SCHEMA_RACE_TRIES:
                raise _storage_error(url, exc) from None
            log.debug("storage schema being created by another process (%s); again", type(exc).__name__)
            time.sleep(SCHEMA_RACE_WAIT_S * attempt)
        except Exception as exc:  # noqa: BLE001 - the driver's message may quote the URL: show it scrubbed, no chain
            raise _storage_error(url, exc) from None
    raise AssertionError("unreachable")


def _storage_error(url: str, exc: BaseException) -> StorageError:
    detail = scrub(str(exc).splitlines()[0] if str(exc) else "", url)
    return StorageError(
        f"cannot open storage {redact(url)}: {type(exc).__name__}: {detail}",
        "check the URL, the server, and that its driver is installed",
    )


def _abandoned_because(trial: FrozenTrial, here: hb.Owner, stale_after_s: float) -> str:
    attrs = trial.user_attrs
    owner = hb.Owner.from_attrs(attrs)
    started = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
    last_beat = float(attrs.get(hb.HEARTBEAT_ATTR, started))
    pid_started = hb.pid_started(owner.pid) if owner is not None and hb.same_pid_space(owner, here) else None
    return hb.abandoned_because(owner, here, pid_started, last_beat, time.time(), stale_after_s)


def _interrupt(study: CaseStudy, trial: FrozenTrial, why: str) -> bool:
    """Record the trial `interrupted`; False if another process got there first."""
    trial_id = study.trial_id(trial.number)
    try:
        study.storage.set_trial_user_attr(trial_id, "status", str(Status.INTERRUPTED))
        study.storage.set_trial_user_attr(trial_id, "reason", str(Reason.INTERRUPTED))
        study.storage.set_trial_user_attr(trial_id, "evidence", f"abandoned: {why}")
        study.storage.set_trial_state_values(trial_id, TrialState.FAIL)
    except UpdateFinishedTrialError:
        return False
    log.info("trial %d left running is marked interrupted: %s", trial.number, why)
    return True


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
        profile=str(trial.params.get("variant", "")),
        num_envs=int(trial.params.get("num_envs", 0)),
        phase=Phase(attrs.get("phase", "probe")),
        status=Status(attrs["status"]),
        reason=Reason(attrs.get("reason", "")),
        evidence=str(attrs.get("evidence", "")),
        figures={k: float(v) for k, v in (attrs.get("figures") or {}).items()},
        info={k: str(v) for k, v in (attrs.get("info") or {}).items()},
        number=trial.number,
    )
