"""Planning trials for every workload kind, and running what was planned: a MimicKit-like program and a small
trainer walked by a knob other than num_envs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ladder.core import walk
from ladder.core.records import Ending, Status
from ladder.core.spec import ProgressKind
from ladder.failures import rules
from ladder.runner import launch
from ladder.settings.config import CaseConf, Profile, register
from ladder.sweep.dryrun import Planned, estimate, every_trial, format_dry_run, format_estimate
from ladder.workloads.builtin import Placement
from ladder.workloads.mimickit import missing_files
from ladder.workloads.planner import Workload, plan
from ladder.workloads.progress import MimicKitLogParser
from tests.helpers import DATA
from tests.unit.test_workloads import NCCL, TWO_GPUS, command, mimickit, parser, profile, settings

register()


# ---- MimicKit: the planned argv -------------------------------------------------------------------------------


# ---- MimicKit: the env-config patch ------------------------------------------------------------------------------


# ---- auto, proxy --------------------------------------------------------------------------------------------------


# ---- command ------------------------------------------------------------------------------------------------------


def run_planned(spec_dir: Path, workload: Workload, case: CaseConf, prof: Profile, rung: int) -> tuple[Status, bytes]:
    """Plan, launch for real, wait for the program to end, stop and reap, classify."""
    spec = plan(
        workload, case, prof, rung, Placement("cpu", 1, launch.free_port(), sys.executable), str(spec_dir), 60.0, {}
    )
    running = launch.start(spec, spec_dir, f"t{rung}-{os.getpid()}", None)
    running.proc.wait(timeout=60)
    code = launch.stop(running, 1.0)
    out = (spec_dir / "stdout.log").read_bytes()
    return rules.classify(Ending(exit_code=code, log_text=out.decode())).status, out


def test_command_walks_update_interval_with_regex_progress(tmp_path: Path) -> None:
    s = settings("amp_pi_plus")
    template = (
        sys.executable,
        str(DATA / "fake_trainer.py"),
        "trainer.update_interval={update_interval}",
        "trainer.num_envs=16",
        "trainer.iters=5",
        "trainer.mem_budget=250",
    )
    work, rungs = command(template, knob="update_interval"), (40, 20, 10, 5)
    plain = walk.Tuning(strategy=walk.Strategy.PLAIN)  # one rung at a time, from the top
    attempts: list[walk.Attempt] = []
    outputs: dict[int, bytes] = {}
    while (nxt := walk.next_trial(rungs, ["default"], attempts, plain)) is not None:
        status, outputs[nxt.rung] = run_planned(tmp_path / f"u{nxt.rung}", work, s.case, s.profiles[0], nxt.rung)
        attempts.append(walk.Attempt(nxt.profile, nxt.rung, status))
    tried = [(a.rung, a.status) for a in attempts]
    assert tried == [(40, Status.OOM_OR_NCCL), (20, Status.OOM_OR_NCCL), (10, Status.OK)]
    walked = walk.standing(rungs, "default", attempts, plain)
    assert (walked.outcome, walked.rung) == (walk.Outcome.FOUND, 10)
    spec = plan(work, s.case, s.profiles[0], 10, TWO_GPUS, "/t", 1.0, {})
    points = parser(spec).feed(outputs[10], now=1000.0)
    assert [(p.iter, p.samples) for p in points] == [(i, i * 8 * 16) for i in range(1, 6)]
    assert b"update_interval=10 num_envs=16" in outputs[10]


def test_command_jsonl_progress(tmp_path: Path) -> None:
    s = settings("amp_pi_plus")
    template = (
        sys.executable,
        str(DATA / "fake_trainer.py"),
        "trainer.num_envs={num_envs}",
        "trainer.iters=3",
        "trainer.progress={trial_dir}/progress.jsonl",
    )
    work = command(template, progress=ProgressKind.JSONL)
    status, _ = run_planned(tmp_path, work, s.case, s.profiles[0], 4)
    spec = plan(work, s.case, s.profiles[0], 4, TWO_GPUS, str(tmp_path), 1.0, {})
    points = parser(spec).feed((tmp_path / spec.progress_file).read_bytes(), now=0.0)
    assert status is Status.OK and [(p.iter, p.samples) for p in points] == [(1, 32), (2, 64), (3, 96)]
    assert all(p.t > 1e9 and p.step_time_s is not None for p in points)  # the trainer's own times


# ---- MimicKit: running what was planned -------------------------------------------------------------------------


def test_planned_mimickit_trial_runs(tmp_path: Path, fake_mimickit: Path) -> None:
    s, trial_dir = settings("amp_pi_plus"), tmp_path / "trials" / "hiutil_e8"
    work = mimickit(root=str(fake_mimickit), max_iters=6, engine_config="data/engines/newton_engine.yaml")
    place = Placement("cpu", 2, 29999, sys.executable)
    spec = plan(work, s.case, profile(s, "hiutil"), 8, place, str(trial_dir), 60.0, {})
    assert missing_files(work.mimickit, s.case) == []  # type: ignore[arg-type]
    launch.write_files(spec, trial_dir)
    with open(trial_dir / spec.progress_file, "wb") as out:
        done = subprocess.run(
            spec.argv, cwd=spec.cwd, env={**os.environ, **spec.env}, stdout=out, stderr=subprocess.STDOUT, timeout=60
        )
    assert done.returncode == 0, (trial_dir / "stdout.log").read_text()
    points = parser(spec).feed((trial_dir / "stdout.log").read_bytes(), now=500.0)
    assert [(p.iter, p.samples) for p in points] == [(i, (i + 1) * 32 * 8 * 2) for i in range(6)]
    logged = MimicKitLogParser().feed((trial_dir / "log.txt").read_bytes(), now=500.0)
    assert [(p.iter, p.samples) for p in logged] == [(0, 512), (5, 3072)]  # iters_per_output 100, and the last
    assert yaml.safe_load((trial_dir / "agent_config.yaml").read_text())["actor_epochs"] == 20


# ---- parsers ------------------------------------------------------------------------------------------------------


# ---- dry run ------------------------------------------------------------------------------------------------------


def test_dry_run_estimate_counts_failures_fits_and_the_descent() -> None:
    walk_only = estimate(8, 2, fail_s=10.0, fit_s=40.0)
    assert walk_only.worst_s == 2 * (7 * 10.0 + 40.0)  # each profile fails down to the last rung, which fits
    assert walk_only.expected_s == 3.5 * 10.0 + 40.0 + (40.0 + 10.0)  # halfway down; the seeded one: fit + failure
    descent = estimate(8, 2, fail_s=10.0, fit_s=40.0, cut_s=16.0)
    assert descent.worst_s == 2 * 8 * 40.0  # every rung fits and each lower one wins
    assert descent.expected_s == walk_only.expected_s + 2 * 16.0
    assert "a descent step cut short ~16 s" in format_estimate(descent)
    assert "descent" not in format_estimate(walk_only)
    assert estimate(1, 1, 10.0, 40.0).expected_s == 40.0


def test_dry_run_shows_every_trial_and_each_agent_once() -> None:
    s = settings("amp_pi_plus", "profile=[default,hiutil]")
    work = mimickit()
    planned = [
        Planned(v, r, f"/o/{v}_e{r}", plan(work, s.case, profile(s, v), r, TWO_GPUS, f"/o/{v}_e{r}", 1.0, NCCL))
        for v, r in every_trial([p.name for p in s.profiles], s.rungs)
    ]
    text = format_dry_run("amp_pi_plus", "num_envs", planned)
    assert text.startswith("dry run: case amp_pi_plus, 16 trial(s) the walk could launch (2 profile(s) x 8 rung(s)")
    assert text.count("\n== ") == 16 and text.count("argv: python mimickit/run.py") == 16
    assert "argv: python mimickit/run.py --arg_file args/amp_pi_plus_args.txt --mode train --num_envs 38 " in text
    assert text.count("file agent.yaml (") == 2 and "file agent.yaml: same as hiutil e256" in text
    assert "env: NCCL_P2P_DISABLE=1 PYTHONUNBUFFERED=1" in text and "cwd: /opt/MimicKit" in text


@pytest.fixture()
def fake_mimickit(tmp_path: Path) -> Path:
    """A MimicKit folder: the real args and configs, and a stand-in mimickit/run.py (tests/data/fake_mimickit)."""
    root = tmp_path / "MimicKit"
    shutil.copytree(DATA / "mimickit" / "args", root / "args")
    shutil.copytree(DATA / "mimickit" / "data", root / "data")
    shutil.copytree(DATA / "fake_mimickit" / "mimickit", root / "mimickit")
    return root
