"""The sweep's storage: one Optuna study per case, a trial per launch, records rebuilt from storage alone.

The embedded default is Optuna's journal file in the sweep folder; any Optuna storage URL (PostgreSQL for many
hosts) works the same. A study is named `<sweep>/<case>` when a sweep name is given, so one shared server holds
many sweeps apart. A password in a URL is never printed or written: `redact` is what any message shows.

A trial is created RUNNING in one write, with its params and its owner (`heartbeat.Owner`), and carries a
heartbeat while it runs (`heartbeat(...)` around the run). When a sweep starts, `mark_abandoned` finds the RUNNING
trials whose owner is dead (see `ladder.heartbeat` for the rule), kills what is left of them on this machine, and
marks them `interrupted`, so the walk runs them again; finished trials are never touched.

Turn-taking between the processes that run one case's walk is `ladder.turns`, built on `live_running`, `begin`
and `withdraw` here.
"""

from __future__ import annotations

import logging
import os
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import BaseStorage, JournalStorage
from optuna.trial import FrozenTrial, TrialState

from ladder import fault
from ladder import heartbeat as hb
from ladder.errors import StorageError
from ladder.journal import SafeJournal
from ladder.records import Phase, Reason, Status, TrialRecord

log = logging.getLogger(__name__)

NUM_ENVS = IntDistribution(1, 1 << 24)  # an int range, so a changed ladder never conflicts with stored trials
JOURNAL = "journal.log"
SWEEP_PREFIX = "case_gpu_bench_"  # sweep folders are <output_root>/case_gpu_bench_<sweep> (sweep.Paths)
SECRET_KEYS = ("password", "passwd", "pwd", "secret", "token")
TERMINAL = (TrialState.COMPLETE, TrialState.FAIL)
SCHEMA_RACE_TRIES, SCHEMA_RACE_WAIT_S = 6, 0.25  # a fresh database's tables created by several processes at once
PASSWORD_VAR = "LADDER_STORAGE_PASSWORD"  # a storage URL's password, kept off the command line and Hydra's printouts
SETTINGS_ATTR = "ladder_settings"  # study user attr: the sweep's settings for the case (ladder.sweepsettings)
SET_ASIDE_ATTR = "set_aside"  # study user attr: numbers of finished trials that no longer count (settings changed)


def redact(url: str | None) -> str:
    """The URL with its password (and any secret-looking query value) replaced by ***; "" for none."""
    if not url:
        return ""
    parts = urllib.parse.urlsplit(url)
    head, query = url.split("?", 1) if "?" in url else (url, "")
    if parts.password is not None:
        user, _, host = parts.netloc.rpartition("@")
        head = head.replace(parts.netloc, f"{user.split(':', 1)[0]}:***@{host}", 1)
    pairs = [(k, "***" if k.lower() in SECRET_KEYS else v) for k, v in urllib.parse.parse_qsl(query, True)]
    return head + ("?" + urllib.parse.urlencode(pairs, safe="*/:") if query else "")


def without_password(url: str) -> tuple[str, str | None]:
    """The URL less its password (user@host), and the password (None if it had none)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url, None
    user, _, host = parts.netloc.rpartition("@")
    return url.replace(parts.netloc, f"{user.split(':', 1)[0]}@{host}", 1), urllib.parse.unquote(parts.password)


def with_password(url: str, environ: Mapping[str, str] = os.environ) -> str:
    """The URL with `$LADDER_STORAGE_PASSWORD` as its password, where it names a user but no password."""
    parts, password = urllib.parse.urlsplit(url), environ.get(PASSWORD_VAR)
    if not password or "://" not in url or parts.username is None or parts.password is not None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    return url.replace(parts.netloc, f"{user}:{urllib.parse.quote(password, safe='')}@{host}", 1)


def open_storage(url: str | None, sweep_dir: Path) -> BaseStorage:
    if url:
        return _open_url(url)
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


def open_study(storage: BaseStorage, case: str, sweep: str = "") -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=study_name(case, sweep), storage=storage, direction="maximize",
                                load_if_exists=True)  # fmt: skip
    if sweep and study.user_attrs.get("sweep") != sweep:
        study.set_user_attr("sweep", sweep)
    return study


def begin(
    study: optuna.Study, variant: str, num_envs: int, variants: tuple[str, ...], attrs: dict[str, Any]
) -> optuna.Trial:
    """A RUNNING trial with its params, owner and first heartbeat, created in one write: a crash at any point
    leaves either nothing or a trial that `mark_abandoned` can judge. Put the launcher's `trial_id` in `attrs`
    so the processes of a crashed trial can be found and killed."""
    template = optuna.trial.create_trial(
        state=TrialState.RUNNING,
        params={"variant": variant, "num_envs": num_envs},
        distributions={"variant": _variants(study, variant, variants), "num_envs": NUM_ENVS},
        user_attrs={**attrs, **hb.Owner.here().attrs(), hb.HEARTBEAT_ATTR: time.time()},
    )
    trial_id = _create(study, template, variant)
    return optuna.Trial(study, trial_id)


def add_finished(study: optuna.Study, record: TrialRecord, variants: tuple[str, ...], value: float | None) -> None:
    """A trial that is finished as it is stored: a copy of another sweep's (`reuse`), launched by nobody."""
    template = optuna.trial.create_trial(
        state=TrialState.FAIL if value is None else TrialState.COMPLETE,
        value=value,
        params={"variant": record.variant, "num_envs": record.num_envs},
        distributions={"variant": _variants(study, record.variant, variants), "num_envs": NUM_ENVS},
        user_attrs=_attrs(record),
    )
    fault.point("reuse.copy")
    _create(study, template, record.variant)


