"""The composed config: what `python -m ladder.search` sees, and its errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from ladder.core.errors import ConfigError
from ladder.settings.argv import check_choices, env_overrides, keep_text, known_cases, unknown_keys, unwritable_root
from ladder.settings.catalog import known
from ladder.settings.config import Device, register, settings_from
from tests.helpers import REPO

CONF = str(REPO / "conf")
register()


def settings(*overrides: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return settings_from(compose(config_name="config", overrides=list(overrides)), known_cases())


def test_default_composition() -> None:
    s = settings()
    assert s.case.name == "amp_pi_plus" and s.case.method == "amp"
    assert s.rungs == (256, 128, 64, 48, 40, 38, 36, 32)  # the case picks the pi_plus ladder
    assert [p.name for p in s.profiles] == ["default", "hiutil"]
    assert s.nccl_env == {
        "NCCL_P2P_DISABLE": "1",
        "NCCL_IB_DISABLE": "1",
        "NCCL_CUMEM_ENABLE": "0",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    assert s.objective == "min_avg_util" and s.device is Device.AUTO
    assert s.case.agent["model"]["disc_net"] == "fc_2layers_1024units"
    hiutil = s.profiles[1].agent_patch
    assert hiutil["actor_epochs"] == 20 and hiutil["actor_batch_size"] == 2


def test_overrides_reach_settings() -> None:
    s = settings("ladder=default", "profile=[hiutil]", "objective=samples_per_s", "nccl_env.NCCL_P2P_DISABLE=0")
    assert s.rungs[0] == 4096 and [p.name for p in s.profiles] == ["hiutil"]
    assert s.objective == "samples_per_s" and s.nccl_env["NCCL_P2P_DISABLE"] == "0"


def test_unknown_case_lists_known_ones() -> None:
    with pytest.raises(ConfigCompositionException, match="amp_pi_plus"):
        settings("case=no_such_case")


def test_known_case_check_names_the_fix() -> None:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config")
    with pytest.raises(ConfigError, match=r"unknown case 'amp_pi_plus'\n  fix: use one of: other"):
        settings_from(cfg, ("other",))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("ladder.rungs=[64,128]", "strictly descending"),
        ("ladder.rungs=[64,64]", "strictly descending"),
        ("ladder.rungs=[64,0]", "positive integers"),
        ("ladder.rungs=[]", "no rungs"),
        ("objective=fps", "(?s)unknown objective 'fps'.*min_avg_util, samples_per_s"),
        ("device=tpu", "unknown device 'tpu'"),
        ("measure.window_s=0", "measure.window_s must be > 0"),
        ("workload.emulate_gpu_mem_gb=-1", r"emulate_gpu_mem_gb must be > 0 or null.*\n.*null for no emulated card"),
        ("workload.emulate_gpu_mem_gb=0", r"emulate_gpu_mem_gb must be > 0 or null"),
        ("workload.host_mem_limit_gb=-1", r"host_mem_limit_gb must be > 0 or null.*\n.*null for no limit"),
        ("workload.nproc=-1", r"workload.nproc must be >= 0.*\n.*0: one per visible GPU"),
        ("workload.width_factor=0", "workload.width_factor must be > 0"),
        ("measure.max_ci_frac=-0.1", "measure.max_ci_frac must be > 0"),
        ("measure.cap_headroom_frac=1", r"cap_headroom_frac must be a fraction in \[0, 1\)"),
        ("measure.stable_k=0", "measure.stable_k >= 1"),
    ],
    ids=[
        "ascending",
        "repeated",
        "zero",
        "empty",
        "objective",
        "device",
        "window",
        "negative card",
        "zero card",
        "negative cgroup",
        "negative ranks",
        "zero width",
        "negative interval",
        "headroom",
        "stable_k",
    ],
)
def test_bad_values_are_named(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings(override)


def test_unknown_profile_lists_known_ones() -> None:
    assert check_choices(["profile=[default,nope]", "case=amp_pi_plus", "window_s=3"]) == [
        f"unknown profile 'nope'; known: {', '.join(known('profile'))}"
    ]
    assert {"default", "hiutil"} <= set(known("profile"))


def test_sweeps_and_lists_are_checked_option_by_option() -> None:
    assert check_choices(["profile=[default],[hiutil]", "case=amp_pi_plus,add_pi_plus", "case=glob(amp*)"]) == []
    assert check_choices(["case=amp_pi_plus,nope"]) == [f"unknown case 'nope'; known: {', '.join(known_cases())}"]
    (typo,) = check_choices(["case=amp_pi_pluss"])  # the nearest named first, before the whole list
    assert typo.startswith("unknown case 'amp_pi_pluss' (did you mean amp_pi_plus"), typo


def test_the_write_check_leaves_alone_an_output_root_another_sweep_is_making(tmp_path: Path) -> None:
    """Sweeps started at once on one new output_root: one's write check must never remove the folder another has
    just made (it did, and that sweep then said it could not write there)."""
    vanished = []
    for round_ in range(300):
        root = tmp_path / f"r{round_}" / "out"
        start, checked = threading.Barrier(2, timeout=10), threading.Barrier(2, timeout=10)

        def other_sweep(
            root: Path = root, start: threading.Barrier = start, checked: threading.Barrier = checked
        ) -> None:
            start.wait()
            root.mkdir(parents=True, exist_ok=True)
            checked.wait()  # the other sweep's check has ended: the folder this one made must still be there
            vanished.extend([root] if not root.is_dir() else [])

        other = threading.Thread(target=other_sweep)
        other.start()
        start.wait()
        problem = unwritable_root([f"output_root={root}"])
        checked.wait()
        other.join()
        assert problem == ""
    assert vanished == []


def test_the_write_check_names_a_file_in_the_way(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    problem = unwritable_root([f"output_root={tmp_path}/f/out"])
    assert "output_root=" in problem and "Not a directory" in problem and "fix: set output_root=" in problem
    assert unwritable_root([f"output_root={tmp_path}/new/out"]) == "" and sorted(tmp_path.iterdir()) == [tmp_path / "f"]


def test_a_value_hydra_reads_as_a_number_reaches_a_text_setting_as_written() -> None:
    """`sweep=20261201_025549`, the name ladder gives a sweep, is the integer 20261201025549 to Hydra."""
    given = ["sweep=20261201_025549", "sweep=true", "output_root=2024", "workload.env.SEED=1_000", "measure.window_s=3"]
    kept = keep_text(env_overrides(given))  # as `ladder.search` hands them to Hydra
    assert kept[-1] == "measure.window_s=3"  # a number where the setting is one
    assert [settings(k) for k in kept[:3]][0].sweep == "20261201_025549"
    assert settings(kept[1]).sweep == "true" and settings(kept[2]).output_root == "2024"
    assert settings(kept[3]).workload.env == {"SEED": "1_000"}
    assert settings(*given[:1]).sweep == "20261201025549"  # what Hydra alone makes of it
    assert keep_text(["sweep=null", "sweep=a,b", "-m", "--config-dir", "x=1"]) == [
        "sweep=null",
        "sweep=a,b",
        "-m",
        "--config-dir",
        "x=1",
    ]


def test_an_unknown_case_given_to_resume_says_how_ones_own_trainer_resumes() -> None:
    (problem,) = check_choices(["case=mine", "sweep=20261201_025549"])
    assert problem.startswith("unknown case 'mine'") and "workload.kind=command" in problem
    assert "workload.kind" not in check_choices(["case=mine"])[0]


@pytest.mark.parametrize(
    ("override", "near"),
    [
        ("measure.windw_s=5", "did you mean measure.window_s?"),
        ("windw_s=5", "did you mean measure.window_s?"),
        ("objectve=samples_per_s", "did you mean objective?"),
        ("emulate_gpu_mem_gb=1", "did you mean workload.emulate_gpu_mem_gb?"),
        ("profile.hiutil.agnt.x=1", "(python -m ladder.search --help lists them)"),
    ],
)
def test_a_misspelt_setting_is_named_with_the_nearest_one(override: str, near: str) -> None:
    (problem,) = unknown_keys([override])
    assert problem.startswith(f"unknown setting '{override.split('=')[0]}'") and near in problem
    with pytest.raises(ConfigCompositionException):  # Hydra refuses it too, offering to add the typo
        settings(override)


def test_a_misspelt_setting_added_with_a_plus_is_named_too() -> None:
    """Hydra's own message for it named the schema's class (`unknown key(s) ['windw_s'] for MeasureConf`)."""
    (problem,) = unknown_keys(["+measure.windw_s=5"])
    assert problem.startswith("unknown setting 'measure.windw_s'; did you mean measure.window_s?"), problem
    assert unknown_keys(["+workload.env_patch.motion_file=x", "+case.agent.new_key=1", "~measure.window_s"]) == []


def test_settings_the_schema_has_or_holds_under_a_mapping_are_no_problem() -> None:
    given = [
        *("measure.window_s=5", "ladder.rungs=[64]", "measure=standard", "profile=[default]", "case.agent.lr=1"),
        *("profile.hiutil.agent.x=1", "workload.env.A=1", "nccl_env.X=1", "+workload.env_patch.k=1"),
        *("hydra.run.dir=x", "hydra/launcher=joblib", "decide.vram_frac=0.9", "-m", "--config-dir", "windw_s=1"),
    ]
    assert unknown_keys(given) == []
