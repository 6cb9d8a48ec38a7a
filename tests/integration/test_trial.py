"""`trial.run` with a value to beat: a trial that clearly cannot matter closes its window early (real proxy runs)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

from ladder.core import warmup
from ladder.core.measure.noise import Noise
from ladder.core.records import Status
from ladder.core.spec import Launcher, TrialSpec
from ladder.runner import launch, trial
from ladder.runner.host import HostSampler
from ladder.settings.config import MeasureConf, Profile, WorkloadConf
from ladder.workloads.builtin import Placement, plan_proxy
from tests.integration.test_failure_scenarios import CASE

WINDOW_S = 30.0

# any three steps agree: the window opens at the trainer's fifth point
LOOSE = MeasureConf(
    warmup_iters=2,
    stable_k=3,
    stable_tol=5.0,
    warmup_timeout_s=60.0,
    window_s=WINDOW_S,
    stall_timeout_s=60.0,
    trial_timeout_s=120.0,
)


def run(tmp_path: Path, beat: float | None, window_s: float = WINDOW_S, noise: Noise | None = None) -> trial.Result:
    workload = WorkloadConf(width_factor=0.125, nproc=2, emulate_gpu_mem_gb=0.2, collective_timeout_s=60.0)
    place = Placement("cpu", 2, launch.free_port(), sys.executable)
    spec = plan_proxy(CASE, Profile("default", {}), 8, workload, place, str(tmp_path), 120.0, {})
    measure = replace(LOOSE, warmup_iters=3, stable_tol=0.5, window_s=window_s, kill_grace_s=2.0)
    return trial.run(
        trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure, beat=beat, noise=noise), HostSampler
    )


def test_a_trial_clearly_below_the_value_to_beat_is_cut_short(tmp_path: Path) -> None:
    result = run(tmp_path, beat=1e12)
    assert result.verdict.status is Status.OK
    f = result.figures
    assert f["cut"] == 1.0 and f["samples_per_s_hi"] < 1e12
    assert f["window_s"] < WINDOW_S  # stopped before the window's end (its start-up time depends on the machine's load)


def test_a_cut_on_the_case_s_pooled_noise_says_so_in_its_figures(tmp_path: Path) -> None:
    result = run(tmp_path, beat=1e12, noise=Noise(0.05, 40.0))
    assert result.verdict.status is Status.OK
    f = result.figures
    assert f["cut"] == 1.0 and f["noise_pooled_df"] == 40.0 and f["samples_per_s_hi"] < 1e12
    assert f["step_df"] >= 1.0 and f["step_sd_frac"] >= 0.0  # its own steps' spread, for the pool of later trials


def test_a_trial_that_may_beat_it_measures_its_whole_window(tmp_path: Path) -> None:
    result = run(tmp_path, beat=0.0, window_s=4.0)
    assert result.verdict.status is Status.OK
    assert "cut" not in result.figures and result.figures["window_s"] >= 4.0


# A trainer's progress, every 0.1 s
PROGRESS_LOOP = """
out = pathlib.Path(sys.argv[1]) / "progress.jsonl"
for i in range(1, 100000):
    time.sleep(0.1)
    with out.open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "iter": i, "samples": 64 * i}) + "\\n")
"""
# A trainer that ignores SIGTERM (as some simulators' processes do), noting each one it gets
DEAF = (
    """
import json, pathlib, signal, sys, time
heard = pathlib.Path(sys.argv[1]) / "sigterm.txt"
signal.signal(signal.SIGTERM, lambda *_: heard.open("a").write("SIGTERM\\n"))
"""
    + PROGRESS_LOOP
)


def test_a_measured_window_ends_the_trial_at_once_without_waiting_out_the_grace(tmp_path: Path) -> None:
    """The figures are on disk when the window closes: nothing needs an orderly end, so a trainer that ignores
    SIGTERM costs neither `kill_grace_s` nor the supervisor's own grace, and none of its processes outlives the
    trial. (Stopped with SIGTERM first, this trial took 10 s more: the supervisor's grace.)"""
    spec = TrialSpec(argv=(sys.executable, "-c", DEAF, str(tmp_path)), env={}, launcher=Launcher.DIRECT)
    measure = MeasureConf(
        warmup_iters=2,
        stable_k=2,
        stable_tol=0.5,
        warmup_timeout_s=60.0,
        window_s=1.0,
        stall_timeout_s=60.0,
        trial_timeout_s=120.0,
        kill_grace_s=60.0,
    )
    trial_id = uuid.uuid4().hex[:12]
    result = trial.run(trial.TrialRequest(spec, tmp_path, trial_id, measure), HostSampler)
    assert result.stopped_by == "window_done" and result.verdict.status is Status.OK
    assert result.figures["samples_per_s"] > 0
    assert not (tmp_path / "sigterm.txt").exists()  # killed at once: never asked to end in order
    assert result.leftovers == 0 and launch.leftovers(trial_id) == []
    # read again from its folder, it is what the trial said: ladder's kill at a finished window is no host OOM
    again = subprocess.run(
        [sys.executable, "-m", "ladder.failures", "--reclassify", str(tmp_path)], capture_output=True, text=True
    )
    assert (again.returncode, json.loads(again.stdout)["status"]) == (0, "ok")


# A steady trainer: 64 samples every 0.1 s (about 640 samples/s, a few steps of warm-up aside)
STEADY = "import json, pathlib, sys, time" + PROGRESS_LOOP


def run_script(
    tmp_path: Path,
    script: str,
    beat: float,
    noise: Noise | None = None,
    early: warmup.Warmup | None = None,
) -> trial.Result:
    """`script` (a trainer's Python source, given its folder) as a trial under `LOOSE`, with a value to beat."""
    spec = TrialSpec(argv=(sys.executable, "-c", script, str(tmp_path)), env={}, launcher=Launcher.DIRECT)
    return trial.run(
        trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], LOOSE, beat=beat, noise=noise, early=early),
        HostSampler,
    )


