"""Samplers: NVML against a stateful stand-in for the driver (no GPU here), host on real process trees."""

from __future__ import annotations

import logging
import statistics
from pathlib import Path
from typing import Any

import pytest

from ladder.core.measure.usage import figures
from ladder.core.records import Sample, Source
from ladder.runner.monitor import write_samples
from ladder.runner.nvml import NvmlSampler, nvml_gpu_count
from tests.helpers import DATA
from tests.nvml_fake import FakeGpu, FakeNvml

PROGRESS = DATA / "progress"
TICK_S = 0.1  # the trial's sampling period (10 Hz)


def run_ticks(nvml: FakeNvml, sampler: Any, seconds: float) -> list[Sample]:
    """The monitor's loop, on the stand-in's clock: run a tick's worth, then sample."""
    out = []
    for _ in range(round(seconds / TICK_S)):
        nvml.run(TICK_S)
        out += sampler.sample(nvml.now)
    return out


# ---------------------------------------------------------------- NVML sampler


def test_util_follows_the_driver_samples_and_ignores_what_ran_before_the_trial() -> None:
    gpu = FakeGpu()
    nvml = FakeNvml(gpu)
    gpu.util = 100.0
    nvml.run(5.0)  # someone else's job filled the buffer
    gpu.util = 0.0
    nvml.run(1.0)
    sampler = NvmlSampler([0], nvml=nvml)
    idle = run_ticks(nvml, sampler, 2.0)
    gpu.util = 90.0
    busy = run_ticks(nvml, sampler, 3.0)
    gpu.util = 30.0
    lighter = run_ticks(nvml, sampler, 3.0)
    assert {s.util for s in idle} == {0.0}
    assert [s.util for s in busy[3:]] == [90.0] * (len(busy) - 3)  # within 1/6 s of the change
    assert [s.util for s in lighter[3:]] == [30.0] * (len(lighter) - 3)
    steps = [b.t - a.t for a, b in zip(busy, busy[1:], strict=False)]
    assert steps == pytest.approx([TICK_S] * len(steps))  # each tick at the caller's time, one per tick


def test_an_idle_gpu_reads_zero_from_the_current_rate_after_the_samples_stop() -> None:
    gpu = FakeGpu()
    nvml = FakeNvml(gpu)
    sampler = NvmlSampler([0], nvml=nvml)
    gpu.util = 80.0
    run_ticks(nvml, sampler, 1.0)
    gpu.util = 0.0
    after = run_ticks(nvml, sampler, 3.0)
    assert after[0].util == 80.0  # the driver's last sample is held while it may still come ...
    assert {s.util for s in after[-15:]} == {0.0}  # ... and once a second passes without one, the GPU is idle


def test_a_device_without_the_sample_buffer_reads_the_current_rate() -> None:
    gpu = FakeGpu(name="Tesla K80", gpm=False, buffered=False)
    nvml = FakeNvml(gpu)
    sampler = NvmlSampler([0], nvml=nvml)
    gpu.util = 55.0
    series = run_ticks(nvml, sampler, 2.0)
    assert series[-1].util == 55.0 and statistics.fmean(s.util for s in series[-10:]) == 55.0


def test_gpm_sm_util_where_the_device_has_it() -> None:
    hopper, ada = FakeGpu(), FakeGpu(name="NVIDIA GeForce RTX 4090", total_mb=24564, gpm=False)
    nvml = FakeNvml(hopper, ada)
    for gpu in (hopper, ada):
        gpu.util, gpu.sm_util = 95.0, 40.0  # a kernel always runs, but on 40% of the SMs
    sampler = NvmlSampler([0, 1], nvml=nvml)
    series = run_ticks(nvml, sampler, 4.0)
    sm = {i: [s.sm_util for s in series if s.index == i and s.sm_util is not None] for i in (0, 1)}
    assert len(sm[0]) >= 3 and all(v == pytest.approx(40.0) for v in sm[0])
    assert sm[1] == []
    f = figures(series, [], None, 0.0)
    assert f["avg_sm_util0"] == pytest.approx(40.0) and "avg_sm_util1" not in f
    assert f["min_avg_util"] > 90.0  # util says "busy"; SM util says how busy


def test_describe_names_the_card_and_driver() -> None:
    sampler = NvmlSampler([0], nvml=FakeNvml(FakeGpu()))
    assert sampler.describe() == {
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_mem_total": "81559",
        "driver": "550.54.15",
        "gpm": "yes",
    }


NO_DRIVER = pytest.mark.skipif(Path("/proc/driver/nvidia").exists(), reason="this machine has NVIDIA's driver")


@NO_DRIVER
def test_no_driver_is_one_log_line_and_zero_gpus(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ladder.runner.nvml"):
        assert nvml_gpu_count() == 0  # this machine has no NVIDIA driver: the real library says so
    assert [r.getMessage() for r in caplog.records] == [
        "no NVIDIA GPU (NVMLError_LibraryNotFound): measuring host CPU% and RSS instead"
    ]


# ---------------------------------------------------------------- host sampler on real processes


def test_write_samples_keeps_every_field(tmp_path: Path) -> None:
    samples = [Sample(1.25, 0, 97.0, 20000.0, Source.NVML, 18000.0, 41.5), Sample(1.25, 1, 130.0, 900.0, Source.HOST)]
    samples += [Sample(1.35, 0, 97.0, 20000.0, energy_mj=4.2e9), Sample(1.35, 1, 97.0, 900.0, power_w=61.25)]
    write_samples(samples, tmp_path / "samples.csv")
    assert (tmp_path / "samples.csv").read_text().splitlines() == [
        "t,index,util,mem_mb,source,proc_mem_mb,sm_util,energy_mj,power_w",
        "1.250,0,97.0,20000.0,nvml,18000.0,41.5,,",
        "1.250,1,130.0,900.0,host,,,,",
        "1.350,0,97.0,20000.0,nvml,,,4200000000.0,",
        "1.350,1,97.0,900.0,nvml,,,,61.2",
    ]


# ---------------------------------------------------------------- the scripts


# ---------------------------------------------------------------- fixtures
