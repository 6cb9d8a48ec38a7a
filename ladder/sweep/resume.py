"""Resuming a sweep: which sweep (`resume=latest`, or `sweep=NAME`), its recorded settings taken back where the
command line is silent, a change of outcome settings refused or recorded, and the command that resumes it.

A sweep has one set of settings (`ladder.settings.recorded`): recorded with each case's study when it starts, read
back here from whatever storage the sweep uses.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ladder.core.errors import ConfigError
from ladder.core.paths import SweepPaths, sweep_name
from ladder.core.spec import Kind
from ladder.settings import recorded
from ladder.settings.config import Settings, SettingsChange
from ladder.settings.credentials import redact
from ladder.storage import studies, sweeps, turns
from ladder.sweep import identity
from ladder.sweep.context import Run

log = logging.getLogger(__name__)

DEFAULT_OUTPUT_ROOT = "output/train"  # conf/config.yaml's: a resume command names output_root only where it differs


def resolve(settings: Settings) -> Settings:
    """`resume=latest` (with no sweep named): the sweep `ladder.search` started or resumed last under output_root."""
    if settings.resume != "latest" or settings.sweep:
        return settings
    root = Path(settings.output_root)
    latest = sweeps.latest(root)
    if latest is None:
        there = sweeps.names(root)
        raise ConfigError(
            f"resume=latest: no sweep under {settings.output_root} was started or resumed by "
            f"ladder.search" + (f" (its sweeps: {', '.join(there)})" if there else ""),
            "name one with sweep=<name>, or start one without resume=latest",
        )
    return dataclasses.replace(settings, sweep=latest)


def paths_for(settings: Settings, now: datetime) -> SweepPaths:
    """The sweep's folder: the one named, or a new one named by the time."""
    return SweepPaths.of(settings.output_root, settings.sweep or sweep_name(now))


def recorded_for(s: Settings, paths: SweepPaths) -> Settings:
    """The settings a run of the sweep goes on with: the recorded ones where the command line is silent; a
    `SettingsChanged` where it sets an outcome setting to another value (unless settings_change=accept). Reads
    only: a sweep that does not exist yet is left to `ladder.sweep.loop` to create."""
    records = _sweep_records(s.storage, paths, s.storage_wait_s)
    found = records.get(s.case.name)
    if found is None and records and not recorded.is_given("case", s.given):
        if len(records) > 1:
            raise ConfigError(
                f"sweep {paths.sweep} holds several cases ({', '.join(sorted(records))})",
                "name the one to resume with case=<name>",
            )
        found = next(iter(records.values()))
        s = dataclasses.replace(s, case=dataclasses.replace(s.case, name=found["case.name"]))
    if found is None:
        return s
    diffs = recorded.differences(found, recorded.record(s), s.given)
    if diffs and s.settings_change is not SettingsChange.ACCEPT:
        raise recorded.changed(paths.sweep, found["case.name"], diffs, s.given)
    return recorded.adopt(s, found, s.given)


def _sweep_records(url: str | None, paths: SweepPaths, wait_s: float) -> dict[str, recorded.Record]:
    if not url and not paths.journal.is_file():
        return {}
    return studies.sweep_settings(studies.open_storage(url, paths.sweep_dir, wait_s), paths.sweep)


def settle(run: Run) -> None:
    """Record the sweep's settings for the case; where they changed (settings_change=accept: `ladder.search`
    refused otherwise), the trials that no longer answer for this sweep's are set aside, and their rungs run
    afresh."""
    assert run.study is not None
    now, before = recorded.record(run.settings), studies.load_settings(run.study)
    if before == now:
        return
    if before is not None:
        if others := studies.live_running(run.study, run.settings.stale_after_s):
            raise ConfigError(
                f"sweep {run.paths.sweep}: case {run.settings.case.name} is being run by "
                f"{turns.owner_words(others[0].user_attrs)} with the settings it recorded; a change accepted now "
                "would set aside the trials it is measuring and take its answers under the new settings",
                "give settings_change=accept once that process has finished or been stopped, or run these settings "
                "as a new sweep (sweep=<another name>)",
            )
        stale = [r.number for r in identity.stale(studies.records(run.study), run)]
        studies.set_aside(run.study, stale)
        log.info(
            "the sweep's settings changed (settings_change=accept): %d earlier trial(s) no longer count and "
            "their rungs run afresh",
            len(stale),
        )
    studies.save_settings(run.study, now)


def command(settings: Settings, paths: SweepPaths, conf_dirs: Sequence[str] = ()) -> str:
    """The command that resumes this sweep as it was: its settings are recorded, so where it lives is enough, and
    what finds its case before they are read: the user's config folders (`conf_dirs`: `--config-dir`,
    `hydra.searchpath`) and, for one's own trainer, `workload.kind=command` (its case has no MimicKit fields)."""
    where = [f"case={settings.case.name}", f"sweep={paths.sweep}"]
    if len(conf_dirs) == 1:  # Hydra takes one --config-dir; several go on its search path
        where[:0] = ["--config-dir", conf_dirs[0]]
    elif conf_dirs:
        where[:0] = [f"hydra.searchpath=[{','.join('file://' + d for d in conf_dirs)}]"]
    if settings.workload.kind == Kind.COMMAND:
        where.append(f"workload.kind={Kind.COMMAND}")
    if settings.output_root != DEFAULT_OUTPUT_ROOT:
        where.append(f"output_root={settings.output_root}")
    if settings.storage:
        where.append(f"storage={redact(settings.storage)}")
    return shlex.join(["python", "-m", "ladder.search", *where])