def test_a_clear_loser_is_cut_as_its_window_opens_on_the_steps_that_opened_it(tmp_path: Path) -> None:
    """Against a best ten times its rate, the steps the stable rule opened the window on already put it out of
    reach: it is cut there, its figures those steps' own, long before its window's 30 s."""
    result = run_script(tmp_path, STEADY, beat=6_400.0)
    f = result.figures
    assert result.verdict.status is Status.OK and f["cut"] == 1.0
    assert f["samples_per_s_hi"] < 6_400.0 and f["samples_per_s"] > 0
    # the steps that opened the window, and at most what came in the same look (a busy machine's late tick)
    assert LOOSE.stable_k <= f["n_iters"] <= LOOSE.stable_k + 3


# Twelve steps as STEADY's, then a step that does not end (a trainer thrashing at its host's memory, say)
STUCK = STEADY.replace("range(1, 100000)", "range(1, 13)") + "time.sleep(600)\n"


def test_a_step_too_slow_to_matter_cuts_the_trial_before_it_ends(tmp_path: Path) -> None:
    """Its completed steps run at about 640 samples/s, above the 128 it must beat; the thirteenth step does not end.
    Once that step alone has lasted long enough that the rate would be out of reach even were it to end now, the
    trial is cut (a loser, with its completed steps' figures and how long the open step had run), not left to the
    stall limit's 60 s and recorded as a hang."""
    noise = Noise(0.05, 40.0)  # the case's pooled step noise: the cut need not wait for the steps' own spread
    result = run_script(tmp_path, STUCK, beat=128.0, noise=noise)
    f = result.figures
    assert result.stopped_by == "window_done" and result.verdict.status is Status.OK and f["cut"] == 1.0
    assert f["samples_per_s"] > 128.0  # the completed steps alone were no loser
    assert f["n_iters"] <= 11 and f["cut_open_step_s"] < LOOSE.stall_timeout_s


# A steady trainer at half a second a step (about 128 samples/s); one whose second iteration takes twice that
HALF_S = STEADY.replace("time.sleep(0.1)", "time.sleep(0.5)")
WARMING = STEADY.replace("time.sleep(0.1)", "time.sleep(1.0 if i == 2 else 0.5)")
# the case's whole windows: each of their first steps ran at the window's rate
STEADY_CASE = warmup.Warmup((warmup.Gain(0.0, None, 3),) * warmup.EARLY_K, Noise(0.05, 40.0))


def test_a_clear_loser_is_cut_on_its_first_steps_before_its_window_opens(tmp_path: Path) -> None:
    """Against a best ten times its rate, its first two steps, steady as the case's others were, already predict a
    window out of reach: it is cut at its third point, before the stable rule could open its window at the fifth;
    its figures are that prediction's and say so."""
    result = run_script(tmp_path, HALF_S, beat=1_280.0, noise=STEADY_CASE.noise, early=STEADY_CASE)
    f = result.figures
    assert result.verdict.status is Status.OK and f["cut"] == 1.0 and f["early_steps"] >= 2
    assert f["samples_per_s"] < f["samples_per_s_hi"] < 1_280.0
    assert f["n_iters"] < LOOSE.warmup_iters + LOOSE.stable_k  # before its window could open
    assert "step_sd_frac" not in f  # a step or two say nothing of the noise the case pools


# the case's whole windows ran 15% slower than their first steps (a trainer that slows as its buffers fill)
SLOWING_CASE = warmup.Warmup((warmup.Gain(math.log(0.85), None, 1),) * warmup.EARLY_K, Noise(0.05, 40.0))


def test_a_clear_loser_is_cut_on_first_steps_faster_than_the_case_s_windows_taken_at_their_own_rate(
    tmp_path: Path,
) -> None:
    """The case's first steps ran faster than its windows: they are no warm-up, and predict as a bound (the window
    at the steps' own rate), so a clear loser at a tenth of the value to beat is still cut before its window could
    open. (Before, steps whose gain lay outside the noise never predicted, whichever way: it ran to its window.)"""
    result = run_script(tmp_path, HALF_S, beat=1_280.0, noise=SLOWING_CASE.noise, early=SLOWING_CASE)
    f = result.figures
    assert result.verdict.status is Status.OK and f["cut"] == 1.0 and f["early_steps"] >= 2
    assert f["samples_per_s_hi"] < 1_280.0
    assert f["n_iters"] < LOOSE.warmup_iters + LOOSE.stable_k


def test_a_trial_still_warming_up_is_not_cut_on_its_first_steps_but_on_its_window_s(tmp_path: Path) -> None:
    """Its second iteration takes twice as long as the others: its own first steps disagree, so nothing is predicted
    from them, however steady the case's others were; the clear loser is cut as its window opens instead."""
    result = run_script(tmp_path, WARMING, beat=1_280.0, noise=STEADY_CASE.noise, early=STEADY_CASE)
    f = result.figures
    assert result.verdict.status is Status.OK and f["cut"] == 1.0
    assert "early_steps" not in f and f["n_iters"] >= LOOSE.stable_k - 1
