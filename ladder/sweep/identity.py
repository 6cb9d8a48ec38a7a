"""What an earlier sweep's trials answer for in this one: each (profile, rung) planned as it would launch, its
identity (`ladder.storage.reuse.identity`) and shape, and the copying-in of the trials that match.

A trial is planned here in reuse's placeholder folder on port 0: its configuration less where it runs, so that two
sweeps planning the same trial get the same fingerprint.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from ladder.core import pick, walk
from ladder.core.paths import SweepPaths
from ladder.core.records import Phase, Status, TrialRecord
from ladder.core.spec import Kind, TrialSpec
from ladder.runner.machine import emulated_card_gb
from ladder.settings import catalog, recorded
from ladder.storage import reuse, studies, tsv
from ladder.sweep.context import Run, plan

log = logging.getLogger(__name__)


def copy_in(run: Run) -> None:
    """Trials of earlier sweeps that answer for ours (same configuration, hardware and code) are copied in and
    shown, so the walk takes them as facts instead of launching them again (`run.earlier`)."""
    s, study, earlier = run.settings, run.study, run.earlier
    assert study is not None
    # one process at a time copies into this case (the same command started twice would copy everything twice)
    run.paths.sweep_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(run.paths.reuse_lock(s.case.name))):
        have = {(r.profile, r.num_envs) for r in studies.records(study) if r.status is not Status.INTERRUPTED}
        copies = [_copied(run, r) for r in reuse.pick(earlier, wanted(run), have)]
        have |= {(c.profile, c.num_envs) for c in copies}
        card = card_gb(run)
        carried = (
            [_copied(run, r, reuse.carried_why(r, card)) for r in reuse.carried(earlier, shapes(run), card, have)]
            if card
            else []
        )
        for copy in copies + carried:
            studies.add_finished(study, copy, catalog.known("profile"), pick.objective_value(copy, s.objective))
    for copy in copies + carried:
        run.view.trial_finished(copy)
    if copies:
        log.info(
            "%d trial(s) reused from earlier sweeps on the same hardware (reuse=false runs them again)", len(copies)
        )
    if carried:
        log.info(
            "%d rung(s) not launched: they ran out of memory under a larger emulated card in an earlier sweep",
            len(carried),
        )
    if copies or carried:
        tsv.write_trials(run.paths.trials_tsv, lambda: studies.sweep_records(study.storage, run.paths.sweep))


def would_reuse(run: Run) -> dict[tuple[str, int], str]:
    """For a dry run: (profile, rung) -> what answers for it without a launch (a trial this sweep already has,
    or one an earlier sweep ran). Reads storages only; `run.storage` is this sweep's, or None where it has none."""
    s = run.settings
    study = _sweep_study(run)
    set_aside = {r.number for r in changed_away(run)}  # as `resume.settle` will leave the sweep
    records = [r for r in (studies.records(study) if study else []) if r.number not in set_aside]
    known = {
        (r.profile, r.num_envs): f"already run in this sweep ({r.status})"
        for r in records
        if r.status is not Status.INTERRUPTED
    }
    if s.reuse:
        earlier = reuse.earlier_records(run.storage, s.case.name, run.paths.sweep, Path(s.output_root))
        for r in reuse.pick(earlier, wanted(run), set(known)):
            known[(r.profile, r.num_envs)] = f"reused from {reuse.origin(r)} ({r.status})"
        if card := card_gb(run):
            for r in reuse.carried(earlier, shapes(run), card, set(known)):
                known[(r.profile, r.num_envs)] = reuse.carried_why(r, card)
    return known


def _sweep_study(run: Run) -> studies.CaseStudy | None:
    """This sweep's study of the case, where its storage has one (a dry run creates nothing)."""
    name = studies.study_name(run.settings.case.name, run.paths.sweep)
    return studies.load_study(run.storage, name) if run.storage else None


def changed_away(run: Run) -> list[TrialRecord]:
    """For a dry run: the trials of this sweep that a change of its settings (`settings_change=accept`) would set
    aside (`stale`); none where the settings are as recorded. Reads `run.storage` only."""
    s = run.settings
    study = _sweep_study(run)
    if study is None or studies.load_settings(study) in (None, recorded.record(s)):
        return []
    return stale(studies.records(study), run)


