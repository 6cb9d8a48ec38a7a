"""A busy machine's pauses are no update (`trial.run` beside two CPU-burning processes this test starts): a trainer
shaped like CleanRL's PPO, read with a regex on its `global_step=` lines, is never `ok` at a rung that dies at its
first update, and still fits where its update fits. With `LADDER_CLEANRL_PPO` (the path of CleanRL's ppo.py) and
`LADDER_CLEANRL_PYTHON` (an interpreter with its requirements, gymnasium 0.29), the same on the real trainer."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ladder.core.paths import STDOUT
from ladder.core.records import Reason, Status
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.runner import trial
from ladder.runner.host import HostSampler
from ladder.settings.config import MeasureConf
from ladder.workloads.progress import per_iteration
from tests.helpers import DATA, need_memory_cgroups
from tests.unit.test_measure import conf

BURSTY = str(DATA / "trainers" / "bursty_update.py")
GLOBAL_STEP = r"global_step=(?P<samples>\d+)"  # the README's example regex: every line counted, no iter group
# a rollout of 10 steps of 0.45 CPU-s (over 0.5 s each on the busy machine: a pause of its own to a wall clock),
# 50 lines a step, then an update of 2.5 CPU-s that holds `num_envs` MiB more
BUSY_ROLLOUT = ("--busy", "--steps", "10", "--step-s", "0.45", "--update-s", "2.5", "--lines", "50")


@pytest.fixture
def burners() -> Iterator[None]:
    """Two processes that burn a CPU core each while the test runs; always killed."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def run(tmp_path: Path, argv: tuple[str, ...], regex: str, measure: MeasureConf, limit_mib: int) -> trial.Result:
    spec = TrialSpec(
        argv=argv,
        env={},
        launcher=Launcher.DIRECT,
        cwd=str(tmp_path),
        progress_file=STDOUT,
        progress_kind=ProgressKind.REGEX,
        progress_regex=regex,
        progress_per_iteration=per_iteration("regex", regex),  # as `workload.progress_regex` plans it
    )
    request = trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure, mem_limit_bytes=limit_mib * 2**20)
    return trial.run(request, HostSampler)


@pytest.mark.usefixtures("burners")
def test_a_cleanrl_shaped_trainer_on_a_busy_machine_is_never_ok_before_its_first_update(tmp_path: Path) -> None:
    """Its steps are slow and uneven on the busy machine, its lines come in bursts of one counter: neither is an
    update. At 400 envs it runs its rollout and dies at its first update (the cgroup's OOM kill is its verdict);
    at 16 its window holds an update it worked through, and it fits."""
    need_memory_cgroups()
    measure = conf(window_s=1.0, min_window_iters=4, trial_timeout_s=120.0, budget_s=120.0)
    got = {}
    for envs in (400, 16):
        (tmp_path / f"e{envs}").mkdir()
        argv = (sys.executable, BURSTY, str(envs), *BUSY_ROLLOUT)
        got[envs] = run(tmp_path / f"e{envs}", argv, GLOBAL_STEP, measure, limit_mib=300)
    assert (got[400].verdict.status, got[400].verdict.reason) == (Status.OOM_OR_NCCL, Reason.HOST_OOM), got[400]
    fit = got[16]
    assert fit.verdict.status is Status.OK and fit.stopped_by == "window_done", fit.verdict
    assert fit.figures["samples_per_s"] > 0 and fit.figures["window_held"] == 1.0  # held past one rollout's lines
    assert fit.figures["cgroup_peak_mb"] < 300


PPO, PYTHON = os.environ.get("LADDER_CLEANRL_PPO"), os.environ.get("LADDER_CLEANRL_PYTHON")
needs_cleanrl = pytest.mark.skipif(
    not (PPO and PYTHON),
    reason="set LADDER_CLEANRL_PPO (the path of CleanRL's cleanrl/ppo.py) and LADDER_CLEANRL_PYTHON (a python with "
    "its requirements: torch, gymnasium==0.29.1, tyro, tensorboard) to run the real CleanRL",
)


def ppo(num_envs: int) -> tuple[str, ...]:
    assert PPO and PYTHON
    return (PYTHON, PPO, "--num-envs", str(num_envs), "--num-steps", "128", "--total-timesteps", "100000000")


@needs_cleanrl
@pytest.mark.usefixtures("burners")
def test_real_cleanrl_on_a_busy_machine_is_not_ok_where_its_first_update_dies(tmp_path: Path) -> None:
    """CleanRL's ppo.py (CartPole, 128 steps a rollout) under a 512 MiB cgroup, read with the README's regex: 4096
    envs die at their first update, within the budget the window is held for (no update shows before), never `ok`."""
    need_memory_cgroups()
    measure = conf(window_s=8.0, min_window_iters=5, warmup_iters=3, trial_timeout_s=180.0, budget_s=540.0)
    result = run(tmp_path, ppo(4096), GLOBAL_STEP, measure, limit_mib=512)
    assert (result.verdict.status, result.verdict.reason) == (Status.OOM_OR_NCCL, Reason.HOST_OOM), result.verdict


@needs_cleanrl
@pytest.mark.usefixtures("burners")
def test_real_cleanrl_read_by_its_preset_fits_where_its_update_fits(tmp_path: Path) -> None:
    """The same trainer at 1024 envs, read by the `cleanrl` preset (its once-an-iteration `SPS:` lines): a fit,
    with samples/s."""
    need_memory_cgroups()
    measure = conf(window_s=8.0, min_window_iters=2, trial_timeout_s=600.0, budget_s=900.0)
    result = run(tmp_path, ppo(1024), "cleanrl", measure, limit_mib=512)
    assert result.verdict.status is Status.OK, result.verdict
    assert result.figures["samples_per_s"] > 0
