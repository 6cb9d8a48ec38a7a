"""One sweep, one set of settings; reuse only what still holds (issue 17, items 1-3 and 9).

The record and its comparison are pure (`ladder.settings.recorded`); end to end, `python -m ladder.search` launches real
torchrun trials (2 CPU ranks, gloo) under the emulated card, in the journal file and in a real PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir

from ladder.core.paths import SweepPaths
from ladder.core.spec import TrialSpec
from ladder.settings import recorded as sweepsettings
from ladder.settings.argv import known_cases
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import Settings, register, settings_from
from ladder.sweep import dryrun, resume

register()
CASE = "amp_pi_plus"


def settings(*overrides: str, given: tuple[str, ...] | None = None) -> Settings:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return settings_from(compose("config", overrides=list(overrides)), known_cases(), given)


def keys(*overrides: str) -> tuple[str, ...]:
    return tuple(o.split("=", 1)[0] for o in overrides)


# ---------------------------------------------------------------- the record (pure)


def test_the_record_holds_what_changes_a_trial_and_no_password_or_place() -> None:
    s = settings("storage=postgresql://u:s3cret@db/x", "workload.host_mem_limit_gb=0.5", "sweep=a")
    rec = sweepsettings.record(s)
    for key in (
        "case.name",
        "case.agent",
        "ladder.rungs",
        "ladder.knob",
        "profile",
        "profile.hiutil",
        "workload.emulate_gpu_mem_gb",
        "workload.host_mem_limit_gb",
        "workload.progress_regex",
        "measure.window_s",
        "measure.stable_tol",
        "device",
        "objective",
        "nccl_env",
        "reuse",
    ):
        assert key in rec, key
    assert rec["workload.host_mem_limit_gb"] == 0.5 and rec["profile"] == ["default", "hiutil"]
    text = repr(rec)
    assert "s3cret" not in text and "storage" not in text and "output_root" not in text and "'sweep'" not in text
    assert "workload.lease_dir" not in rec  # where a trial waits for devices changes no outcome


def test_a_resume_that_sets_nothing_takes_every_recorded_setting_back() -> None:
    first = (
        "profile=[default]",
        "ladder.rungs=[256,64]",
        "workload.emulate_gpu_mem_gb=0.7",
        "reuse=false",
        "device=cpu",
        "measure.window_s=3",
    )
    recorded = sweepsettings.record(settings(*first))
    resumed = settings("sweep=x", given=keys("sweep=x"))
    assert sweepsettings.differences(recorded, sweepsettings.record(resumed), resumed.given) == []
    back = sweepsettings.adopt(resumed, recorded, resumed.given)
    assert sweepsettings.record(back) == recorded
    assert ([p.name for p in back.profiles], back.rungs, back.workload.emulate_gpu_mem_gb, back.reuse) == (
        ["default"],
        (256, 64),
        0.7,
        False,
    )
    assert back.measure.window_s == 3 and back.device.value == "cpu"


def test_a_resume_that_sets_another_outcome_value_is_a_difference_side_by_side() -> None:
    recorded = sweepsettings.record(settings("workload.emulate_gpu_mem_gb=0.8", "profile=[default]"))
    now = ("workload.emulate_gpu_mem_gb=0.6", "profile=[default,hiutil]", "reuse=false", "ladder.rungs=[4096]")
    s = settings(*now, given=keys(*now))
    diffs = sweepsettings.differences(recorded, sweepsettings.record(s), s.given)
    assert [d[0] for d in diffs] == ["ladder.rungs", "profile", "workload.emulate_gpu_mem_gb"]
    text = sweepsettings.format_differences("mix", CASE, diffs)
    assert "  setting" in text and "recorded" in text and "now" in text
    line = next(ln for ln in text.splitlines() if "emulate_gpu_mem_gb" in ln)
    assert line.split() == ["workload.emulate_gpu_mem_gb", "0.8", "0.6"]
    # a carried setting given again (reuse) is no difference: it only changes how the sweep walks
    assert sweepsettings.adopt(s, recorded, s.given).reuse is False


def test_a_difference_inside_the_cases_agent_is_shown_by_its_leaves_not_as_two_whole_agents() -> None:
    recorded = sweepsettings.record(settings("case.agent.steps_per_iter=8", "+case.agent.extra_key=1"))
    # `case=` given again (every key of the case is set), and one leaf by name
    s = settings("case.agent.actor_epochs=7", given=("case", "case.agent.actor_epochs"))
    diffs = sweepsettings.differences(recorded, sweepsettings.record(s), s.given)
    assert [d[0] for d in diffs] == ["case.agent"]
    text = sweepsettings.format_differences("mix", CASE, diffs)
    rows = {ln.split()[0]: ln.split()[1:] for ln in text.splitlines()[1:]}
    assert rows == {
        "setting": ["recorded", "now"],
        "case.agent.steps_per_iter": ["8", "32"],
        "case.agent.actor_epochs": ["5", "7"],
        "case.agent.extra_key": ["1", "(not", "set)"],
    }
    # `case=` given whole set the two leaves the start gave: the fix names them with their recorded values
    fix = sweepsettings.changed("mix", CASE, diffs, s.given).fix
    assert "give case.agent.steps_per_iter=8 case.agent.extra_key=1 again" in fix, fix
    assert "actor_epochs" not in fix  # given by name now: a change of the user's own, not a leaf left off


def test_the_same_value_given_again_is_no_difference_and_without_given_every_value_counts() -> None:
    recorded = sweepsettings.record(settings("workload.emulate_gpu_mem_gb=0.8"))
    same = settings("workload.emulate_gpu_mem_gb=0.8", given=("workload.emulate_gpu_mem_gb",))
    assert sweepsettings.differences(recorded, sweepsettings.record(same), same.given) == []
    unknown = settings()  # programmatic callers: nothing is known to be silent, so nothing is taken back
    assert [d[0] for d in sweepsettings.differences(recorded, sweepsettings.record(unknown), None)] == [
        "workload.emulate_gpu_mem_gb"
    ]


def test_a_setting_the_record_predates_is_no_difference() -> None:
    recorded = sweepsettings.record(settings())
    del recorded["measure.window_s"]
    s = settings("measure.window_s=9", given=("measure.window_s",))
    assert sweepsettings.differences(recorded, sweepsettings.record(s), s.given) == []


# ---------------------------------------------------------------- the record in storage (journal and PostgreSQL)


def test_a_sweep_not_started_yet_is_left_alone_and_nothing_is_created(tmp_path: Path) -> None:
    s = settings(given=())
    assert resume.recorded_for(s, SweepPaths("new", tmp_path / "case_gpu_bench_new")) == s
    assert not (tmp_path / "case_gpu_bench_new").exists()


# ---------------------------------------------------------------- resume=latest


# ---------------------------------------------------------------- end to end


# ---------------------------------------------------------------- the dry run's reuse (pure)


def test_the_estimate_counts_only_what_would_launch() -> None:
    full = dryrun.estimate(8, 2, fail_s=10.0, fit_s=40.0)
    assert dryrun.estimate_left([8, 8], 10.0, 40.0) == full
    assert dryrun.estimate_left([0, 0], 10.0, 40.0).worst_s == 0.0
    one = dryrun.estimate_left([0, 3], 10.0, 40.0)
    assert 0 < one.worst_s < full.worst_s and one.expected_s <= one.worst_s
    assert "worst case 0.0 min, expected 0.0 min" in dryrun.format_estimate(dryrun.estimate_left([0], 10.0, 40.0))


def test_a_trial_that_would_not_launch_is_marked() -> None:
    spec = TrialSpec(argv=("train",), env={})
    planned = [
        dryrun.Planned("default", 256, "/t/a", spec, "reused from old#0 (oom_or_nccl)"),
        dryrun.Planned("default", 64, "/t/b", spec),
    ]
    text = dryrun.format_dry_run(CASE, "num_envs", planned)
    assert "1 of them answered without a launch" in text
    (marked,) = [ln for ln in text.splitlines() if "not launched" in ln]
    assert marked.startswith("== default e256") and "reused from old#0 (oom_or_nccl)" in marked