def stale(records: Sequence[TrialRecord], run: Run) -> list[TrialRecord]:
    """The trials that no longer answer for their rungs under the run's settings, set aside where the sweep's
    settings changed: interrupted ones too (left, each later resume said it was 'to run again', at settings the
    sweep no longer has, and the table and trials.tsv kept its old-card row)."""
    want = wanted(run)
    return [r for r in records if want.get((r.profile, r.num_envs)) != reuse.identity_of(r)]


def earlier(run: Run) -> tuple[TrialRecord, ...]:
    """The case's finished trials in other sweeps, where reuse or the carried step noise may want them; none else."""
    s = run.settings
    if not (s.reuse or s.noise_carry_h):
        return ()
    return tuple(reuse.earlier_records(run.storage, s.case.name, run.paths.sweep, Path(s.output_root)))


def noise_source(run: Run) -> str:
    """Where this sweep's windows' step noise comes from (`reuse.noise_source`): the same for all its trials."""
    planned = placeholder_spec(run, run.settings.profiles[0].name, run.settings.rungs[0])
    return reuse.noise_source(run.settings.case.name, {**run.machine.describe, **planned.info})


def card_gb(run: Run) -> float | None:
    """The emulated card this sweep's trials run under (GB per rank, or per GPU), where it applies to them."""
    return emulated_card_gb(run.settings, run.machine.device)


def fresh_trial_dir(paths: SweepPaths, case: str, profile: str, rung: int, phase: Phase, knob: str, n: int = 1) -> Path:
    """The first trial folder from number `n` on that nothing occupies yet (a set-aside or copied trial's stays)."""
    while (folder := paths.trial(case, profile, rung, str(phase), n, knob).folder).exists():
        n += 1
    return folder


def _copied(run: Run, record: TrialRecord, why: str = "") -> TrialRecord:
    """The reused trial as this sweep stores it, its evidence copied into this sweep's own trial folder."""
    s = run.settings
    source = SweepPaths.of(s.output_root, record.info.get("sweep", "")).sweep_dir
    dest = fresh_trial_dir(run.paths, s.case.name, record.profile, record.num_envs, Phase.PROBE, s.knob)
    copied = bool(record.info.get("trial_dir")) and reuse.copy_evidence(source / record.info["trial_dir"], dest)
    return reuse.as_reused(record, run.paths.sweep, run.paths.relative(dest) if copied else "", why)


def placeholder_spec(run: Run, profile: str, rung: int) -> TrialSpec:
    """The trial as planned in reuse's placeholder folder on port 0: its configuration, less where it runs."""
    return plan(run, walk.Decision(profile, rung, ""), Path(reuse.TRIAL_DIR), 0)


def bare_spec(run: Run, profile: str, rung: int) -> TrialSpec:
    """The trial as `placeholder_spec` plans it, without the emulated card (what `reuse.carried` compares)."""
    bare = dataclasses.replace(run.workload, proxy=dataclasses.replace(run.workload.proxy, emulate_gpu_mem_gb=None))
    return placeholder_spec(dataclasses.replace(run, workload=bare), profile, rung)


def shapes(run: Run) -> reuse.Shapes:
    """(profile, rung) -> the shape a failure under a larger card must have to answer for it (`reuse.shape`)."""
    out = {}
    for profile, rung in ((p.name, r) for p in run.settings.profiles for r in run.settings.rungs):
        spec = bare_spec(run, profile, rung)
        describe = {**run.machine.describe, **spec.info, **conditions(run)}
        out[(profile, rung)] = reuse.shape(run.settings.case.name, reuse.fingerprint(spec), describe)
    return out


def wanted(run: Run) -> reuse.Wanted:
    """(profile, rung) -> the identity a trial that answers for it has."""
    return {(p.name, rung): identity(run, p.name, rung) for p in run.settings.profiles for rung in run.settings.rungs}


def identity(run: Run, profile: str, rung: int) -> str:
    spec = placeholder_spec(run, profile, rung)
    return reuse.identity(
        run.settings.case.name, reuse.fingerprint(spec), {**run.machine.describe, **spec.info, **conditions(run)}
    )


def conditions(run: Run) -> dict[str, str]:
    return reuse.conditions(run.settings.workload, run.settings.measure, run.workload.kind is Kind.PROXY)