def _variants(study: optuna.Study, variant: str, known: tuple[str, ...]) -> CategoricalDistribution:
    """The profiles a study's trials are stored against: those of its first trial, so that a profile added to
    the config later does not change them (a database storage refuses a second set); else the known ones."""
    for trial in study.get_trials(deepcopy=False):
        dist = trial.distributions.get("variant")
        if isinstance(dist, CategoricalDistribution) and variant in dist.choices:
            return dist
    return CategoricalDistribution(known)


def _create(study: optuna.Study, template: FrozenTrial, variant: str) -> int:
    try:
        return study._storage.create_new_trial(study._study_id, template_trial=template)
    except ValueError as exc:
        if "dynamic value space" not in str(exc):
            raise
        raise StorageError(f"profile '{variant}' is not among the profiles sweep study '{study.study_name}' was "
                           "started with, and this storage keeps that set fixed",
                           "run the new profile as a new sweep (sweep=<another name>)") from None  # fmt: skip


def heartbeat(study: optuna.Study, trial: optuna.Trial, every_s: float = hb.HEARTBEAT_S) -> hb.Heartbeat:
    """`with store.heartbeat(study, otrial):` around the trial's run keeps its heartbeat fresh."""
    storage, trial_id = study._storage, trial._trial_id
    return hb.Heartbeat(lambda now: storage.set_trial_user_attr(trial_id, hb.HEARTBEAT_ATTR, now), every_s)


def finish(study: optuna.Study, trial: optuna.Trial, record: TrialRecord, value: float | None) -> None:
    """Record the outcome and end the trial. If another sweep already took it for abandoned (its heartbeat went
    stale) the storage keeps `interrupted` and the walk runs it again; the trial folder keeps this outcome."""
    fault.point("trial.before_finish")
    try:
        for key, attr in _attrs(record).items():
            trial.set_user_attr(key, attr)
        if value is None:
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, value)
    except UpdateFinishedTrialError:
        log.warning("trial %d was marked interrupted by another sweep while it ran; it will run again", trial.number)


def live_running(study: optuna.Study, stale_after_s: float = hb.STALE_AFTER_S) -> list[FrozenTrial]:
    """The study's RUNNING trials whose owner may be alive (see `mark_abandoned` for the dead ones)."""
    here = hb.Owner.here()
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return [t for t in running if not _abandoned_because(t, here, stale_after_s)]


def withdraw(study: optuna.Study, trial: optuna.Trial) -> None:
    """End a trial that was begun but never launched, with no outcome: no record shows it (`records` keeps only
    trials with a status), and nothing waits on it."""
    study._storage.set_trial_user_attr(trial._trial_id, "withdrawn", True)
    study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)


def records(study: optuna.Study) -> list[TrialRecord]:
    """Every finished trial of the study, rebuilt from its stored attributes (less those `set_aside`)."""
    trials = study.get_trials(deepcopy=False, states=TERMINAL)
    aside = set(study.user_attrs.get(SET_ASIDE_ATTR) or ())
    return [_record(t) for t in trials if "status" in t.user_attrs and t.number not in aside]


def save_settings(study: optuna.Study, record: dict[str, Any]) -> None:
    """The sweep's settings for this case (`ladder.sweepsettings`), kept with its study in any storage."""
    study.set_user_attr(SETTINGS_ATTR, record)


def load_settings(study: optuna.Study) -> dict[str, Any] | None:
    return study.user_attrs.get(SETTINGS_ATTR)


def sweep_settings(storage: BaseStorage, sweep: str) -> dict[str, dict[str, Any]]:
    """Case name -> the settings recorded for it, for every case study of `sweep` that has them."""
    found = {}
    for name in optuna.get_all_study_names(storage):
        if name.startswith(f"{sweep}/"):
            attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(name))
            if SETTINGS_ATTR in attrs:
                found[name[len(sweep) + 1 :]] = attrs[SETTINGS_ATTR]
    return found


def set_aside(study: optuna.Study, numbers: Iterable[int]) -> None:
    """Finished trials that no longer count (their sweep's settings changed): kept in storage as they are (a
    finished trial cannot change), named in the study, left out of `records`."""
    aside = set(study.user_attrs.get(SET_ASIDE_ATTR) or ()) | set(numbers)
    study.set_user_attr(SET_ASIDE_ATTR, sorted(aside))


