"""`scripts/suite_cpu.py`: a process's kind from its command line, and its CPU read from /proc."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import load_script


@pytest.fixture(scope="module")
def suite_cpu() -> ModuleType:
    return load_script("suite_cpu")


def test_a_process_is_named_by_what_it_runs_not_by_the_pytest_folder_its_arguments_hold(suite_cpu: ModuleType) -> None:
    tmp = "/tmp/pytest-of-root/pytest-3/popen-gw1/test_x0/out"
    assert suite_cpu.kind(f"python -m ladder.search case=amp_pi_plus output_root={tmp}").startswith("ladder.search")
    assert suite_cpu.kind(f"python -m ladder.runner.warm serve --socket {tmp}/sock").startswith("warm starter")
    assert suite_cpu.kind(f"python -m ladder.workloads.proxy --progress {tmp}/p.jsonl").startswith("proxy rank")
    assert suite_cpu.kind("python -u -c import sys;exec(eval(sys.stdin.readline()))").startswith("pytest-xdist")
    assert suite_cpu.kind(f"python {tmp}/train.py 64") == "pytest"  # a test's own script: the test's, not ladder's
    assert suite_cpu.kind("sleep 5") == "other"
    client = f"python -m ladder.runner.warm ladder.workloads.proxy --progress {tmp}/p.jsonl"
    assert suite_cpu.kind(client).startswith("warm client")  # the stand-in, not a rank started cold
    trainer = "python /work/repo/tests/data/trainers/sb3_ppo.py --num-envs 4"
    assert suite_cpu.kind(trainer).startswith("a third-party trainer")
    assert suite_cpu.kind("").startswith("kernel threads")


def test_this_process_is_read_with_its_own_cpu_and_command_line(suite_cpu: ModuleType) -> None:
    seen: dict[tuple[int, int], object] = {}
    suite_cpu.sample(seen, me=-1)
    mine = [s for (pid, _), s in seen.items() if pid == os.getpid()]
    assert len(mine) == 1
    assert mine[0].cpu_s > 0
    assert mine[0].cmd == Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode()
