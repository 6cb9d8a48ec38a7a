"""One configuration type: the schema is what the code reads, validated, each default written once.

The schema's choices compose as their words (what `--cfg job` prints) and are enum members once validated; every
root key reaches `Settings` or its `Tuning`; the walk's defaults are `Tuning`'s own.
"""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from ladder.core.spec import EmulateBy, Kind, Launcher, ProgressKind
from ladder.core.walk import Tuning
from ladder.settings import recorded
from ladder.settings.config import GROUPS, ROOT_KEYS, WALK_KEYS, SweepConf
from tests.unit.test_config import settings


def test_every_root_key_is_held_by_the_settings_or_their_tuning() -> None:
    root = {f.name for f in dataclasses.fields(SweepConf)} - set(GROUPS)
    assert root == set(ROOT_KEYS) | set(WALK_KEYS)
    assert set(WALK_KEYS) == {"strategy", "mem_headroom_frac", "mem_margin_frac"} | {
        "descent_gain_max",
        "descent_short",
        "descent_idle_util",
    }


def test_the_walk_defaults_are_the_tunings_and_reach_it_once() -> None:
    tuning = settings().tuning
    assert all(getattr(tuning, k) == getattr(Tuning(), k) for k in WALK_KEYS)
    assert (tuning.descend, tuning.throughput, tuning.noise) == (False, False, 0.0)  # min_avg_util grows with envs
    given = settings("descent_idle_util=30", "strategy=walk", "objective=samples_per_s").tuning
    assert (given.descent_idle_util, str(given.strategy), given.descend, given.throughput) == (30.0, "walk", True, True)


def test_the_schema_composes_its_choices_as_their_words() -> None:
    text = OmegaConf.to_yaml(OmegaConf.structured(SweepConf))
    for line in ("objective: min_avg_util", "strategy: model", "device: auto", "settings_change: refuse"):
        assert line in text.splitlines(), line
    for line in ("  kind: auto", "  launcher: direct", "  emulate_by: auto", "  policy: wait", "  progress: ''"):
        assert line in text.splitlines(), line


@pytest.mark.parametrize(
    ("override", "key", "member"),
    [
        ("workload.kind=command", "kind", Kind.COMMAND),
        ("workload.launcher=torchrun", "launcher", Launcher.TORCHRUN),
        ("workload.emulate_by=ballast", "emulate_by", EmulateBy.BALLAST),
        ("workload.progress=jsonl", "progress", ProgressKind.JSONL),
    ],
    ids=["kind", "launcher", "emulate_by", "progress"],
)
def test_a_workload_choice_is_its_member(override: str, key: str, member: object) -> None:
    assert getattr(settings(override, "case.method=amp").workload, key) is member


def test_no_progress_given_stays_the_kinds_own() -> None:
    assert settings().workload.progress == ""


def test_a_resume_takes_back_the_walk_and_rebuilds_what_the_objective_implies() -> None:
    started = settings("objective=samples_per_s", "descent_short=false", "workload.launcher=torchrun")
    resumed = recorded.adopt(settings(), recorded.record(started), given=())
    assert resumed.tuning == started.tuning and resumed.objective is started.objective
    assert resumed.workload.launcher is Launcher.TORCHRUN
