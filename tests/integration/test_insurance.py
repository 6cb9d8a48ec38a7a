"""An insurance probe (`short`): a descent step the evidence says is unlikely to win stops after a short window once
its rate is below what it must beat, where a full window would run on while its interval still reaches it.

A real trainer process whose steps alternate 0.05 s and 0.25 s (64 samples each): its rate is at most ~427
samples/s (sleeps only stretch) with a wide interval, so a value to beat 2% above that rate is below the interval's
top for the whole window (no usual cut) and above the rate itself (the short rule applies).
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from ladder.core.records import Status
from ladder.core.spec import Launcher, TrialSpec
from ladder.runner import launch, trial
from ladder.runner.host import HostSampler
from ladder.settings.config import MeasureConf

WINDOW_S = 8.0
UNEVEN = """
import json, pathlib, sys, time
out, t0 = pathlib.Path(sys.argv[1]) / "progress.jsonl", time.time()
for i in range(1, 100000):
    time.sleep(0.05 if i % 2 else 0.25)
    with out.open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "iter": i, "samples": 64 * i}) + "\\n")
"""


def run(tmp_path: Path, short: bool, stable_k: int = 2) -> trial.Result:
    folder = tmp_path / ("short" if short else "full")
    folder.mkdir()
    spec = TrialSpec(argv=(sys.executable, "-c", UNEVEN, str(folder)), env={}, launcher=Launcher.DIRECT)
    measure = MeasureConf(
        warmup_iters=stable_k,
        stable_k=stable_k,
        stable_tol=10.0,
        warmup_timeout_s=60.0,
        window_s=WINDOW_S,
        stall_timeout_s=60.0,
        trial_timeout_s=120.0,
        extend_unstable=False,
    )
    trial_id = uuid.uuid4().hex[:12]
    result = trial.run(trial.TrialRequest(spec, folder, trial_id, measure, beat=427.0 * 1.02, short=short), HostSampler)
    assert result.leftovers == 0 and launch.leftovers(trial_id) == []
    return result


def test_a_short_probe_below_what_it_must_beat_ends_after_its_short_window(tmp_path: Path) -> None:
    short, full = run(tmp_path, short=True), run(tmp_path, short=False)
    assert short.verdict.status is full.verdict.status is Status.OK
    assert short.figures["short"] == short.figures["cut"] == 1.0
    assert "short" not in full.figures and "cut" not in full.figures  # its interval reached the value to beat
    assert short.figures["samples_per_s"] < 427.0 * 1.02 < full.figures["samples_per_s_hi"]
    assert short.figures["window_s"] < full.figures["window_s"]
    assert full.figures["window_s"] >= WINDOW_S * 0.9  # the full one measured its window (less one step)


def test_a_short_probe_counts_the_steady_steps_that_opened_its_window(tmp_path: Path) -> None:
    """16 steady steps open the window (about 2.4 s of them, more than the 2 s short window): the probe is judged
    on them as its window opens, not a short window after it."""
    result = run(tmp_path, short=True, stable_k=16)
    assert result.figures["short"] == result.figures["cut"] == 1.0
    points = [json.loads(line) for line in (tmp_path / "short" / "progress.jsonl").read_text().splitlines()]
    launch_t = points[0]["t"] - result.figures["first_step_s"]
    opened = next(p["t"] for p in points if p["iter"] == 16)  # the window opened here (stable_tol admits any steps)
    assert result.figures["window_start_s"] == result.figures["first_step_s"]  # from the first steady step
    assert launch_t + result.figures["window_start_s"] + result.figures["window_s"] < opened + WINDOW_S * 0.25


def test_a_short_probe_that_may_win_measures_its_whole_window(tmp_path: Path) -> None:
    folder = tmp_path / "wins"
    folder.mkdir()
    spec = TrialSpec(argv=(sys.executable, "-c", UNEVEN, str(folder)), env={}, launcher=Launcher.DIRECT)
    measure = MeasureConf(
        warmup_iters=2,
        stable_k=2,
        stable_tol=10.0,
        warmup_timeout_s=60.0,
        window_s=4.0,
        stall_timeout_s=60.0,
        trial_timeout_s=120.0,
        extend_unstable=False,
    )
    result = trial.run(
        trial.TrialRequest(spec, folder, uuid.uuid4().hex[:12], measure, beat=1.0, short=True), HostSampler
    )
    assert result.verdict.status is Status.OK and "short" not in result.figures and "cut" not in result.figures
    assert result.figures["window_s"] >= 4.0 * 0.9
