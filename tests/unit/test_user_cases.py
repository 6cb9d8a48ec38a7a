"""A user's own trainer as a first-class workload: one-line commands, per-trial environment, the trial folder as its
working folder, cases of its own (inline or from a config folder), and only the settings that apply shown."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ladder.core.errors import ConfigError
from ladder.core.paths import SweepPaths
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.core.rows import TRIAL_HEAD, trial_row
from ladder.settings.argv import env_overrides, inline_case, quoting_problems, user_dirs
from ladder.settings.catalog import known
from ladder.settings.config import CaseConf, Profile, ProxyShape, WorkloadConf
from ladder.storage import reuse
from ladder.ui.view import LiveView
from ladder.workloads.builtin import Placement
from ladder.workloads.planner import build, plan

ONE = Placement(device="cpu", nproc=1, port=0, python="python")
CASE = CaseConf("mine", "", "", "", {}, ProxyShape())
PROFILE = Profile("default", {})


def workload(launch_dir: Path, **kw: object):  # noqa: ANN201
    inp = WorkloadConf(kind="command", **kw)  # type: ignore[arg-type]
    return build(inp, "num_envs", {"PYTHONPATH": "/opt/lib", "HOME": "/home/x"})[0]


# ---- one-line commands -------------------------------------------------------------------------------------------


def test_cmd_is_split_like_a_shell_and_never_run_through_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    work = workload(tmp_path, cmd="python train.py --name 'a b' --num-envs {num_envs} ; echo $HOME")
    spec = plan(work, CASE, PROFILE, 16, ONE, "/t", 1.0, {})
    assert spec.argv == (
        "python",
        str(tmp_path / "train.py"),
        "--name",
        "a b",
        "--num-envs",
        "16",
        ";",
        "echo",
        "$HOME",
    )
    with pytest.raises(ConfigError, match="both workload.command and workload.cmd"):
        workload(tmp_path, cmd="python t.py {num_envs}", command=("python", "t.py", "{num_envs}"))
    with pytest.raises(ConfigError, match="cannot be split"):
        workload(tmp_path, cmd="python 't.py {num_envs}")


def test_a_hydra_quoting_mistake_gets_the_form_that_parses() -> None:
    bad = ["workload.command=[python,train.py,env.train_num_envs={num_envs}]", "workload.cmd=python t.py {num_envs}"]
    problems = quoting_problems(["-m", *bad, "workload.kind=command"])
    assert len(problems) == 2 and "no viable alternative at input" in problems[0]
    fixed = [line.split("write it as: ")[1].split("  (or")[0] for line in problems]
    assert fixed[0] == """'workload.command=[python,train.py,"env.train_num_envs={num_envs}"]'"""
    assert quoting_problems([f.strip("'") for f in fixed]) == []  # what the shell hands over parses
    assert 'workload.cmd="python train.py env.train_num_envs={num_envs}"' in problems[0]


# ---- environment, working folder ---------------------------------------------------------------------------------


def test_env_is_set_recorded_and_part_of_the_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    one = plan(
        workload(tmp_path, cmd="t {num_envs}", env={"FOO": "1", "OUT": "{trial_dir}/o"}),
        CASE,
        PROFILE,
        4,
        ONE,
        reuse.TRIAL_DIR,
        1.0,
        {},
    )
    two = plan(
        workload(tmp_path, cmd="t {num_envs}", env={"FOO": "2", "OUT": "{trial_dir}/o"}),
        CASE,
        PROFILE,
        4,
        ONE,
        reuse.TRIAL_DIR,
        1.0,
        {},
    )
    assert one.env["FOO"] == "1" and one.env["OUT"] == "/ladder-trial/o"
    assert one.env["PYTHONPATH"] == "/opt/lib" and "HOME" not in one.env  # inherited: recorded ones only
    assert reuse.fingerprint(one) != reuse.fingerprint(two)  # the reuse identity hashes the spec's env
    via_env = plan(workload(tmp_path, cmd="t", env={"N": "{num_envs}"}), CASE, PROFILE, 4, ONE, "/t", 1.0, {})
    assert via_env.env["N"] == "4"  # the knob may reach the trainer through a variable


@pytest.mark.parametrize(
    ("cwd", "message"),
    [
        ("{trial_dir}/sub", "does not exist at launch"),
        ("{case}", r"placeholder\(s\) \['case'\]"),
        ("/no/such/folder", "no such folder"),
        ("{oops", "malformed"),
    ],
)
def test_cwd_is_checked_when_the_workload_is_built(tmp_path: Path, cwd: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        workload(tmp_path, cmd="t {num_envs}", cwd=cwd)


def test_cwd_defaults_to_the_trial_folder_and_takes_the_launch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert plan(workload(tmp_path, cmd="t {num_envs}"), CASE, PROFILE, 4, ONE, "/t/x", 1.0, {}).cwd == "/t/x"
    there = plan(workload(tmp_path, cmd="t {num_envs}", cwd="{launch_dir}"), CASE, PROFILE, 4, ONE, "/t", 1.0, {})
    assert there.cwd == str(tmp_path)
    module = plan(workload(tmp_path, cmd="python -m pkg.train {num_envs}"), CASE, PROFILE, 4, ONE, "/t", 1.0, {})
    assert module.env["PYTHONPATH"] == f"{tmp_path}:/opt/lib"  # `python -m` finds the launch folder's packages


# ---- cases of one's own ------------------------------------------------------------------------------------------


def test_user_cases_on_the_command_line() -> None:
    argv = ["-cd", "/a", "--config-dir=/b", "hydra.searchpath=[file:///c,pkg://x.y]", "case=amp_pi_plus"]
    assert user_dirs(argv) == ("/a", "/b", "/c")
    assert inline_case(["case=cartpole"]) == ["case=cartpole"]  # not a command workload: Hydra's own case
    assert inline_case(["case=cartpole", "workload.kind=command"]) == [
        "case=_command",
        "case.name=cartpole",
        "workload.kind=command",
    ]
    assert inline_case(["case=amp_pi_plus", "workload.kind=command"])[0] == "case=amp_pi_plus"
    assert env_overrides(["workload.env.FOO=1", "nccl_env.X=1"]) == ["++workload.env.FOO=1", "nccl_env.X=1"]
    assert "_command" not in known("case")


# ---- the knob's name ---------------------------------------------------------------------------------------------


def test_the_knob_names_folders_columns_and_the_live_view(tmp_path: Path) -> None:
    paths = SweepPaths("s", tmp_path)
    assert paths.trial("c", "default", 48, Phase.PROBE, 1).folder.name == "default_e48_probe_1"  # the seed's e<N>
    assert paths.trial("c", "default", 48, Phase.PROBE, 1, "local_num_envs").folder.name == (
        "default_local_num_envs48_probe_1"
    )
    rec = TrialRecord(
        "c",
        "",
        "default",
        10,
        Phase.PROBE,
        Status.OK,
        Reason.NONE,
        "",
        {"min_avg_util": 47.0},
        {"knob": "update_interval"},
    )
    row = trial_row(rec)
    assert (row["num_envs"], row["knob"]) == ("10", "update_interval")
    assert TRIAL_HEAD[TRIAL_HEAD.index("num_envs") + 1] == "knob"  # beside its value
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, width=150, color_system=None))
    view.sweep_started("banner", "c", [20, 10], ["default"], knob="update_interval")
    view.trial_finished(rec)
    view.trial_started("default", 20)
    view.close()
    final = view.console.file.getvalue().split("the ladder so far")[-1]  # type: ignore[attr-defined]
    assert "update_interval=20" in final and "update_interval=10" in final and "ok util 47%" in final
    assert "e20" not in final and "e10" not in final


def test_the_next_line_of_a_seeded_start_does_not_call_the_profile_done() -> None:
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, width=200, color_system=None))
    view.sweep_started("banner", "c", [256, 128, 64, 32], ["default", "hiutil"])
    for rung, status in ((256, Status.OOM_OR_NCCL), (128, Status.OOM_OR_NCCL), (64, Status.OK)):
        view.trial_finished(TrialRecord("c", "", "default", rung, Phase.PROBE, status, Reason.NONE, "", {}, {}))
    view.trial_started("hiutil", 64)  # seeded at default's pick: 128 and 256 are untried for hiutil
    view.close()
    final = view.console.file.getvalue().split("the ladder so far")[-1]  # type: ignore[attr-defined]
    assert (  # the walk's own answer: the rung above the seed, then (on a failure) the one below
        "next: on ok, hiutil e128 (just above the largest rung that fits); on oom/nccl or timeout, hiutil e32 (the "
        "highest rung left)" in " ".join(final.split())
    )
