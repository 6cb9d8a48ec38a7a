"""A fit needs a measurement (`trial.run` on small real programs): the window waits for its points, a trainer that
prints too rarely is `unmeasured`, one whose lines never match is a setting to fix, and a slow first update that
visibly works is no hang."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from ladder.core.paths import STDOUT
from ladder.core.records import Reason, Status
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.runner import trial
from ladder.runner.host import HostSampler
from ladder.settings.config import MeasureConf
from ladder.sweep.trials import confirmation
from tests.helpers import DATA, need_memory_cgroups
from tests.unit.test_measure import conf

REGEX = r"step (?P<iter>\d+) samples (?P<samples>\d+)"


# Prints a progress line every `period` seconds (after `first` seconds of work: busy, or asleep), then sleeps.
TRAINER = """
import sys, time
first, period, busy = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "busy"
grow, held = sys.argv[3] == "grow", []  # idle, but holding 4 MiB more every half second (written: resident)
jitter = sys.argv[4:] == ["jitter"]  # every other line comes ten times later
wobble = sys.argv[4:] == ["wobble"]  # ... or 1.5 times later
stalls = sys.argv[4:] == ["stalls"]  # the 3rd and 6th lines come 1.5 s late (a busy machine stalled it), then evenly
print("starting: building the envs", flush=True)
end = time.time() + first
while time.time() < end:
    if busy:
        sum(i * i for i in range(20000))
    elif grow:
        held.append(b"x" * (4 << 20))
        time.sleep(0.5)
    else:
        time.sleep(0.05)
i = 0
while True:
    i += 1
    print(f"step {i} samples {i * 1000}", flush=True)
    time.sleep(period * (10 if jitter and i % 2 else 1.5 if wobble and i % 2 else 1))
    if stalls and i in (3, 6):
        time.sleep(1.5)
"""


HANGS = """
import signal, sys, time
def on_term(signum, frame):
    print(f"SignalException: Process 1 got signal: {signum}", flush=True)
    sys.exit(1)
signal.signal(signal.SIGTERM, on_term)
for i in range(1, 4):
    print(f"step {i} samples {i * 1000}", flush=True)
    time.sleep(0.2)