def sweep_records(storage: BaseStorage, sweep: str = "") -> list[TrialRecord]:
    """Every finished trial of one sweep's studies (of all studies with no sweep given), by case, then number:
    all that trials.tsv needs, from the storage alone."""
    names = sorted(n for n in optuna.get_all_study_names(storage) if not sweep or n.startswith(f"{sweep}/"))
    return [r for n in names for r in records(optuna.load_study(study_name=n, storage=storage))]


def mark_abandoned(study: optuna.Study, stale_after_s: float = hb.STALE_AFTER_S) -> int:
    """RUNNING trials whose owner is dead become `interrupted` (their leftover processes here are killed first);
    returns how many. Trials of a live owner, and finished trials, are left as they are."""
    here, count = hb.Owner.here(), 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        why = _abandoned_because(trial, here, stale_after_s)
        if why and _interrupt(study, trial, here, why):
            count += 1
    return count


def pick_latest(folders: Iterable[tuple[str, float]]) -> str | None:
    """The sweep name of the most recently active folder among (folder name, last activity) pairs; ties go to the
    greater name. Pure: `latest_sweep` gathers the pairs."""
    sweeps = [(t, name) for name, t in folders if name.startswith(SWEEP_PREFIX) and len(name) > len(SWEEP_PREFIX)]
    return max(sweeps)[1][len(SWEEP_PREFIX) :] if sweeps else None


def latest_sweep(output_root: Path) -> str | None:
    """`resume=latest`: the sweep under `output_root` whose folder, storage or TSVs changed last; None if none."""
    if not output_root.is_dir():
        return None
    return pick_latest((d.name, _last_activity(d)) for d in output_root.iterdir() if d.is_dir())


def _last_activity(folder: Path) -> float:
    """Its storage's or TSVs' last change; the folder's own only where it has none (a report written into an old
    sweep's folder changes the folder, not the sweep)."""
    paths = [p for p in (folder / n for n in (JOURNAL, "trials.tsv", "best_by_case.tsv")) if p.exists()] or [folder]
    return max(p.stat().st_mtime for p in paths)


def _open_url(url: str) -> BaseStorage:
    """Optuna's RDB storage creates its tables on first use; on PostgreSQL two processes doing so at once can fail
    with a unique violation (CREATE TABLE is not safe against itself), so that error is retried a few times."""
    url = with_password(url)
    for attempt in range(1, SCHEMA_RACE_TRIES + 1):
        try:
            return optuna.storages.get_storage(url)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as exc:
            if attempt == SCHEMA_RACE_TRIES:
                raise _storage_error(url, exc) from None
            log.debug("storage schema being created by another process (%s); again", type(exc).__name__)
            time.sleep(SCHEMA_RACE_WAIT_S * attempt)
        except Exception as exc:  # noqa: BLE001 - the driver's message may quote the URL: show it scrubbed, no chain
            raise _storage_error(url, exc) from None
    raise AssertionError("unreachable")


def _storage_error(url: str, exc: BaseException) -> StorageError:
    detail = _scrub(str(exc).splitlines()[0] if str(exc) else "", url)
    return StorageError(f"cannot open storage {redact(url)}: {type(exc).__name__}: {detail}",
                        "check the URL, the server, and that its driver is installed")  # fmt: skip


def _scrub(text: str, url: str) -> str:
    password = urllib.parse.urlsplit(url).password
    for form in {password, urllib.parse.unquote(password)} if password else ():
        text = text.replace(form, "***")
    return text


def _abandoned_because(trial: FrozenTrial, here: hb.Owner, stale_after_s: float) -> str:
    attrs = trial.user_attrs
    owner = hb.Owner.from_attrs(attrs)
    started = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
    last_beat = float(attrs.get(hb.HEARTBEAT_ATTR, started))
    pid_started = hb.pid_started(owner.pid) if owner is not None and hb.same_pid_space(owner, here) else None
    return hb.abandoned_because(owner, here, pid_started, last_beat, time.time(), stale_after_s)


def _interrupt(study: optuna.Study, trial: FrozenTrial, here: hb.Owner, why: str) -> bool:
    """Kill what is left of the trial here, then record it `interrupted`; False if another process got there first."""
    trial_id, owner = str(trial.user_attrs.get("trial_id", "")), hb.Owner.from_attrs(trial.user_attrs)
    if not hb.same_pid_space(owner, here):
        log.warning("trial %d ran on %s: its processes, if any are left there, cannot be reached from here",
                    trial.number, owner.host if owner else "an unknown host")  # fmt: skip
    elif not trial_id:
        log.warning("trial %d has no trial_id recorded: its leftover processes cannot be found", trial.number)
    elif killed := hb.kill_trial_processes(trial_id):
        log.info("killed %d process(es) left alive by trial %d (%s)", killed, trial.number, trial_id)
    storage = study._storage
    try:
        storage.set_trial_user_attr(trial._trial_id, "status", str(Status.INTERRUPTED))
        storage.set_trial_user_attr(trial._trial_id, "reason", str(Reason.INTERRUPTED))
        storage.set_trial_user_attr(trial._trial_id, "evidence", f"abandoned: {why}")
        storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
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
