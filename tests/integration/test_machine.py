"""What the sweep runs on: the GPUs NVML finds, narrowed by CUDA_VISIBLE_DEVICES (a scheduler's allocation).

NVML is the hardware boundary: a stand-in with four H100s replaces the library (tests/nvml_fake.py).
"""

from __future__ import annotations

import pytest

from ladder.core.errors import LadderError
from ladder.runner.machine import find_machine
from tests.nvml_fake import FakeNvml
from tests.unit.test_config import settings


def test_all_of_the_hosts_gpus_without_an_allocation(four_gpus: FakeNvml) -> None:
    machine = find_machine(settings())
    assert (machine.device, machine.gpus, machine.nproc) == ("cuda", (0, 1, 2, 3), 4)
    assert machine.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}  # CUDA numbers GPUs as NVML does
    assert machine.describe["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_a_schedulers_allocation_is_what_trials_run_on_and_what_is_sampled(
    four_gpus: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    machine = find_machine(settings())
    assert (machine.gpus, machine.nproc) == ((2, 3), 2)  # ranks see cuda:0,1 = NVML 2,3


def test_an_empty_allocation_means_the_cpu(four_gpus: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    machine = find_machine(settings())
    assert (machine.device, machine.gpus, machine.nproc) == ("cpu", (), 2)
    with pytest.raises(LadderError, match="or CUDA_VISIBLE_DEVICES is empty"):
        find_machine(settings("device=cuda"))


def test_device_cpu_never_looks_for_gpus(four_gpus: FakeNvml) -> None:
    machine = find_machine(settings("device=cpu"))
    assert (machine.device, machine.gpus, machine.env) == ("cpu", (), {})