print("waiting for the other rank", flush=True)
time.sleep(600)
"""


def run(
    tmp_path: Path,
    argv: tuple[str, ...],
    measure: MeasureConf,
    regex: str = REGEX,
    cadence_s: float | None = None,
    per_iteration: bool = False,
) -> trial.Result:
    spec = TrialSpec(
        argv=(sys.executable, "-c", TRAINER, *argv),
        env={},
        launcher=Launcher.DIRECT,
        progress_file=STDOUT,
        progress_kind=ProgressKind.REGEX,
        progress_regex=regex,
        progress_per_iteration=per_iteration,
    )
    return trial.run(
        trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure, cadence_s=cadence_s), HostSampler
    )


def test_the_window_waits_for_its_points_and_counts_the_one_that_closed_it(tmp_path: Path) -> None:
    """A line every 1.5 s against a 1 s window: it closes only once it holds 4 points, and its rate spans them."""
    result = run(tmp_path, ("0", "1.5", "idle"), conf())
    assert result.verdict.status is Status.OK and result.stopped_by == "window_done"
    f = result.figures
    assert f["n_iters"] >= 3  # 4 points: 3 intervals, the last one the point after window_s
    assert f["samples_per_s"] > 0 and f["samples_per_s_lo"] >= 0 and f["rate_reported"] == 0.0
    assert "ci_frac" in f and "unstable" in f


def test_a_trainer_that_prints_too_rarely_is_unmeasured_never_ok_and_says_what_budget_would_measure_it(
    tmp_path: Path,
) -> None:
    """A line every 4 s, 5 needed in the window, 7 s to run and no budget past it: `unmeasured`, and the evidence
    gives its pace and a budget that would measure it (its window is due about 30 s after launch)."""
    result = run(tmp_path, ("0", "4", "idle"), conf(trial_timeout_s=7.0, min_window_iters=5))
    verdict = result.verdict
    assert (verdict.status, verdict.reason) == (Status.UNMEASURED, Reason.FEW_POINTS)
    assert "of the 5 needed" in verdict.evidence and "s per progress point" in verdict.evidence
    advice = verdict.evidence.split("measure.budget_s=")[1]
    assert float(advice.split()[0]) >= 28  # five 4 s points after two steady ones: well past 7 s
    assert "samples_per_s" not in result.figures and "overtime" not in result.figures


def test_a_slow_but_steady_trainer_is_measured_past_its_trial_limit_within_its_budget(tmp_path: Path) -> None:
    """The same trainer, a line every 4 s, given a budget: it runs past its 7 s trial limit until its window holds
    its points, and is measured."""
    measure = conf(trial_timeout_s=7.0, min_window_iters=5, stall_timeout_s=5.0, budget_s=90.0)
    result = run(tmp_path, ("0", "4", "idle"), measure)
    assert result.verdict.status is Status.OK and result.stopped_by == "window_done", result.verdict
    f = result.figures
    assert f["overtime"] == 1.0 and f["n_iters"] >= 4 and f["samples_per_s"] > 0
    assert result.duration_s > 7.0


def test_a_trainer_whose_lines_never_match_is_a_setting_to_fix(tmp_path: Path) -> None:
    pattern = r"iteration=(?P<iter>\d+)"
    result = run(tmp_path, ("0", "0.2", "idle"), conf(startup_timeout_s=2.0, stall_timeout_s=2.0), regex=pattern)
    verdict = result.verdict
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.NO_PROGRESS_MATCH)
    assert repr(pattern) in verdict.evidence and "step " in verdict.evidence  # the regex, and what it did print
    assert "signal" not in verdict.evidence.lower()  # never ladder's own SIGTERM echoed back


def test_a_trainer_that_prints_once_an_iteration_and_was_stalled_twice_is_measured_at_its_window(
    tmp_path: Path,
) -> None:
    """A line every 0.1 s, twice 1.5 s late during its warm-up (a busy machine stalling it), then evenly. Printed
    once a whole iteration, update included (as MimicKit and the proxy print), its two pauses are stalls, not a
    rollout's end: its window closes on time and is a fit. Read as a regex of the user's (lines that may come from
    inside a rollout), the same pauses are bursts whose update the window never held: held open to the trial's
    limit, and no confident fit."""
    measure = conf(warmup_iters=9, window_s=1.0, trial_timeout_s=8.0)
    whole = run(tmp_path / "whole", ("0", "0.1", "idle", "stalls"), measure, per_iteration=True)
    assert whole.verdict.status is Status.OK and whole.stopped_by == "window_done", whole.verdict
    assert "window_held" not in whole.figures and whole.figures["samples_per_s"] > 0
    inside = run(tmp_path / "inside", ("0", "0.1", "idle", "stalls"), measure, per_iteration=False)
    assert inside.verdict.status is not Status.OK and "no update yet" in inside.verdict.evidence, inside.verdict
    assert inside.figures.get("window_held") == 1.0


def test_a_slow_first_update_that_visibly_works_is_not_a_hang(tmp_path: Path) -> None:
    """12 s of CPU work before the first line, against a 3 s start-up limit: it waits, and then measures."""
    result = run(tmp_path, ("12", "0.3", "busy"), conf(startup_timeout_s=3.0, stall_timeout_s=3.0))
    assert result.verdict.status is Status.OK and result.stopped_by == "window_done"
    assert result.figures["window_start_s"] > 3.0


def test_a_slow_first_update_whose_memory_grows_is_not_a_hang(tmp_path: Path) -> None:
    """12 s with an idle CPU but memory growing (as a trainer filling its buffers, or waiting on a loading GPU),
    against a 3 s start-up limit: it waits, and then measures."""
    result = run(tmp_path, ("12", "0.3", "grow"), conf(startup_timeout_s=3.0, stall_timeout_s=3.0))
    assert result.verdict.status is Status.OK and result.stopped_by == "window_done"
    assert result.figures["window_start_s"] > 3.0


def test_a_silent_idle_start_is_stopped_at_the_start_up_limit(tmp_path: Path) -> None:
    """Asleep and printing nothing the reader matches: stopped once start-up is over, as a setting to fix."""
    result = run(tmp_path, ("600", "1", "idle"), conf(startup_timeout_s=3.0, stall_timeout_s=3.0))
    assert result.stopped_by == "stalled"
    assert (result.verdict.status, result.verdict.reason) == (Status.ERROR, Reason.NO_PROGRESS_MATCH)
    assert "starting: building the envs" in result.verdict.evidence


def test_a_wide_interval_its_steps_cannot_narrow_says_unstable_without_an_extension(tmp_path: Path) -> None:
    """Lines 0.15 s and 1.5 s apart: the rate's interval is far wider than max_ci_frac, and as many steps again of
    that spread would leave it so; the window is not run on for them (`window_futile`), and the figures carry the
    verdict. With the extension off, the same window says the same, without the flag."""
    result = run(tmp_path, ("0", "0.15", "idle", "jitter"), conf(window_s=2.0))
    assert result.verdict.status is Status.OK and result.stopped_by == "window_done"
    f = result.figures
    assert f["window_futile"] == 1.0 and "window_extended" not in f
    assert f["unstable"] == 1.0 and f["ci_frac"] > 0.10
    assert 0 <= f["samples_per_s_lo"] < f["samples_per_s"] < f["samples_per_s_hi"]
    (tmp_path / "off").mkdir()
    off = run(tmp_path / "off", ("0", "0.15", "idle", "jitter"), conf(window_s=2.0, extend_unstable=False))
    assert off.figures["unstable"] == 1.0 and "window_futile" not in off.figures


def test_a_first_window_s_interval_counts_the_steady_steps_that_opened_it(tmp_path: Path) -> None:
    """A real trainer's window with no case pool behind it: its interval pools the spread of the `stable_k` steady
    steps before it (`rates.steady_noise`; 2 steps, 1 degree of freedom), and its figures say so and are the
    interval its extension was judged on. (Its lines alternate 0.2 s and 0.3 s apart: a trainer's steps read at one
    tick's resolution may otherwise be alike, which says nothing of their spread.)"""
    result = run(tmp_path, ("0", "0.2", "idle", "wobble"), conf(window_s=1.0))
    assert result.verdict.status is Status.OK and result.stopped_by == "window_done"
    f = result.figures
    assert f["noise_pooled_df"] == 1.0 and f["step_df"] >= 3
    assert f["unstable"] == float(f["ci_frac"] > 0.10)
    assert 0 <= f["samples_per_s_lo"] < f["samples_per_s"] < f["samples_per_s_hi"]


def test_a_confirmation_window_keeps_its_length_and_says_unstable(tmp_path: Path) -> None:
    """`confirm_s` is honoured: the same jittery trainer, confirmed for 4 s after 2 s probes, is neither extended
    by another 4 s nor held to learn its cadence over three 4 s windows; its figures say it is unstable instead."""
    probe = conf(window_s=2.0)
    confirm = run(tmp_path, ("0", "0.15", "idle", "jitter"), confirmation(probe, confirm_s=4.0), cadence_s=2.0)
    assert confirm.verdict.status is Status.OK and confirm.stopped_by == "window_done"
    f = confirm.figures
    assert "window_extended" not in f and f["unstable"] == 1.0
    assert 4.0 <= f["window_s"] < 8.0  # its length (and the line that closed it), not twice it


def test_a_stall_after_progress_is_a_timeout_whose_evidence_is_its_last_progress_line(tmp_path: Path) -> None:
    spec = TrialSpec(
        argv=(sys.executable, "-c", HANGS),
        env={},
        launcher=Launcher.DIRECT,
        progress_file=STDOUT,
        progress_kind=ProgressKind.REGEX,
        progress_regex=REGEX,
    )
    result = trial.run(
        trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], conf(stall_timeout_s=2.0, window_s=30.0)), HostSampler
    )
    assert (result.verdict.status, result.verdict.reason) == (Status.TIMEOUT, Reason.STALLED)
    assert result.verdict.evidence.endswith("last progress: step 3 samples 3000")
    assert "got signal" in (tmp_path / STDOUT).read_text()  # it did echo the SIGTERM; the evidence does not


