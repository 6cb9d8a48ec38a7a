"""`trial.run` with a value to beat: a trial that clearly cannot matter closes its window early (real proxy runs)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from ladder import launch, trial
from ladder.config import MeasureConf, Profile, WorkloadConf
from ladder.monitor import HostSampler
from ladder.records import Status
from ladder.workloads.builtin import Placement, plan_proxy
from tests.test_failure_scenarios import CASE

WINDOW_S = 30.0


def run(tmp_path: Path, beat: float | None, window_s: float = WINDOW_S) -> trial.Result:
    workload = WorkloadConf(width_factor=0.125, nproc=2, emulate_gpu_mem_gb=0.2, collective_timeout_s=60.0)
    place = Placement("cpu", 2, launch.free_port(), sys.executable)
    spec = plan_proxy(CASE, Profile("default", {}), 8, workload, place, str(tmp_path), 120.0, {})
    measure = MeasureConf(warmup_iters=3, stable_k=3, stable_tol=0.5, warmup_timeout_s=60.0, window_s=window_s,
                          stall_timeout_s=60.0, trial_timeout_s=120.0, kill_grace_s=2.0)  # fmt: skip
    return trial.run(spec, tmp_path, uuid.uuid4().hex[:12], measure, HostSampler, beat=beat)


def test_a_trial_clearly_below_the_value_to_beat_is_cut_short(tmp_path: Path) -> None:
    result = run(tmp_path, beat=1e12)
    assert result.verdict.status is Status.OK
    f = result.figures
    assert f["cut"] == 1.0 and f["samples_per_s_hi"] < 1e12
    assert f["window_s"] < WINDOW_S / 3 and result.duration_s < WINDOW_S  # stopped long before the window's end


def test_a_trial_that_may_beat_it_measures_its_whole_window(tmp_path: Path) -> None:
    result = run(tmp_path, beat=0.0, window_s=4.0)
    assert result.verdict.status is Status.OK
    assert "cut" not in result.figures and result.figures["window_s"] >= 4.0
