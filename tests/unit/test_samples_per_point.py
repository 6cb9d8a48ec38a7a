"""A progress point can stand for the samples the user names (`workload.samples_per_point`): a number, or a
placeholder such as `{num_envs}` for a counter of vector steps, planned into the spec's `progress_samples_per_iter`,
which the readers honour (a tqdm bar over 32 envs' steps counts 32 samples a step)."""

from __future__ import annotations

import pytest

from ladder.core.errors import ConfigError
from ladder.settings.config import WorkloadConf
from ladder.workloads.planner import build, plan
from ladder.workloads.progress import parser_for
from tests.unit.test_workloads import TWO_GPUS, command, settings

BAR = b"  4%|4         | 450/10000 [00:12<04:20, 36.52it/s]\r  5%|4         | 480/10000 [00:13<04:20, 36.60it/s]\r"


@pytest.mark.parametrize(
    ("per_point", "rung", "planned"),
    [("{num_envs}", 32, 32.0), ("4096", 32, 4096.0), ("", 32, None), ("{nproc}", 8, 2.0)],
    ids=["the-knob", "a-number", "unset", "ranks"],
)
def test_samples_per_point_is_planned_into_the_spec(per_point: str, rung: int, planned: float | None) -> None:
    s = settings("amp_pi_plus")
    work = command(("train.py", "--num-envs", "{num_envs}"), progress_regex="tqdm", samples_per_point=per_point)
    spec = plan(work, s.case, s.profiles[0], rung, TWO_GPUS, "/t", 1.0, {})
    assert spec.progress_samples_per_iter == planned


def test_a_tqdm_bar_over_vector_steps_counts_every_envs_sample() -> None:
    points = parser_for("regex", "tqdm", 32.0).feed(BAR, now=100.0)
    assert [(p.iter, p.samples) for p in points] == [(450, 450 * 32.0), (480, 480 * 32.0)]
    assert [(p.iter, p.samples) for p in parser_for("regex", "tqdm").feed(BAR, now=100.0)] == [(450, 450), (480, 480)]


@pytest.mark.parametrize(
    ("per_point", "message"),
    [
        ("{num_env}", r"uses placeholder\(s\) \['num_env'\]"),
        ("{trial_dir}", r"uses placeholder\(s\) \['trial_dir'\]"),
        ("x{num_envs}", "'x1': not a positive number"),
        ("0", "'0': not a positive number"),
        ("{num_envs", "malformed"),
    ],
    ids=["misspelt", "not-a-number-placeholder", "not-a-number", "zero", "brace"],
)
def test_a_samples_per_point_that_cannot_be_a_number_is_refused_before_any_trial(per_point: str, message: str) -> None:
    s = settings("amp_pi_plus")
    work = command(("train.py", "{num_envs}"), samples_per_point=per_point)
    with pytest.raises(ConfigError, match=message):
        plan(work, s.case, s.profiles[0], 8, TWO_GPUS, "/t", 1.0, {})


def test_samples_per_point_is_a_setting_of_ones_own_trainer_only() -> None:
    with pytest.raises(ConfigError, match="workload.samples_per_point scales one's own trainer's progress"):
        build(WorkloadConf(kind="proxy", samples_per_point="{num_envs}"), "num_envs", {})  # type: ignore[arg-type]
    workload, _ = build(
        WorkloadConf(kind="command", command=["train.py", "{num_envs}"], samples_per_point="{num_envs}"),  # type: ignore[arg-type]
        "num_envs",
        {},
    )
    assert workload.command is not None and workload.command.samples_per_point == "{num_envs}"
