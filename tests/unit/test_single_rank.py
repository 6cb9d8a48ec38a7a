"""A one-rank trial started without torchrun's agent (`workload.single_rank=direct`, the default): the trainer gets
the environment torchrun would give it, runs as one supervised process group, and ends with the same verdicts.

Real processes throughout: torchrun itself tells which variables it sets, the proxy trainer runs out of a real
memory cgroup, and a gloo trainer initialises torch.distributed from the variables ladder set.
"""

from __future__ import annotations

import pytest

from ladder.core.errors import ConfigError
from ladder.core.spec import Launcher
from ladder.settings.config import Profile, WorkloadConf
from ladder.workloads.builtin import Placement, plan_proxy
from tests.integration.test_failure_scenarios import CASE


def one(single_rank: str = "direct", nproc: int = 1, proxy_ranks: str = "direct", start: str = "cold") -> Placement:
    return Placement("cpu", nproc, 29611, "python", single_rank=single_rank, proxy_ranks=proxy_ranks, proxy_start=start)


def test_one_rank_starts_the_trainer_itself_and_the_proxys_ranks_start_by_ladders_launcher() -> None:
    direct = plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), one(), "/t", 60.0, {})
    assert direct.argv[:3] == ("python", "-m", "ladder.workloads.proxy") and direct.launcher is Launcher.DIRECT
    assert direct.info["launcher"] == "direct"
    assert {direct.env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")} == {"0", "1"}
    assert direct.env["MASTER_PORT"] == "29611" and direct.env["TORCHELASTIC_USE_AGENT_STORE"] == "False"
    several = plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), one(nproc=2), "/t", 60.0, {})
    assert several.argv[:3] == ("python", "-m", "ladder.runner.ranks") and several.launcher is Launcher.DIRECT
    program = several.argv[several.argv.index("--") + 1 :]
    assert program[:3] == ("python", "-m", "ladder.workloads.proxy") and "RANK" not in several.env  # set per rank
    assert several.argv[several.argv.index("--log-dir") + 1] == "/t/ranks"
    for place in (one("torchrun"), one(nproc=2, proxy_ranks="torchrun")):
        spec = plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), place, "/t", 60.0, {})
        assert spec.argv[:3] == ("python", "-m", "torch.distributed.run") and spec.launcher is Launcher.TORCHRUN
        assert "RANK" not in spec.env and spec.info["launcher"] == "torchrun"


def test_warm_ranks_are_the_proxy_under_the_warm_client_of_this_interpreters_starter() -> None:
    for nproc in (1, 2):
        warm = plan_proxy(
            CASE, Profile("default", {}), 64, WorkloadConf(), one(nproc=nproc, start="warm"), "/t", 60, {}
        )
        cold = plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), one(nproc=nproc), "/t", 60.0, {})
        at = warm.argv.index("ladder.runner.warm")
        assert warm.argv[at - 2 : at + 2] == ("python", "-m", "ladder.runner.warm", "ladder.workloads.proxy")
        assert warm.argv[at + 2 :] == cold.argv[cold.argv.index("ladder.workloads.proxy") + 1 :]
        assert warm.warm_python == "python" and cold.warm_python == ""
    with pytest.raises(ConfigError, match="(?s)proxy_start 'hot'.*warm, cold"):
        plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), one(start="hot"), "/t", 60.0, {})


def test_an_nccl_setting_wins_over_the_contracts_default() -> None:
    spec = plan_proxy(
        CASE, Profile("default", {}), 64, WorkloadConf(), one(), "/t", 60.0, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}
    )
    assert spec.env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "3"


def test_an_unknown_single_rank_setting_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="(?s)single_rank 'agent'.*direct, torchrun"):
        plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), one("agent"), "/t", 60.0, {})
    with pytest.raises(ConfigError, match="(?s)proxy_ranks 'agent'.*direct, torchrun"):
        plan_proxy(CASE, Profile("default", {}), 64, WorkloadConf(), one(nproc=2, proxy_ranks="agent"), "/t", 60.0, {})
