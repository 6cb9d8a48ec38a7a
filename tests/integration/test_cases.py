"""The case catalogue (conf/case): one conf per trainable MimicKit case, each composing, each runnable by the proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ladder.runner import launch
from ladder.settings.config import WorkloadConf, register
from ladder.workloads.builtin import Placement
from ladder.workloads.planner import Kind, Workload, plan
from tests.unit.test_cases import MIMICKIT, ROOT, settings

register()


def test_generated_confs_are_current() -> None:
    argv = [sys.executable, str(ROOT / "scripts" / "gen_cases.py"), "--mimickit", str(MIMICKIT), "--check"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "30 case confs up to date"


@pytest.mark.parametrize("name", ["vault_g1", "ase_humanoid_sword_shield"])
def test_the_proxy_starts_for_the_case(tmp_path: Path, name: str) -> None:
    """vault runs a PPO agent (no discriminator); ase has a discriminator and an encoder. A real short run."""
    s = settings(name)
    work = Workload(Kind.PROXY, WorkloadConf(width_factor=0.0625, collective_timeout_s=30.0))
    place = Placement("cpu", 1, launch.free_port(), sys.executable)
    spec = plan(work, s.case, s.profiles[1], 8, place, str(tmp_path), 3.0, {})
    launch.write_files(spec, tmp_path)
    env = {**os.environ, **spec.env, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(spec.argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    start, *iters = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    roles = {"vault_g1": {"actor", "critic"}, "ase_humanoid_sword_shield": {"actor", "critic", "disc", "enc"}}[name]
    assert set(start["nets"]) == roles and start["num_envs"] == 8
    assert iters and iters[-1]["iter"] >= 1