# ---------------------------------------------------------------- a fit outlives its memory peak

BURSTY = str(DATA / "trainers" / "bursty_update.py")
NEAR_CAP = str(DATA / "trainers" / "near_cap.py")


def run_bursty(tmp_path: Path, num_envs: int) -> trial.Result:
    """The CleanRL-shaped trainer (a line per env step, then an update holding `num_envs` MiB more) under a
    300 MiB memory cgroup, with a 0.3 s window of 4 points: shorter than one rollout."""
    need_memory_cgroups()
    measure = conf(window_s=0.3, min_window_iters=4, trial_timeout_s=60.0)
    spec = TrialSpec(
        argv=(sys.executable, BURSTY, str(num_envs)),
        env={},
        launcher=Launcher.DIRECT,
        progress_file=STDOUT,
        progress_kind=ProgressKind.REGEX,
        progress_regex=r"global_step=(?P<samples>\d+)",
    )
    return trial.run(
        trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure, mem_limit_bytes=300 * 2**20), HostSampler
    )


def test_a_rung_that_dies_at_its_first_update_is_never_ok_however_short_its_window(tmp_path: Path) -> None:
    """CleanRL's shape under a 300 MiB memory cgroup: a line per env step for its whole rollout (under a second),
    then an update that needs `num_envs` MiB more. A 0.3 s window of 4 points closes inside the first rollout; a
    fit is no fit until its window holds an update, so the trial runs on into it, and the cgroup's OOM kill there is
    its verdict."""
    result = run_bursty(tmp_path, 400)
    assert (result.verdict.status, result.verdict.reason) == (Status.OOM_OR_NCCL, Reason.HOST_OOM), result
    assert "samples_per_s" not in result.figures or result.verdict.status is not Status.OK


