"""What the sweep runs on: the GPUs NVML finds, narrowed by CUDA_VISIBLE_DEVICES (a scheduler's allocation).

NVML is the hardware boundary: a stand-in with four H100s replaces the library (tests/test_monitor.py's FakeNvml).
"""

from __future__ import annotations

import pytest

from ladder.core.errors import LadderError
from ladder.runner import monitor
from ladder.runner.machine import find_machine
from tests.unit.test_config import settings
from tests.unit.test_monitor import FakeGpu, FakeNvml


@pytest.fixture
def four_gpus(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    nvml = FakeNvml(*(FakeGpu() for _ in range(4)))
    monkeypatch.setattr(monitor, "_nvml", lambda: nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return nvml


def test_more_ranks_than_visible_gpus_or_a_gpu_that_is_not_there_is_refused(
    four_gpus: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(LadderError, match=r"2 GPU\(s\) per trial asked for, but 1 visible: \[1\]") as err:
        find_machine(settings("workload.nproc=2"))
    assert "lower workload.nproc" in err.value.fix
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,7")
    with pytest.raises(LadderError, match=r"names GPU\(s\) \[7\], but NVML finds 4"):
        find_machine(settings())
