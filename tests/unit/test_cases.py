"""The case catalogue (conf/case): one conf per trainable MimicKit case, each composing, each runnable by the proxy."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ladder.settings.argv import known_cases
from ladder.settings.config import Settings, register, settings_from
from tests.helpers import DATA, REPO

ROOT = REPO
MIMICKIT = DATA / "mimickit"
CONF = str(ROOT / "conf")
METHODS = {"add", "amp", "ase", "deepmimic", "lcp", "smp", "vault"}
ROBOTS = {"g1", "go2", "humanoid", "humanoid_sword_shield", "pi_plus", "smpl"}
CASES = known_cases()
register()


def settings(case: str, *overrides: str) -> Settings:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return settings_from(compose(config_name="config", overrides=[f"case={case}", *overrides]), CASES)


def args_file_keys(path: Path) -> dict[str, str]:
    tokens = path.read_text().split()
    return {k[2:]: v for k, v in zip(tokens, tokens[1:], strict=False) if k.startswith("--")}


def test_the_catalogue_is_every_trainable_case() -> None:
    args = {p.name.removesuffix("_args.txt") for p in (MIMICKIT / "args").glob("*_args.txt")}
    assert set(CASES) == {a for a in args if not a.startswith(("view_motion_", "dof_test_"))}
    assert len(CASES) == 30  # the seed's 25, plus lcp_g1_ppo and the four smp cases


@pytest.mark.parametrize("name", CASES)
def test_case_composes(name: str) -> None:
    s = settings(name)
    case = s.case
    assert case.name == name and case.method in METHODS and case.robot in ROBOTS
    assert case.args_file == f"args/{name}_args.txt" and (MIMICKIT / case.args_file).is_file()
    assert s.ladder_name == ("pi_plus" if case.robot == "pi_plus" else "default")
    agent_file = args_file_keys(MIMICKIT / case.args_file)["agent_config"]
    if not (MIMICKIT / agent_file).is_file():  # smp_dodgeball's agent is not shipped: the task-SMP one stands in
        agent_file = "data/agents/smp_task_humanoid_agent.yaml"
    assert case.agent == OmegaConf.to_container(OmegaConf.load(MIMICKIT / agent_file))
    shape = case.proxy
    assert min(shape.obs_dim, shape.act_dim, shape.disc_obs_dim, shape.sim_state_dim) > 0


def test_pi_plus_cases_share_the_calibrated_memory_and_amp_pi_plus_keeps_its_shape() -> None:
    amp = settings("amp_pi_plus").case.proxy
    assert (amp.obs_dim, amp.act_dim, amp.disc_obs_dim, amp.sim_state_dim) == (180, 22, 450, 524288)
    for name in ("add_pi_plus", "deepmimic_pi_plus_ppo"):
        shape = settings(name).case.proxy
        assert shape.act_dim == 22 and shape.sim_state_dim == 524288
    assert all(settings(n).case.proxy.sim_state_dim < 524288 for n in ("amp_humanoid", "vault_g1", "amp_smpl"))


def test_a_case_still_takes_another_ladder() -> None:
    assert settings("add_pi_plus", "ladder=default").rungs[0] == 4096
