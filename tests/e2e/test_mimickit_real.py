"""The real MimicKit, end to end: `python -m ladder.search` runs MimicKit's own `mimickit/run.py` (Newton on CPU) from
`../shared/mimickit` (or `$MIMICKIT_TEST_ROOT`) on its humanoid with the synthetic motion, handed over through
`workload.env_patch` (the checkout's env config names a motion file that is not there).

Needs the `mimickit` extra (`pip install -e ".[mimickit]"`); skipped with the reason where it or the MimicKit folder
is missing, except under CI (`CI=true`), where that is a failure. The first MimicKit run on a machine compiles warp's
CPU kernels (70-160 s, cached in ~/.cache/warp/<version>); after that a trial builds its env and agent in ~24 s (idle
cores). DeepMimic PPO at 4 envs (3.8 s per iteration, 0.71 GB) is the cheapest trial; a 4096-env rung (2.55 GB)
is what a 1.5 GB memory cgroup kills.
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
import yaml

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.helpers import REPO, wait_for

ROOT = REPO
MK = Path(os.environ.get("MIMICKIT_TEST_ROOT") or ROOT.parent / "shared" / "mimickit").resolve()
CASE = "deepmimic_humanoid_ppo"
SWAY = "data/motions/synthetic/humanoid_sway.pkl"  # relative to the MimicKit folder, where MimicKit starts
MODULES = ("newton", "warp", "mujoco_warp", "mujoco", "pyglet", "moviepy", "wandb", "tensorboardX", "gymnasium")
SAMPLES_PER_ITER = 32  # the agent's steps_per_iter, per env and rank
# Short windows, and patience on a loaded machine (MimicKit's imports and env build take ~24 s on idle cores, its
# iteration 0 also plays 32 test episodes). The window opens on the stable rule alone (the warm-up timeout is out of
# reach), so it is bracketed by iterations and has a rate.
FAST = (
    "measure.warmup_iters=1",
    "measure.stable_k=2",
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


@pytest.fixture(scope="module", autouse=True)
def mimickit_ready() -> None:
    if why := _why_not():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the real MimicKit, but {why}", pytrace=False)
        pytest.skip(why)


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


def fewer_test_episodes(overrides: tuple[str, ...]) -> list[str]:
    """MimicKit's iteration 0 also plays the agent's `test_episodes` (32: 16 s of a 20 s first iteration on idle
    cores): one round of 4 for each profile the sweep walks."""
    walked = next((o.split("=", 1)[1].strip("[]").split(",") for o in overrides if o.startswith("profile=")), [])
    return [f"+profile.{name}.agent.test_episodes=4" for name in walked]


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
        *fewer_test_episodes(overrides),
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


# ---- a sweep under a memory cgroup: the top rung is killed by the kernel, a lower one fits and is measured --------


@pytest.fixture(scope="module")
def cgroup_sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    out = tmp_path_factory.mktemp("mk_cgroup") / "output"
    return run_search(
        out,
        "cg",
        "profile=[default,hiutil]",
        "ladder.rungs=[4096,4]",
        "workload.nproc=1",
        "workload.host_mem_limit_gb=1.5",
    )


def test_the_kernel_kills_the_top_rung_and_the_lower_one_is_measured(cgroup_sweep: Sweep) -> None:
    assert cgroup_sweep.code == ExitCode.PICK_FOUND, cgroup_sweep.out
    trials = [t for t in cgroup_sweep.trials() if t["variant"] == "default"]
    assert [(t["num_envs"], t["status"], t["reason"]) for t in trials] == [
        ("4096", "oom_or_nccl", "host_oom"),
        ("4", "ok", ""),
    ], cgroup_sweep.out
    assert ("4", "ok") in [(t["num_envs"], t["status"]) for t in cgroup_sweep.trials() if t["variant"] == "hiutil"]
    top = cgroup_sweep.trial_dir(trials[0])
    assert trials[0]["exit_code"] == "-9"  # the kernel's SIGKILL
    assert "Iteration" not in (top / "stdout.log").read_text(errors="replace")  # killed while it built its envs
    (best,) = read_tsv(cgroup_sweep.dir / "best_by_case.tsv")
    assert (best["num_envs"], best["status"]) == ("4", "ok")
    assert float(best["max_mem0"]) > 300  # MimicKit's RSS: torch, warp, newton and 4 envs
    assert "best: " in cgroup_sweep.out and "e4" in cgroup_sweep.out.split("best: ")[1].splitlines()[0]


def test_the_top_rungs_evidence_is_the_cgroups_oom_kill(cgroup_sweep: Sweep) -> None:
    top = cgroup_sweep.trial("default", 4096)
    assert top["evidence"].startswith("memory cgroup ladder-") and "OOM kill" in top["evidence"], top["evidence"]


def test_the_env_patch_reaches_mimickit_and_the_checkout_is_untouched(cgroup_sweep: Sweep) -> None:
    trial = cgroup_sweep.trial_dir(cgroup_sweep.trial("default", 4))
    ours = yaml.safe_load((trial / "env.yaml").read_text())
    assert ours["motion_file"] == SWAY
    assert yaml.safe_load((trial / "env_config.yaml").read_text()) == ours  # MimicKit's own copy of what it ran
    assert f"Loaded motion file: {SWAY}" in (trial / "stdout.log").read_text(errors="replace")
    shipped = yaml.safe_load((MK / "data/envs/deepmimic_humanoid_env.yaml").read_text())
    assert shipped["motion_file"] != SWAY and {k: v for k, v in ours.items() if k != "motion_file"} == {
        k: v for k, v in shipped.items() if k != "motion_file"
    }
    assert f"--env_config {trial}/env.yaml" in (trial / "cmd.txt").read_text()


@pytest.mark.parametrize(
    ("profile", "net", "epochs", "batch"),
    [("default", "fc_2layers_1024units", 5, 4), ("hiutil", "fc_3layers_1024units", 20, 2)],
)
def test_both_profiles_reach_mimickits_own_agent_config(
    cgroup_sweep: Sweep, profile: str, net: str, epochs: int, batch: int
) -> None:
    trial = cgroup_sweep.trial_dir(cgroup_sweep.trial(profile, 4))
    written = yaml.safe_load((trial / "agent_config.yaml").read_text())  # what MimicKit itself copied to out_dir
    assert written == yaml.safe_load((trial / "agent.yaml").read_text())  # ladder's: the agent with the profile
    assert written["model"]["actor_net"] == written["model"]["critic_net"] == net
    assert (written["actor_epochs"], written["actor_batch_size"]) == (epochs, batch)


def test_progress_comes_from_the_stdout_table_and_samples_per_s_agrees_with_mimickit(cgroup_sweep: Sweep) -> None:
    trial_row = cgroup_sweep.trial("default", 4)
    best = trial_row
    table = mimickit_table((cgroup_sweep.trial_dir(trial_row) / "stdout.log").read_text(errors="replace"))
    assert len(table) >= 3, table
    per_iter = SAMPLES_PER_ITER * 4
    assert {b["Samples"] - a["Samples"] for a, b in zip(table, table[1:], strict=False)} == {per_iter}
    rate, window_s, iters = float(best["samples_per_s"]), float(best["window_s"]), int(float(trial_row["n_iters"]))
    # whole iterations; the rate is recorded to 0.1 (off by 0.05 at most) and window_s to 0.01 s (0.005)
    assert iters >= 1 and abs(iters * per_iter / window_s - rate) <= 0.05 + rate * 0.005 / window_s + 1e-9
    # The trial is stopped once its window is measured: the window is the table's last `iters` iterations.
    # MimicKit's Wall_Time is in hours at 3 significant digits: a reading is off by at most half its last digit.
    first, last = table[-1 - iters], table[-1]
    wall_s = (last["Wall_Time"] - first["Wall_Time"]) * 3600
    rounding_s = sum(_half_last_digit(row["Wall_Time"]) for row in (first, last)) * 3600
    theirs = (last["Samples"] - first["Samples"]) / wall_s
    assert abs(rate - theirs) <= 0.05 * theirs + rate * rounding_s / wall_s + 0.05, (rate, theirs, wall_s, rounding_s)


def _half_last_digit(value: float) -> float:
    """Half a unit in the last place of `%8.3g`: the most a printed value is off by."""
    exponent = int(f"{value:.2e}".split("e")[1])
    return 0.5 * 10.0 ** (exponent - 2)


def test_settings_that_do_not_apply_are_neither_shown_nor_recorded(cgroup_sweep: Sweep) -> None:
    banner = next(line for line in cgroup_sweep.out.splitlines() if line.startswith("sweep cg:"))
    assert "1 x cpu" in banner and "emulated card" not in banner  # the config's 0.6 GB default is the proxy's
    (best,) = read_tsv(cgroup_sweep.dir / "best_by_case.tsv")
    assert (best["gpu_name"], best["gpu_mem_total"], best["emulate_gpu_mem_gb"]) == ("cpu", "", "")
    assert best["class"] == "unclassified" and best["action"].startswith("no class on CPU")
    assert "class: unclassified -> no class on CPU" in cgroup_sweep.out


# ---- two ranks, Ctrl-C and resume --------------------------------------------------------------------------------


def test_two_ranks_interrupted_by_ctrl_c_and_resumed(tmp_path: Path) -> None:
    out, rungs = tmp_path / "output", ("profile=[default]", "ladder.rungs=[4]", "workload.nproc=2")
    proc = search(out, "ranks", *rungs, "measure.window_s=1200")
    stdout = out / "case_gpu_bench_ranks" / "trials" / CASE / "default_e4_probe_1" / "stdout.log"
    try:
        wait_for(lambda: stdout.is_file() and re.search(rb"\|\s*Iteration\s*\|", stdout.read_bytes()), 1500, 0.5)
        ranks = [p for p in descendants(proc.pid) if "spawn_main" in " ".join(p.cmdline())]
        assert len(ranks) == 1  # rank 0 runs in MimicKit's main process; rank 1 is spawned (`--devices cpu cpu`)
        everything = descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
    finally:
        stopped = finish(proc, out, "ranks", timeout_s=120)
    assert stopped.code == ExitCode.INTERRUPTED, stopped.out
    assert "resume with" in stopped.out
    assert [(t["num_envs"], t["status"]) for t in stopped.trials()] == [("4", "interrupted")]
    assert not [p for p in everything if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    # the resume measures over a short window: a change of the sweep's settings, said so (the interrupted trial
    # never counted; it stays in trials.tsv as history)
    resumed = run_search(out, "ranks", *rungs, "settings_change=accept")
    assert resumed.code == ExitCode.PICK_FOUND, resumed.out
    trials = resumed.trials()
    assert [(t["status"], t["trial_dir"].rsplit("/", 1)[1]) for t in trials] == [
        ("interrupted", "default_e4_probe_1"),
        ("ok", "default_e4_probe_2"),
    ]
    trial = resumed.trial_dir(trials[1])
    assert "--devices cpu cpu" in (trial / "cmd.txt").read_text()
    table = mimickit_table((trial / "stdout.log").read_text(errors="replace"))
    steps = [b["Samples"] - a["Samples"] for a, b in zip(table, table[1:], strict=False)]
    assert steps and set(steps) == {SAMPLES_PER_ITER * 4 * 2}  # Samples counts both ranks' envs
    (best,) = read_tsv(resumed.dir / "best_by_case.tsv")
    assert (best["n_gpus"], best["status"]) == ("2", "ok") and float(best["samples_per_s"]) > 0
    # MimicKit's ranks are one process tree (rank 1 is its spawned child), sampled as one: both ranks' RSS
    # (1665 MiB measured; one rank at 4 envs: 843)
    assert float(best["max_mem0"]) > 1200


# ---- MimicKit's own failure modes ---------------------------------------------------------------------------------
# (the out-of-memory kill mid-build is the cgroup sweep's top rung above: `oom_or_nccl/host_oom`)


def bad_engine(tmp_path: Path) -> str:
    engine = tmp_path / "bad_engine.yaml"
    engine.write_text('engine_name: "no_such_engine"\ncontrol_mode: "pos"\ncontrol_freq: 30\nsim_freq: 240\n')
    return f"workload.engine_config={engine}"


@pytest.mark.parametrize(
    ("override", "evidence"),
    [
        (lambda tmp: "workload.env_patch.motion_file=data/motions/synthetic/no_such_motion.pkl", "no_such_motion"),
        (lambda tmp: "+workload.env_patch.char_file=data/assets/humanoid/no_such_body.xml", "no_such_body"),
        (bad_engine, "Unsupported engine: no_such_engine"),  # printed before a traceback that says only None
    ],
    ids=["missing-motion-file", "missing-asset", "bad-engine-config"],
)
def test_a_broken_mimickit_configuration_is_an_error_with_its_evidence(
    tmp_path: Path, override: object, evidence: str
) -> None:
    out = tmp_path / "output"
    sweep = run_search(out, "broken", "profile=[default]", "ladder.rungs=[8,4]", "workload.nproc=1", override(tmp_path))  # type: ignore[operator]
    trials = sweep.trials()
    assert [(t["num_envs"], t["status"]) for t in trials] == [("8", "error")], sweep.out  # never a step-down
    assert evidence in trials[0]["evidence"], trials[0]["evidence"]
    assert sweep.code == ExitCode.BROKEN_CONFIG, sweep.out
