"""Device leases between real processes: two holders never share a slot, a waiter gets the freed one, a killed
holder's slot comes free."""

from __future__ import annotations

from pathlib import Path

import pytest
from filelock import FileLock

from ladder.runner import lease
from ladder.runner.lease import DeviceKind, Lease, LeaseError


def test_a_lease_is_held_for_the_block_and_released_after(tmp_path: Path) -> None:
    with lease.acquire(2, [3, 5, 7], tmp_path, 1, DeviceKind.GPU, "case x") as got:
        assert got == Lease(DeviceKind.GPU, (3, 5))
        assert lease.try_take(2, [3, 5, 7], tmp_path, DeviceKind.GPU) is None  # only GPU 7 is left
        assert "case x" in lease.holder_path(tmp_path, DeviceKind.GPU, 3).read_text()
        with lease.acquire(1, [3, 5, 7], tmp_path, 1) as other:
            assert other.devices == (7,)
    assert not lease.holder_path(tmp_path, DeviceKind.GPU, 3).exists()
    with lease.acquire(3, [3, 5, 7], tmp_path, 1) as everything:
        assert everything.devices == (3, 5, 7)


def test_gpu_and_cpu_leases_are_separate_namespaces(tmp_path: Path) -> None:
    with lease.acquire(1, [0], tmp_path, 1, DeviceKind.GPU), lease.acquire(1, [0], tmp_path, 1, DeviceKind.CPU) as cpu:
        assert cpu.devices == (0,)


def test_no_free_device_in_time_is_an_error_naming_the_holders(tmp_path: Path) -> None:
    busy = FileLock(str(lease.lock_path(tmp_path, DeviceKind.GPU, 0)))
    with busy, pytest.raises(LeaseError, match=r"no 1 free gpu\(s\) of \[0\] within 0 s") as err:  # noqa: SIM117
        with lease.acquire(1, [0], tmp_path, timeout_s=0):
            pass
    assert "gpu*.holder" in err.value.fix


@pytest.mark.parametrize("n, pool", [(0, [0, 1]), (3, [0, 1]), (2, [1, 1])], ids=["zero", "more-than-pool", "dup"])
def test_impossible_requests_are_refused_at_once(tmp_path: Path, n: int, pool: list[int]) -> None:
    with pytest.raises(LeaseError, match="cannot lease"), lease.acquire(n, pool, tmp_path, timeout_s=3600):
        pass


def test_lease_env() -> None:
    assert lease.lease_env(Lease(DeviceKind.GPU, (2, 3))) == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "2,3",
    }
    assert lease.lease_env(Lease(DeviceKind.CPU, (1,))) == {"LADDER_CPU_SLOTS": "1"}


@pytest.mark.parametrize(
    "env, pool",
    [({}, (0, 1, 2, 3)), ({"CUDA_VISIBLE_DEVICES": "2,3"}, (2, 3)), ({"CUDA_VISIBLE_DEVICES": ""}, ())],
    ids=["whole-host", "slurm-allocation", "none-given"],
)
def test_visible_pool(env: dict[str, str], pool: tuple[int, ...]) -> None:
    assert lease.visible_pool(env, 4) == pool


def test_visible_pool_refuses_uuids() -> None:
    with pytest.raises(LeaseError, match="not a list of GPU indices"):
        lease.visible_pool({"CUDA_VISIBLE_DEVICES": "GPU-8d6c1f2e"}, 4)
