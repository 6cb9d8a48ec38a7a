"""What every step of one case's sweep shares (`Run`), and the translation it needs: a decision into the trial's
spec (`plan`). The walk's `Tuning` is the settings' own (`Settings.tuning`)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from optuna.storages import BaseStorage

from ladder.core import walk
from ladder.core.paths import SweepPaths
from ladder.core.records import TrialRecord
from ladder.core.spec import TrialSpec
from ladder.runner import procs
from ladder.runner.machine import Machine
from ladder.settings.config import Settings
from ladder.storage import studies
from ladder.storage.turns import Turns
from ladder.sweep.events import View
from ladder.workloads import planner
from ladder.workloads.builtin import Placement

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    """What every step of one case's sweep shares."""

    settings: Settings
    paths: SweepPaths
    machine: Machine
    workload: planner.Workload
    study: studies.CaseStudy | None  # None for a dry run of a sweep that has no study yet
    storage: BaseStorage | None  # None likewise
    view: View
    shown: set[int] = dataclasses.field(default_factory=set)  # numbers of the stored trials the view has shown
    earlier: tuple[TrialRecord, ...] = ()  # the case's finished trials in other sweeps, read once as it starts
    # profile -> where memory history says its walk starts on this card (`ladder.sweep.prior`), read once likewise
    priors: Mapping[str, walk.Seed] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def turns(self) -> Turns:
        """Who may launch now, between the processes that run this case's walk."""
        assert self.study is not None
        return Turns(self.study, self.settings.stale_after_s, end=end_abandoned)


def end_abandoned(left: studies.Abandoned) -> None:
    """A dead owner's trial: kill what is left of it on this machine before it is marked interrupted."""
    procs.end_abandoned(left.number, left.trial_id, left.reachable, left.owner_host)


def workload_of(settings: Settings) -> planner.Workload:
    """The sweep's workload with `auto` resolved; says in one log line what runs and why."""
    workload, note = planner.build(settings.workload, settings.knob, os.environ)
    log.info(note)
    return workload


def plan(run: Run, decision: walk.Decision, trial_dir: Path, port: int) -> TrialSpec:
    """The trial a decision launches, in `trial_dir` on `port`."""
    profile = next(p for p in run.settings.profiles if p.name == decision.profile)
    work = run.settings.workload
    place = Placement(
        run.machine.device,
        run.machine.nproc,
        port,
        run.machine.python,
        single_rank=work.single_rank,
        proxy_ranks=work.proxy_ranks,
        proxy_start=work.proxy_start,
        pin_ranks=work.pin_ranks,
    )
    return planner.plan(
        run.workload,
        run.settings.case,
        profile,
        decision.rung,
        place,
        str(trial_dir.absolute()),
        run.settings.measure.budget_s,  # the trainer's own time limit, where it has one: ladder's stops it first
        {**run.settings.nccl_env, **run.machine.env},
    )
