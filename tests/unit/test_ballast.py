"""The emulated card for any trainer, pure parts: which trials get a ballast, how much it holds, when it cannot make
the card, and figures net of it (`ladder.core.ballast`, the NVML sampler with the stand-in)."""

from __future__ import annotations

import pytest

from ladder.core import ballast
from ladder.core.ballast import Device, Mode
from ladder.core.errors import ConfigError
from ladder.core.spec import EmulateBy
from ladder.runner.machine import emulated_card_gb, emulation, find_machine
from ladder.runner.nvml import NvmlSampler
from ladder.sweep.dryrun import settings_lines
from ladder.ui.report.charts import card_memory
from ladder.ui.summary import capped
from tests.nvml_fake import FakeGpu, FakeNvml
from tests.unit.test_workloads import settings

H100 = Device(0, total_mb=81559.0, used_mb=530.0)
COMMAND = ("workload.kind=command", "workload.cmd='python train.py --num-envs {num_envs}'")


@pytest.mark.parametrize(
    ("proxy", "device", "by", "expected"),
    [
        (True, "cpu", EmulateBy.AUTO, Mode.OWN),  # on CPU nothing changes: the proxy's data segment
        (True, "cpu", EmulateBy.BALLAST, Mode.OWN),
        (False, "cpu", EmulateBy.AUTO, Mode.NONE),  # another trainer on CPU: the memory cgroup is its cap
        (True, "cuda", EmulateBy.AUTO, Mode.OWN),
        (True, "cuda", EmulateBy.FRACTION, Mode.OWN),
        (True, "cuda", EmulateBy.BALLAST, Mode.BALLAST),  # the cross-check of the two ways on the demo
        (False, "cuda", EmulateBy.AUTO, Mode.BALLAST),  # any trainer on a GPU
        (False, "cuda", EmulateBy.BALLAST, Mode.BALLAST),
    ],
)
def test_which_trials_get_a_ballast(proxy: bool, device: str, by: EmulateBy, expected: Mode) -> None:
    assert ballast.mode(4.0, proxy, device, by) is expected
    assert ballast.mode(None, proxy, device, by) is Mode.NONE


def test_the_proxys_fraction_asked_of_another_trainer_is_a_setting_to_fix() -> None:
    with pytest.raises(ConfigError) as err:
        ballast.mode(4.0, False, "cuda", EmulateBy.FRACTION)
    assert "workload.emulate_by=auto" in err.value.fix


def test_the_ballast_leaves_free_what_the_smaller_card_would_have() -> None:
    card = 24 * 1024.0
    aim = ballast.aim_free_mb(H100, card)
    assert aim == card - H100.used_mb  # the driver's share at rest is the smaller card's too
    free_with_context = H100.total_mb - H100.used_mb - 500.0
    held = ballast.hold_mb(free_with_context, H100, card)
    assert held % ballast.GRANULE_MB == 0 and 0 <= free_with_context - held - aim < ballast.GRANULE_MB
    assert ballast.off_target(H100, card, free_with_context - held) == ""


def test_a_card_not_smaller_than_the_gpu_is_refused_with_the_fix() -> None:
    why = ballast.refusal(H100, 81559.0)
    assert "GPU 0 has 81559 MiB" in why and "workload.emulate_gpu_mem_gb below 79.6" in why
    assert ballast.refusal(H100, 24 * 1024.0) == ""


def test_a_holder_that_misses_the_card_says_which_way() -> None:
    card = 2048.0
    aim = ballast.aim_free_mb(H100, card)
    assert "could not take enough" in ballast.off_target(H100, card, aim + 4 * ballast.SLACK_MB)
    too_close = ballast.off_target(H100, card, aim - 4 * ballast.SLACK_MB)  # its context alone took too much
    assert "lower workload.emulate_gpu_mem_gb" in too_close
    assert ballast.hold_mb(aim - 100.0, H100, card) == 0.0


def test_figures_are_net_of_the_ballast_and_it_is_recorded_beside_them() -> None:
    assert ballast.net_mb(60_000.0, 57_000.0) == 3_000.0
    assert ballast.net_mb(100.0, 57_000.0) == 0.0
    assert ballast.figures({0: 57_020.0, 1: 57_010.5}, 24576.0) == {"ballast_mb": 57020.0, "ballast_card_mb": 24576.0}
    assert ballast.figures({}, 24576.0) == {}


def test_the_nvml_sampler_takes_each_gpus_memory_net_of_its_ballast() -> None:
    nvml = FakeNvml(FakeGpu(), FakeGpu())
    nvml.gpus[0].procs = {111: 57_000.0, 222: 3_000.0}  # the holder and the trainer
    nvml.gpus[1].procs = {333: 3_000.0}  # no ballast on this one
    plain = NvmlSampler([0, 1], nvml=nvml).sample(nvml.now)
    net = NvmlSampler([0, 1], nvml=nvml, ballast_mb={0: 57_000.0}).sample(nvml.now)
    assert net[0].mem_mb == pytest.approx(plain[0].mem_mb - 57_000.0) and net[0].mem_mb == pytest.approx(3_530.0)
    assert net[1].mem_mb == plain[1].mem_mb


def test_the_card_applies_to_any_trainer_on_a_gpu_and_the_dry_run_says_how() -> None:
    trainer = settings("amp_pi_plus", *COMMAND, "workload.emulate_gpu_mem_gb=4")
    assert emulation(trainer, "cuda") is Mode.BALLAST and emulated_card_gb(trainer, "cuda") == 4.0
    assert emulation(trainer, "cpu") is Mode.NONE and emulated_card_gb(trainer, "cpu") is None
    text = "\n".join(settings_lines(trainer, 1, "cuda", 4.0, {}, {}))
    assert "emulated card 4 GB per GPU (4096 MiB): a ballast holds the rest of each of a trial's GPUs" in text
    proxy = settings("amp_pi_plus", "workload.emulate_gpu_mem_gb=4", "workload.emulate_by=ballast")
    assert emulation(proxy, "cuda") is Mode.BALLAST and emulation(proxy, "cpu") is Mode.OWN


def test_an_unknown_emulate_by_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as err:
        settings("amp_pi_plus", "workload.emulate_by=holder")
    assert "auto, ballast, fraction" in err.value.fix


def test_results_under_a_ballast_are_recorded_for_the_card_it_emulates(four_gpus: FakeNvml) -> None:
    """The card is part of the results' hardware key (best_by_case.tsv merges by it): a 4 GB card's answer on an
    H100 must not meet the H100's own."""
    machine = find_machine(settings("amp_pi_plus", *COMMAND, "workload.emulate_gpu_mem_gb=4", "workload.nproc=1"))
    assert machine.describe["gpu_mem_total"] == "4096" and machine.describe["gpu_mem_physical"] == "81559"
    plain = find_machine(settings("amp_pi_plus", *COMMAND, "workload.emulate_gpu_mem_gb=null", "workload.nproc=1"))
    assert plain.describe["gpu_mem_total"] == "81559" and "gpu_mem_physical" not in plain.describe


def test_the_console_and_the_report_show_the_card_a_ballast_held() -> None:
    figures = {"max_mem0": 2100.0, "ballast_mb": 77_300.0, "ballast_card_mb": 4096.0}
    assert capped(figures) == " card=4096 MiB (ballast 77300 MiB held)"
    assert capped({"cap_used_mb": 300.0, "cap_mb": 614.0}) == " cap=300/614 MiB"  # the proxy's own cap, as before
    row = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_mem_total": "4096", "ballast_card_mb": "4096"}
    assert card_memory([row]) == (4096.0, "emulated card (a ballast held the rest): 4096 MiB")
