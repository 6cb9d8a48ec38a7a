"""The ballast holder's life, with real processes: it holds each of a trial's GPUs down to the emulated card, gives the
memory back when stopped, dies with the sweep (even by SIGKILL), and when it cannot make the card the sweep gets one
clear error and no holder is left. The GPUs are the stand-in of `tests/ballast_fake.py` (the hardware boundary):
a driver's memory bookkeeping in a file, where what a dead process held counts no more."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from ladder.core import ballast
from ladder.core.errors import LaunchError
from ladder.runner.ballast import Holder
from ladder.runner.machine import Machine
from ladder.sweep import trials
from ladder.sweep.context import Run
from tests import ballast_fake
from tests.helpers import REPO, wait_for
from tests.unit.test_workloads import settings

H100_MB = 81559.0
CARD_MB = 4096.0


def env_for(gpus: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        ballast_fake.VAR: str(gpus),
        "LADDER_BALLAST_BACKEND": ballast_fake.SPEC,
    }


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_each_gpu_is_held_down_to_the_card_and_given_back(tmp_path: Path) -> None:
    gpus = ballast_fake.write(tmp_path / "gpus.json", [H100_MB] * 4)
    holder = Holder.start([2, 0], CARD_MB, env_for(gpus))  # a lease's GPUs, by NVML index, in its order
    try:
        assert set(holder.held_mb) == {2, 0}
        for index in (0, 2):
            free = H100_MB - ballast_fake.used_mb(gpus, index)
            assert abs(free - (CARD_MB - 530.0)) <= ballast.GRANULE_MB  # what a 4 GB card has free at rest
            assert holder.held_mb[index] == pytest.approx(ballast_fake.used_mb(gpus, index) - 530.0)
        assert ballast_fake.used_mb(gpus, 1) == 530.0  # a GPU outside the trial is untouched
    finally:
        code = holder.stop()
    assert code == 0 and gone(holder.proc.pid)
    assert [ballast_fake.used_mb(gpus, i) for i in range(4)] == [530.0] * 4


def test_the_holder_dies_with_a_sweep_killed_by_sigkill(tmp_path: Path) -> None:
    gpus = ballast_fake.write(tmp_path / "gpus.json", [H100_MB])
    sweep = textwrap.dedent(
        f"""
        import os, sys, time
        from ladder.runner.ballast import Holder
        holder = Holder.start([0], {CARD_MB}, dict(os.environ))
        print(holder.proc.pid, flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", sweep], stdout=subprocess.PIPE, text=True, env=env_for(gpus))
    try:
        assert proc.stdout is not None
        holder_pid = int(proc.stdout.readline())
        assert ballast_fake.used_mb(gpus, 0) > H100_MB - CARD_MB  # held while the sweep lives
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        wait_for(lambda: gone(holder_pid), timeout_s=60)
    finally:
        proc.kill()
        proc.wait()
    assert ballast_fake.used_mb(gpus, 0) == 530.0


def test_a_card_not_smaller_than_the_gpu_is_one_error_and_no_holder_is_left(tmp_path: Path) -> None:
    gpus = ballast_fake.write(tmp_path / "gpus.json", [H100_MB, 2048.0])
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(LaunchError) as err:
        Holder.start([0, 1], CARD_MB, env_for(gpus))
    said = str(err.value)
    assert "cannot emulate the card on GPU(s) 0,1: GPU 1 has 2048 MiB" in said, said
    assert "workload.emulate_gpu_mem_gb" in err.value.fix
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
    assert ballast_fake.used_mb(gpus, 0) == 530.0  # nothing held on the GPU it checked first either


def test_an_allocation_that_fails_is_said_as_the_allocator_said_it(tmp_path: Path) -> None:
    gpus = ballast_fake.write(tmp_path / "gpus.json", [H100_MB], fail="alloc")
    with pytest.raises(LaunchError) as err:
        Holder.start([0], CARD_MB, env_for(gpus))
    assert "could not allocate its ballast: CUDA out of memory. Tried to allocate" in str(err.value)
    assert ballast_fake.used_mb(gpus, 0) == 530.0  # its context went with it


def test_a_holder_that_never_answers_is_ended(tmp_path: Path) -> None:
    gpus = ballast_fake.write(tmp_path / "gpus.json", [H100_MB], fail="hang")
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(LaunchError) as err:
        Holder.start([0], CARD_MB, env_for(gpus), timeout_s=5)
    assert "said nothing within 5 s" in str(err.value)
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before


def test_a_holder_that_cannot_start_says_its_last_words(tmp_path: Path) -> None:
    env = {**env_for(tmp_path / "gpus.json"), "LADDER_BALLAST_BACKEND": "tests.no_such_module:Gpu"}
    with pytest.raises(LaunchError) as err:
        Holder.start([0], CARD_MB, env)
    assert "the holder could not reach the GPUs: ModuleNotFoundError" in str(err.value)


def test_the_sweep_holds_a_ballast_for_another_trainer_on_a_gpu_while_its_trials_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpus = ballast_fake.write(tmp_path / "gpus.json", [H100_MB] * 2)
    for name, value in env_for(gpus).items():
        monkeypatch.setenv(name, value)
    s = settings(
        "amp_pi_plus", "workload.kind=command", "workload.cmd='python train.py'", "workload.emulate_gpu_mem_gb=4"
    )
    describe = {"gpu_name": "NVIDIA H100 80GB HBM3", "gpu_mem_total": str(int(H100_MB))}
    run = Run(s, None, Machine("cuda", (0, 1), 2, sys.executable, describe), None, None, None, None)  # type: ignore[arg-type]
    assert trials.card_mb(run) == CARD_MB  # a fit's peak is judged against the emulated card, not the GPU
    with trials.ballast_held(run, None) as held:
        assert set(held) == {0, 1} and all(ballast_fake.used_mb(gpus, i) > H100_MB - CARD_MB for i in (0, 1))
        recorded = trials.ballast_figures(run, held)
        assert recorded["ballast_card_mb"] == CARD_MB and recorded["ballast_mb"] == max(held.values())
    assert [ballast_fake.used_mb(gpus, i) for i in (0, 1)] == [530.0, 530.0]
    on_cpu = Run(s, None, Machine("cpu", (), 1, sys.executable, {}), None, None, None, None)  # type: ignore[arg-type]
    with trials.ballast_held(on_cpu, None) as none:
        assert none == {}
