"""Energy end to end on CPU: a real proxy sweep whose trials have a stand-in GPU (tests/nvml_fake.py, the hardware
boundary) sampled as NVML, chosen by `objective=samples_per_joule`: the figure reaches trials.tsv and
best_by_case.tsv, and the report's tables. Without a GPU that objective is refused before anything runs."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

import psutil
import pytest

from ladder.core.errors import ConfigError
from ladder.core.records import Objective
from ladder.runner.host import HostSampler
from ladder.runner.machine import find_machine
from ladder.runner.monitor import SLOW_S, JointSampler, Sampler
from ladder.runner.nvml import NvmlSampler
from ladder.storage.tsv import read_tsv
from ladder.sweep import loop, resume
from ladder.sweep import trials as sweep_trials
from ladder.ui.report.page import summary_md
from ladder.ui.view import PlainView
from tests.helpers import LIGHT_PROXY
from tests.nvml_fake import FakeGpu, FakeNvml
from tests.unit.test_config import settings

FAST = (
    "case=amp_pi_plus",
    "profile=[default]",
    "ladder.rungs=[64,32]",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "workload.nproc=1",
    "reuse=false",
    LIGHT_PROXY,
)


def test_samples_per_joule_on_cpu_is_refused_before_any_trial(four_gpus: FakeNvml) -> None:
    with pytest.raises(ConfigError, match="objective=samples_per_joule needs a GPU's energy"):
        find_machine(settings("device=cpu", "objective=samples_per_joule"))
    assert find_machine(settings("objective=samples_per_joule")).device == "cuda"  # a GPU: its figure is there


def test_a_sweep_by_samples_per_joule_writes_it_to_both_tsvs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeGpu(counter=True)
    gpu.last_window = [60.0]  # a busy GPU
    nvml = FakeNvml(gpu, clock=time.time)  # its counter grows with the trials' real time
    draws = {"64": 400.0, "32": 100.0}  # W: 64 envs draw four times what 32 do

    def sampler_for(
        devices: list[int], pid: int, trial_id: str = "", ballast_mb: Mapping[int, float] | None = None
    ) -> Sampler:
        argv = psutil.Process(pid).cmdline()  # the trial's own: the proxy with its --num-envs
        gpu.power_w = draws[argv[argv.index("--num-envs") + 1]]
        return JointSampler(NvmlSampler([0], pid, trial_id, nvml=nvml), HostSampler(pid, every_s=SLOW_S))

    monkeypatch.setattr(sweep_trials, "sampler_for", sampler_for)
    s = settings(*FAST, "device=cpu", "objective=samples_per_joule", f"output_root={tmp_path}/out")
    machine = find_machine(dataclasses.replace(s, objective=Objective.SAMPLES_PER_S))  # CPU ranks, the GPU faked
    paths = resume.paths_for(s, datetime.now(timezone.utc))
    loop.run(s, paths, machine, PlainView())

    rows = read_tsv(paths.trials_tsv)
    assert {(r["num_envs"], r["status"]) for r in rows} == {("64", "ok"), ("32", "ok")}
    for r in rows:  # the window's samples over its joules, from the counter
        watts = draws[r["num_envs"]]
        assert float(r["avg_power_w"]) == pytest.approx(watts, rel=0.05) and r["energy_counter"] == "1"
        assert float(r["samples_per_joule"]) == pytest.approx(float(r["samples_per_s"]) / watts, rel=0.05)
        assert float(r["energy_j"]) == pytest.approx(watts * float(r["window_s"]), rel=0.05)
    [best] = read_tsv(paths.best_tsv)
    assert (best["objective"], best["num_envs"]) == ("samples_per_joule", "32")  # the frugal rung, not the fast one
    assert float(best["samples_per_joule"]) == max(float(r["samples_per_joule"]) for r in rows)
    assert float(best["samples_per_s"]) < max(float(r["samples_per_s"]) for r in rows)
    report = summary_md(paths.sweep, [best], read_tsv(paths.trials_tsv))
    assert "| samples/s | samples/J |" in report and "picked on samples per joule" in report
