"""The README's recipes, as written there, on the real trainers installed from PyPI."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ladder.results import read_tsv

README = Path(__file__).resolve().parents[1] / "README.md"


def recipe(title: str) -> tuple[str, list[str]]:
    """The script and the `ladder.search` overrides of the README's recipe `title` (its python and bash blocks)."""
    text = README.read_text().split(f"**Recipe: {title}**", 1)[1]
    script = re.search(r"```python\n(.*?)```", text, re.S)
    command = re.search(r"```bash\n(.*?)```", text, re.S)
    assert script and command, f"the README's recipe {title!r} has a python and a bash block"
    argv = shlex.split(command.group(1).replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "ladder.search"]
    return script.group(1), argv[3:]


def test_stable_baselines3_recipe(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    script, overrides = recipe("stable-baselines3")
    name = re.search(r"# (\S+\.py)", script)
    assert name is not None
    (tmp_path / name.group(1)).write_text(script)
    # a window of several rollouts even on a busy machine (a rollout and update took 30 s at load 19 on 2 cores)
    small = [
        "device=cpu",
        f"output_root={tmp_path}/out",
        "sweep=r",
        "ladder.rungs=[4,2]",
        "measure.window_s=90",
        "measure.warmup_iters=2",
        "measure.stable_tol=0.9",
        "measure.warmup_timeout_s=300",
        "measure.stall_timeout_s=300",
        "measure.trial_timeout_s=900",
        "workload.env.OMP_NUM_THREADS=1",
    ]  # generous: a busy machine is slow
    done = subprocess.run([sys.executable, "-m", "ladder.search", *overrides, *small], cwd=tmp_path,
                          capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    sweep = tmp_path / "out" / "case_gpu_bench_r"
    rows = read_tsv(sweep / "trials.tsv")
    assert rows and all(r["case"] == "sb3_cartpole" for r in rows)
    fit = next(r for r in rows if r["status"] == "ok")
    assert float(fit["samples_per_s"]) > 0 and fit["knob"] == "num_envs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", name.group(1)]  # nothing written beside it
    assert "total_timesteps" in (sweep / fit["trial_dir"] / "stdout.log").read_text()
