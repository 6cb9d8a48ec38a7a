"""What the sweep runs on: the GPUs NVML finds, narrowed by CUDA_VISIBLE_DEVICES (a scheduler's allocation).

NVML is the hardware boundary: a stand-in with four H100s replaces the library (tests/nvml_fake.py). And the code a
trial ran: real git checkouts and files.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ladder.core.errors import LadderError
from ladder.runner.machine import find_machine, git_version, trainer_version
from ladder.workloads import planner
from tests.helpers import DATA
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


# ---------------------------------------------------------------- the code a trial ran


def _git(repo: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=u", "-c", "user.email=u@x", *argv], check=True, capture_output=True
    )


def test_each_edit_of_a_checkout_is_its_own_version_and_undoing_it_is_the_commit_again(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "a")
    clean = git_version(tmp_path)
    assert len(clean) == 12 and "dirty" not in clean
    (tmp_path / "a.py").write_text("x = 2\n")
    one = git_version(tmp_path)
    (tmp_path / "a.py").write_text("x = 3\n")
    other = git_version(tmp_path)
    assert one.startswith(f"{clean}-dirty.") and other.startswith(f"{clean}-dirty.") and one != other
    (tmp_path / "notes.txt").write_text("untracked")  # git's own view: a file it does not track is no edit
    assert git_version(tmp_path) == other
    (tmp_path / "a.py").write_text("x = 1\n")
    assert git_version(tmp_path) == clean
    assert git_version(tmp_path / "nowhere") == "" and git_version(Path("/")) == ""


def test_the_trainers_version_follows_its_own_files_not_ladders(tmp_path: Path) -> None:
    """MimicKit outside a checkout: its Python sources, hashed (an edit is a new version); a command: the files it
    names (a script outside any checkout too); the proxy: none of its own (ladder's version is the workload's)."""
    root = tmp_path / "MimicKit"
    shutil.copytree(DATA / "fake_mimickit", root)
    mimickit = settings(f"workload.mimickit_root={root}", "workload.kind=mimickit")
    first = trainer_version(planner.build(mimickit.workload, "num_envs", {})[0])
    assert first.startswith("sources:")
    source = next((root / "mimickit").rglob("*.py"))
    source.write_text(source.read_text() + "\n# edited\n")
    assert trainer_version(planner.build(mimickit.workload, "num_envs", {})[0]) not in ("", first)

    script = tmp_path / "train.py"
    script.write_text("print('iter 1 samples 8')\n")
    command = settings("workload.kind=command", f"workload.cmd='python {script} --num-envs {{num_envs}}'")
    before = trainer_version(planner.build(command.workload, "num_envs", {})[0])
    script.write_text("print('iter 1 samples 16')\n")
    after = trainer_version(planner.build(command.workload, "num_envs", {})[0])
    assert before.startswith("files:") and after.startswith("files:") and before != after
    assert trainer_version(planner.build(settings("workload.kind=proxy").workload, "num_envs", {})[0]) == ""
