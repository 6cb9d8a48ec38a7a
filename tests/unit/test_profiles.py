"""The profiles (conf/profile) as patches on every agent config MimicKit ships."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir

from ladder.settings.argv import known_cases
from ladder.settings.config import Profile, register, settings_from
from ladder.workloads.profiles import apply_profile, skipped_leaves
from tests.helpers import DATA, REPO

CONF = str(REPO / "conf")
AGENTS = sorted((DATA / "mimickit" / "data" / "agents").glob("*.yaml"))
DEEP = "fc_3layers_1024units"
register()


def profiles() -> dict[str, Profile]:
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["profile=[default,hiutil,hiutil40]"])
    return {p.name: p for p in settings_from(cfg, known_cases()).profiles}


PROFILES = profiles()


def load(path: Path) -> dict[str, Any]:
    agent = yaml.safe_load(path.read_text())
    assert isinstance(agent, dict)
    return agent


def leaves(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def test_every_shipped_agent_is_here() -> None:
    assert len(AGENTS) == 21


@pytest.mark.parametrize("path", AGENTS, ids=[p.stem for p in AGENTS])
def test_default_is_the_agent_as_shipped(path: Path) -> None:
    agent = load(path)
    assert apply_profile(agent, PROFILES["default"].agent_patch) == agent


@pytest.mark.parametrize("name", ["hiutil", "hiutil40"])
@pytest.mark.parametrize("path", AGENTS, ids=[p.stem for p in AGENTS])
def test_hiutil_deepens_the_nets_the_agent_has(path: Path, name: str) -> None:
    agent = load(path)
    before = copy.deepcopy(agent)
    patched = apply_profile(agent, PROFILES[name].agent_patch)
    assert agent == before  # the input is left alone
    changed = {k for k, v in leaves(patched).items() if leaves(agent)[k] != v}
    assert set(leaves(patched)) == set(leaves(agent))  # nothing added
    nets = {f"model.{n}" for n in ("actor_net", "critic_net", "disc_net") if n in agent["model"]}
    assert all(leaves(patched)[n] == DEEP for n in nets)
    assert patched["actor_epochs"] == (20 if name == "hiutil" else 40) and patched["actor_batch_size"] == 2
    assert changed <= nets | {"actor_epochs", "actor_batch_size"}
    assert patched["model"].get("enc_net") == agent["model"].get("enc_net")  # ASE's encoder is not a hiutil net


@pytest.mark.parametrize("path", AGENTS, ids=[p.stem for p in AGENTS])
def test_skipped_leaves_name_what_the_agent_lacks(path: Path) -> None:
    agent = load(path)
    skipped = skipped_leaves(agent, PROFILES["hiutil"].agent_patch)
    assert skipped == ([] if "disc_net" in agent["model"] else ["model.disc_net"])


@pytest.mark.parametrize("name", ["default", "hiutil", "hiutil40"])
@pytest.mark.parametrize("path", AGENTS, ids=[p.stem for p in AGENTS])
def test_the_proxy_reads_every_patched_agent(tmp_path: Path, path: Path, name: str) -> None:
    from ladder.workloads.builtin import AGENT_METHODS
    from ladder.workloads.proxy import load_agent

    agent = apply_profile(load(path), PROFILES[name].agent_patch)
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(agent, sort_keys=False))
    spec = load_agent(tmp_path / "agent.yaml", AGENT_METHODS[agent["agent_name"]], 1.0)
    assert spec.epochs["actor"] == agent["actor_epochs"]
    assert spec.nets["actor"] == ((1024, 1024, 512) if agent["model"]["actor_net"] == DEEP else (1024, 1024))
