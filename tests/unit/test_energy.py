"""Energy: the window's joules from NVML's energy counter or its power readings integrated, and samples per joule;
the sampler against the NVML stand-in in both modes (a counter; NotSupported, so power), and the pick by it."""

from __future__ import annotations

import logging

import pytest

from ladder.core import pick
from ladder.core.measure.energy import Power, counter_power, energy_figures, gpu_power, integrated_power, per_joule
from ladder.core.measure.usage import figures
from ladder.core.measure.window import Window
from ladder.core.records import Objective, Phase, Point, Reason, Sample, Source, Status, TrialRecord
from ladder.runner.nvml import NvmlSampler
from tests.nvml_fake import FakeGpu, FakeNvml

TICK_S = 0.1


def run_ticks(nvml: FakeNvml, sampler: NvmlSampler, seconds: float) -> list[Sample]:
    out: list[Sample] = []
    for _ in range(round(seconds / TICK_S)):
        nvml.run(TICK_S)
        out += sampler.sample(nvml.now)
    return out


# ---------------------------------------------------------------- the pure figures


def test_the_counters_rise_over_the_time_between_its_first_and_last_reading() -> None:
    assert counter_power([(10.0, 5_000_000.0), (12.0, 5_000_500.0), (14.0, 5_001_200.0)]) == pytest.approx(0.3)
    assert counter_power([(10.0, 4.2e12), (20.0, 4.2e12 + 3_000_000.0)]) == pytest.approx(300.0)  # no float loss


@pytest.mark.parametrize(
    "readings",
    [[], [(1.0, 5.0)], [(1.0, 5.0), (1.0, 9.0)], [(1.0, 9_000.0), (2.0, 1_000.0)]],
    ids=["none", "one", "no-time", "went-back"],
)
def test_a_counter_read_too_little_or_reset_gives_no_power(readings: list[tuple[float, float]]) -> None:
    assert counter_power(readings) is None


def test_power_is_integrated_by_its_own_gaps_when_readings_come_unevenly() -> None:
    # 100 W for 1 s, then 300 W read once more 3 s later: trapezoids (100·1 + 100→300 over 3 s) over 4 s
    readings = [(0.0, 100.0), (1.0, 100.0), (4.0, 300.0)]
    assert integrated_power(readings) == pytest.approx((100.0 * 1 + 200.0 * 3) / 4)
    assert integrated_power([(0.0, 100.0)]) is None and integrated_power([(2.0, 50.0), (2.0, 70.0)]) is None


def test_the_counter_wins_over_power_and_power_stands_in_where_it_is_missing() -> None:
    both = [Sample(0.0, 0, 0, 0, energy_mj=0.0, power_w=10.0), Sample(2.0, 0, 0, 0, energy_mj=400_000.0, power_w=10.0)]
    assert gpu_power(both) == Power(200.0, counter=True)
    only_power = [Sample(t, 0, 0, 0, power_w=w) for t, w in ((3.0, 50.0), (0.0, 50.0), (1.0, 150.0))]  # out of order
    assert gpu_power(only_power) == Power((100.0 + 200.0) / 3, counter=False)  # by time: 0-1 s, 1-3 s
    assert gpu_power([Sample(0.0, 0, 0, 0), Sample(1.0, 0, 0, 0)]) is None  # neither: no figure, not zero


def test_the_windows_figures_sum_its_gpus_and_say_which_source_gave_them() -> None:
    inside = [Sample(t, 0, 0, 0, energy_mj=1e9 + 250_000 * t) for t in (0.0, 1.0, 2.0)]  # 250 W, counter
    inside += [Sample(t, 1, 0, 0, power_w=150.0) for t in (0.0, 0.7, 2.0)]  # 150 W, power only
    rate = {"samples_per_s": 8000.0, "samples_per_s_lo": 7600.0, "samples_per_s_hi": 8400.0}
    f = energy_figures(inside, 2.0, rate)
    assert (f["avg_power_w0"], f["avg_power_w1"], f["avg_power_w"]) == (250.0, 150.0, 400.0)
    assert (f["energy_j0"], f["energy_j1"], f["energy_j"]) == (500.0, 300.0, 800.0)
    assert f["energy_counter"] == 0.0  # one GPU's joules were integrated
    assert (f["samples_per_joule"], f["samples_per_joule_lo"], f["samples_per_joule_hi"]) == (20.0, 19.0, 21.0)
    assert f["samples_per_joule"] == pytest.approx(8000.0 * 2.0 / f["energy_j"])  # the window's samples per joule
    assert energy_figures(inside[:3], 2.0, {})["energy_counter"] == 1.0
    assert "samples_per_joule" not in energy_figures(inside[:3], 2.0, {})  # no rate: joules, but no per joule
    assert energy_figures([Sample(0.0, 0, 0, 0)], 2.0, rate) == {}
    assert per_joule({"samples_per_s": 10.0, "samples_per_s_hi": float("inf")}, 4.0) == {
        "samples_per_joule": 2.5,
        "samples_per_joule_hi": float("inf"),  # one step: unbounded, as samples/s's own
    }