def test_a_rung_whose_update_fits_is_measured_over_a_window_that_holds_an_update(tmp_path: Path) -> None:
    result = run_bursty(tmp_path, 16)
    assert result.verdict.status is Status.OK, result.verdict
    assert result.figures["window_s"] >= 0.6  # it spans the 0.6 s update, not 0.3 s of one rollout
    assert result.figures["cgroup_peak_mb"] < 300


def test_a_survivor_at_its_cap_is_weak_oom_evidence_naming_the_cap(tmp_path: Path) -> None:
    """A trainer whose use of its emulated card comes within 2% of it (630 of 640 MiB) survives, but is no
    confident fit: `oom_or_nccl`/`near_cap`, low confidence (the walk runs the rung once more before it steps down),
    with the cap and how near in its evidence. At 320 MiB it is an ordinary fit."""
    measure = conf(window_s=0.5, min_window_iters=4)
    near, clear = (
        TrialSpec(
            argv=(sys.executable, NEAR_CAP, str(n), "progress.jsonl", "--cap-mb", "640", "--mib-per-env", "10"),
            env={},
            launcher=Launcher.DIRECT,
            cwd=str(tmp_path / f"e{n}"),
            progress_per_iteration=True,
        )
        for n in (63, 32)
    )
    for spec in (near, clear):
        Path(spec.cwd).mkdir()
    got = [
        trial.run(trial.TrialRequest(s, Path(s.cwd), uuid.uuid4().hex[:12], measure), HostSampler)
        for s in (near, clear)
    ]
    verdict = got[0].verdict
    assert (verdict.status, verdict.reason, verdict.confidence) == (Status.OOM_OR_NCCL, Reason.NEAR_CAP, "low")
    assert "630/640 MiB of its emulated card" in verdict.evidence
    assert got[0].figures["samples_per_s"] > 0  # its figures stay; no pick is made from them
    assert got[1].verdict.status is Status.OK
