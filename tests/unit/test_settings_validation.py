"""One configuration path: the composed config is validated once into the frozen `Settings`, states as enums.

Each row gives a command-line override and what `settings_from` must say: the bad key, and a fix naming a value
that works. The states the settings hold are enum members whose string form is what the records keep.
"""

from __future__ import annotations

import dataclasses
import operator
import re

import pytest

from ladder.core.caseclass import Thresholds
from ladder.core.errors import ConfigError
from ladder.core.records import Objective, PreflightPolicy
from ladder.core.walk import Strategy
from ladder.settings.config import Device, SettingsChange
from tests.unit.test_config import settings

BAD = [
    ("objective=fps", r"unknown objective 'fps'", r"use one of: min_avg_util, samples_per_s"),
    ("strategy=jump", r"unknown strategy 'jump'", r"use one of: walk, model"),
    ("preflight.policy=later", r"unknown preflight.policy 'later'", r"use one of: wait, refuse, ignore"),
    ("settings_change=maybe", r"unknown settings_change 'maybe'", r"use one of: refuse, accept"),
    ("device=tpu", r"unknown device 'tpu'", r"device=auto, device=cpu or device=cuda"),
    ("preflight.poll_s=0", r"preflight.poll_s must be > 0", r"set preflight.poll_s="),
    ("decide.vram_frac=0.2", r"low_mem_frac < vram_frac", r"decide.low_mem_frac=0.333 decide.vram_frac=0.95"),
    ("decide.vram_frac=1.5", r"vram_frac <= 1, got 0.33\d*, 1.5", r"decide.vram_frac=0.95"),
    ("decide.low_mem_frac=0", r"0 < low_mem_frac", r"decide.low_mem_frac=0.333"),
    ("decide.low_util=70", r"low_util <= compute_util", r"decide.low_util=45 decide.compute_util=60"),
    ("decide.compute_util=120", r"compute_util <= 100", r"decide.compute_util=60"),
    ("decide.low_util=-1", r"0 <= low_util", r"decide.low_util=45"),
    ("confirm_s=-1", r"confirm_s must be >= 0", r"set confirm_s=<seconds> \(0: off\)"),
    ("descent_gain_max=0.5", r"descent_gain_max must be >= 1 or null", r"descent_gain_max=1.3"),
    ("descent_idle_util=150", r"descent_idle_util must be a util between 0 and 100", r"descent_idle_util=45"),
    ("noise_carry_h=-1", r"noise_carry_h must be >= 0 hours or null", r"noise_carry_h=2 \(hours\), or null"),
    ("heartbeat_s=0", r"heartbeat_s must be > 0", r"set heartbeat_s=<seconds>"),
    ("stale_after_s=-5", r"stale_after_s must be > 0", r"set stale_after_s=<seconds>"),
    ("resume=first", r"unknown resume 'first'", r"use resume=latest"),
    ("measure.repeats=0", r"measure.repeats must be >= 1", r"measure.repeats=1"),
    ("measure.min_window_iters=1", r"min_window_iters must be >= 2", r"measure.min_window_iters=5"),
    ("workload.kind=slurm", r"unknown workload.kind 'slurm'", r"use one of: auto, proxy, mimickit, command"),
    ("workload.launcher=mpirun", r"unknown workload.launcher 'mpirun'", r"use one of: torchrun, direct"),
    ("workload.progress=csv", r"unknown workload.progress 'csv'", r"jsonl, regex, mimickit_stdout, mimickit_log"),
    ("measure.sample_hz=0", r"measure.sample_hz must be > 0", r"measure.sample_hz=<seconds>"),
]


@pytest.mark.parametrize(("override", "problem", "fix"), BAD, ids=[row[0] for row in BAD])
def test_a_bad_value_is_refused_naming_the_key_and_the_fix(override: str, problem: str, fix: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(override)
    assert caught.value.fix, "every refusal says how to fix it"
    assert re.search(problem, str(caught.value).split("\n  fix: ")[0]), str(caught.value)
    assert re.search(fix, caught.value.fix), caught.value.fix


GOOD = [
    ("objective=samples_per_s", "objective", Objective.SAMPLES_PER_S),
    ("strategy=walk", "tuning.strategy", Strategy.PLAIN),
    ("settings_change=accept", "settings_change", SettingsChange.ACCEPT),
    ("device=cpu", "device", Device.CPU),
]


@pytest.mark.parametrize(("override", "name", "member"), GOOD, ids=[row[0] for row in GOOD])
def test_a_state_is_held_as_its_enum_member_and_reads_as_its_string(override: str, name: str, member: str) -> None:
    value = operator.attrgetter(name)(settings(override))
    assert value is member
    assert value == override.split("=", 1)[1] and str(value) == override.split("=", 1)[1]


def test_the_defaults_are_the_schemas_and_the_states_are_enums() -> None:
    s = settings()
    assert (s.objective, s.tuning.strategy, s.settings_change) == (
        Objective.MIN_AVG_UTIL,
        Strategy.MODEL,
        SettingsChange.REFUSE,
    )
    assert s.preflight.policy is PreflightPolicy.WAIT
    assert s.decide == Thresholds()  # the decision table's own defaults, written once in ladder.core.caseclass
    assert s.case.agent and s.workload.kind == "auto"


@pytest.mark.parametrize("override", ["preflight.policy=refuse", "preflight.policy=ignore"])
def test_the_preflight_policy_is_its_member(override: str) -> None:
    assert settings(override).preflight.policy is PreflightPolicy(override.split("=")[1])


def test_decide_thresholds_given_reach_the_settings_frozen() -> None:
    s = settings("decide.vram_frac=0.9", "decide.compute_util=70", "decide.low_util=30", "decide.low_mem_frac=0.25")
    assert s.decide == Thresholds(vram_frac=0.9, compute_util=70.0, low_util=30.0, low_mem_frac=0.25)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.decide.vram_frac = 0.5  # type: ignore[misc]