def test_a_gpu_windows_figures_carry_energy_and_a_host_ones_none() -> None:
    points = [Point(100.0 + i, i, 1000.0 * i) for i in range(12)]  # 1000 samples/s
    window = Window(102.0, 110.0, gated=True)
    gpu = [Sample(100.0 + i / 2, 0, 60.0, 900.0, energy_mj=2e9 + 200_000 * i / 2) for i in range(24)]  # 200 W
    f = figures(gpu, points, window, 99.0)
    assert f["samples_per_s"] == 1000.0 and f["avg_power_w"] == 200.0 and f["energy_counter"] == 1.0
    assert f["energy_j"] == pytest.approx(200.0 * f["window_s"]) and f["samples_per_joule"] == 5.0
    host = [Sample(s.t, 0, 60.0, 900.0, Source.HOST) for s in gpu]
    assert not {k for k in figures(host, points, window, 99.0) if "energy" in k or "joule" in k or "power" in k}


# ---------------------------------------------------------------- the sampler against the stand-in


def test_the_sampler_reads_the_counter_where_the_gpu_has_one() -> None:
    gpu = FakeGpu()
    nvml = FakeNvml(gpu)
    sampler = NvmlSampler([0], nvml=nvml)
    gpu.power_w = 300.0
    series = run_ticks(nvml, sampler, 2.0)
    gpu.power_w = 100.0
    series += run_ticks(nvml, sampler, 2.0)
    assert all(s.energy_mj is not None and s.power_w is None for s in series)
    power = gpu_power(series)
    assert power is not None and power.counter
    assert power.watts == pytest.approx((300.0 * 1.9 + 100.0 * 2.0) / 3.9, rel=0.01)  # first to last reading


def test_a_gpu_without_a_counter_has_its_power_integrated(caplog: pytest.LogCaptureFixture) -> None:
    gpu = FakeGpu(name="Tesla P100-PCIE-16GB", gpm=False, counter=False)
    nvml = FakeNvml(gpu)
    with caplog.at_level(logging.INFO, logger="ladder.runner.nvml"):
        sampler = NvmlSampler([0], nvml=nvml)
        gpu.power_w = 120.0
        series = run_ticks(nvml, sampler, 3.0)
    assert all(s.energy_mj is None and s.power_w == 120.0 for s in series)
    power = gpu_power(series)
    assert power is not None and not power.counter and power.watts == pytest.approx(120.0)
    assert sum("no energy counter" in r.getMessage() for r in caplog.records) == 1  # said once, not every tick


def test_a_gpu_that_reads_neither_has_no_energy_and_still_samples() -> None:
    gpu = FakeGpu(gpm=False, counter=False, power=False)
    nvml = FakeNvml(gpu)
    series = run_ticks(nvml, NvmlSampler([0], nvml=nvml), 1.0)
    assert series and all(s.energy_mj is None and s.power_w is None for s in series)
    assert gpu_power(series) is None


# ---------------------------------------------------------------- the pick by it


def _record(envs: int, per_joule: float, sps: float) -> TrialRecord:
    figs = {"samples_per_s": sps, "samples_per_joule": per_joule, "min_avg_util": 80.0}
    figs |= {"samples_per_joule_lo": per_joule * 0.99, "samples_per_joule_hi": per_joule * 1.01}
    return TrialRecord("c", "m", "default", envs, Phase.PROBE, Status.OK, Reason.NONE, "", figs, {})


def test_objective_samples_per_joule_picks_the_most_frugal_rung_not_the_fastest() -> None:
    records = [_record(1024, 4.0, 12000.0), _record(512, 6.0, 9000.0), _record(256, 5.0, 6000.0)]
    assert pick.best(records, Objective.SAMPLES_PER_JOULE).num_envs == 512  # type: ignore[union-attr]
    assert pick.best(records, Objective.SAMPLES_PER_S).num_envs == 1024  # type: ignore[union-attr]
    assert pick.OTHER[Objective.SAMPLES_PER_JOULE] == Objective.SAMPLES_PER_S  # a tie is broken by speed
