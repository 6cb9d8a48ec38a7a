"""Progress readers on real-format files, and the window gate on a real proxy run."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ladder.core.measure.usage import figures
from ladder.core.measure.window import Rule, Window, close_window, open_window
from ladder.core.records import Point
from ladder.core.spec import TrialSpec
from ladder.runner import launch
from ladder.workloads.progress import (
    JsonlProgress,
    read_all,
)
from tests.helpers import DATA, wait_for

AGENTS = DATA / "agents"

# ---------------------------------------------------------------- JSON lines


# ---------------------------------------------------------------- MimicKit


# ---------------------------------------------------------------- regex


# ---------------------------------------------------------------- a real proxy run


def test_window_gate_on_a_real_two_rank_proxy_run(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    argv = (
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "ladder.workloads.proxy",
        "--agent-config",
        str(AGENTS / "amp_pi_plus_agent.yaml"),
        "--method",
        "amp",
        "--num-envs",
        "32",
        "--obs-dim",
        "32",
        "--act-dim",
        "8",
        "--disc-obs-dim",
        "64",
        "--sim-state-dim",
        "256",
        "--width-factor",
        "0.125",
        "--max-iters",
        "400",
        "--progress",
        str(progress),
    )
    launch.become_subreaper()  # torchrun's workers live in their own sessions: the stop must reach them too
    run = launch.start(TrialSpec(argv=argv, env={"OMP_NUM_THREADS": "1"}), tmp_path, "t-progress-gate", None)
    reader, points, launch_t = JsonlProgress(progress), list[Point](), time.time()
    state: dict[str, Window | None] = {"window": None, "closed": None}

    def measured() -> bool:
        points.extend(reader.read_new())
        if state["window"] is None:
            state["window"] = open_window(points, time.time(), 2.0, Rule(3, 2, 1.0), timeout_s=600)
        window = state["window"]
        state["closed"] = close_window(window, points, min_points=3) if window is not None else None
        return state["closed"] is not None or run.proc.poll() is not None

    try:
        wait_for(measured)
    finally:
        launch.stop(run, grace_s=5.0)
    window = state["window"]
    assert window is not None and window.gated, "the step time never settled"
    opened_at = next(p for p in points if p.t == window.start_t)
    assert opened_at.iter >= 3
    assert points == read_all(progress)[: len(points)]  # read while it grew == read at the end
    closed = state["closed"]
    assert closed is not None and closed.end_t == points[-1].t >= window.end_t  # it counts the point that closed it
    f = figures([], points, closed, launch_t)
    per_iter = 32 * 32 * 2
    assert f["samples_per_s_lo"] <= f["samples_per_s"] <= f["samples_per_s_hi"]
    assert f["samples_per_s"] == pytest.approx(per_iter / f["step_time_p50"], rel=0.35)
    assert f["window_s"] >= 2.0 and f["n_iters"] >= 2
