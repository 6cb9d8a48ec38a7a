"""Running the real MimicKit through `python -m ladder.search` for the tests (`test_mimickit_*.py`): MimicKit's own
`mimickit/run.py` (Newton on CPU) from `../shared/mimickit` (or `$MIMICKIT_TEST_ROOT`) on its humanoid with the
synthetic motion, handed over through `workload.env_patch` (the checkout's env config names a motion file that is not
there).

Needs the `mimickit` extra (`pip install -e ".[mimickit]"`); `require_mimickit` skips with the reason where it or the
MimicKit folder is missing, except under CI (`CI=true`), where that is a failure. The first MimicKit run on a machine
compiles warp's CPU kernels (70-160 s, cached in ~/.cache/warp/<version>); after that a trial builds its env and
agent in ~24 s (idle cores). DeepMimic PPO at 4 envs (3.8 s per iteration, 0.71 GB) is the cheapest trial; a
4096-env rung (2.55 GB) is what a 1.5 GB memory cgroup kills.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from ladder.storage.tsv import read_tsv
from tests.helpers import REPO

ROOT = REPO
MK = Path(os.environ.get("MIMICKIT_TEST_ROOT") or ROOT.parent / "shared" / "mimickit").resolve()
CASE = "deepmimic_humanoid_ppo"
SWAY = "data/motions/synthetic/humanoid_sway.pkl"  # relative to the MimicKit folder, where MimicKit starts
MODULES = ("newton", "warp", "mujoco_warp", "mujoco", "pyglet", "moviepy", "wandb", "tensorboardX", "gymnasium")
SAMPLES_PER_ITER = 8  # the agent's steps_per_iter as the tests set it (32 as shipped), per env and rank
# Short windows, and patience on a loaded machine (MimicKit's imports and env build take ~24 s on idle cores, two
# ranks sharing two cores much longer under the suite's load; lighter iterations: `lighter_iterations` below). The
# window opens on the stable rule alone (the warm-up timeout is out of reach), so it is bracketed by iterations and
# has a rate: at the second progress point, whose step time is steady by itself (`stable_k=1`: one iteration fewer
# than two steady steps, 6-13 s of a fitting trial here; no test asserts MimicKit's figures beyond their arithmetic).
FAST = (
    "measure.warmup_iters=1",
    "measure.stable_k=1",
    "measure.stable_tol=0.5",
    "measure.warmup_timeout_s=1500",
    "measure.window_s=12",
    "measure.min_window_iters=3",  # a rate from 3 iterations (MimicKit's take seconds each here)
    "measure.startup_timeout_s=900",
    "measure.stall_timeout_s=600",
    "measure.trial_timeout_s=1800",
)


def _why_not() -> str:
    missing = [m for m in MODULES if importlib.util.find_spec(m) is None]
    if missing:
        return f"the mimickit extra is not installed (no {', '.join(missing)}): pip install -e '.[mimickit]'"
    if not (MK / "mimickit" / "run.py").is_file() or not (MK / SWAY).is_file():
        return f"no MimicKit folder with the synthetic motion at {MK}: set MIMICKIT_TEST_ROOT"
    return ""


@dataclass
class Sweep:
    out: str  # what ladder.search printed
    code: int
    dir: Path  # the sweep folder

    def trials(self) -> list[dict[str, str]]:
        return read_tsv(self.dir / "trials.tsv")

    def trial_dir(self, trial: dict[str, str]) -> Path:
        return self.dir / trial["trial_dir"]

    def trial(self, profile: str, num_envs: int) -> dict[str, str]:
        return next(t for t in self.trials() if (t["variant"], t["num_envs"]) == (profile, str(num_envs)))


def lighter_iterations(overrides: tuple[str, ...]) -> list[str]:
    """Each profile the sweep walks, lightened as a user would through the profile's agent settings: no test
    episodes (MimicKit's iteration 0 plays `test_episodes`, 32 as shipped: 16 s of a 20 s first iteration on idle
    cores; 0 is MimicKit's own way to skip them) and `steps_per_iter` 8 instead of 32 (a quarter of the rollout and
    of the update behind each iteration, so a window's iterations come four times as often)."""
    walked = next((o.split("=", 1)[1].strip("[]").split(",") for o in overrides if o.startswith("profile=")), [])
    return [
        f"+profile.{name}.agent.{key}={value}"
        for name in walked
        for key, value in (("test_episodes", 0), ("steps_per_iter", SAMPLES_PER_ITER))
    ]


def search(out: Path, sweep: str, *overrides: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable,
        "-m",
        "ladder.search",
        f"case={CASE}",
        "device=cpu",
        f"output_root={out}",
        f"sweep={sweep}",
        f"workload.mimickit_root={MK}",
        "workload.engine_config=data/engines/newton_engine.yaml",
        f"+workload.env_patch.motion_file={SWAY}",
        *FAST,
        *overrides,
        *lighter_iterations(overrides),
    ]
    env = {k: v for k, v in os.environ.items() if k != "MIMICKIT_ROOT"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen(argv, cwd=out.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], out: Path, sweep: str, timeout_s: float = 2400) -> Sweep:
    try:
        text, _ = proc.communicate(timeout=timeout_s)
    finally:
        stop(proc)
    return Sweep(text, proc.returncode, out / f"case_gpu_bench_{sweep}")


def stop(proc: subprocess.Popen[str]) -> None:
    """Leave nothing running: Ctrl-C the orchestrator (it stops its trial), SIGKILL it if that does not end it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def run_search(out: Path, sweep: str, *overrides: str) -> Sweep:
    return finish(search(out, sweep, *overrides), out, sweep)


def mimickit_table(stdout: str) -> list[dict[str, float]]:
    """MimicKit's per-iteration `| Key | value |` tables on rank 0's stdout, one dict per iteration."""
    rows: list[dict[str, float]] = []
    for line in stdout.replace("\r", "\n").splitlines():
        m = re.fullmatch(r"\|\s*(\w+)\s*\|\s*(\S+)\s*\|", line.strip())
        if m is None:
            continue
        if m[1] == "Iteration":
            rows.append({})
        if rows:
            rows[-1][m[1]] = float(m[2])
    return rows


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def require_mimickit() -> None:
    """Skip (fail under CI) where MimicKit cannot run here, with the reason."""
    if why := _why_not():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the real MimicKit, but {why}", pytrace=False)
        pytest.skip(why)
