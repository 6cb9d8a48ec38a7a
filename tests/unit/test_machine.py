"""What the sweep runs on: the GPUs NVML finds, narrowed by CUDA_VISIBLE_DEVICES (a scheduler's allocation).

NVML is the hardware boundary: a stand-in with four H100s replaces the library (tests/nvml_fake.py).
"""

from __future__ import annotations

import pytest

from ladder.core.errors import LadderError
from ladder.runner.machine import find_machine
from tests.nvml_fake import FakeNvml
from tests.unit.test_config import settings


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
