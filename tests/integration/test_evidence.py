"""A trial that ran out of memory is stopped at its first evidence (real files; a real process for the trial)."""

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
from tests.unit.test_evidence import OOM

# A rank that has reported running out of memory while its process lingers (as a rank does while its launcher has
# not yet torn the group down): the trial must end at that line, not when a stall or time limit runs out.
LINGERING_RANK = f"""
import pathlib, sys, time
log = pathlib.Path(sys.argv[1]) / "ranks" / "none_x" / "attempt_0" / "1" / "stderr.log"
log.parent.mkdir(parents=True)
log.write_text({OOM!r})
time.sleep(600)
"""


def test_a_trial_is_stopped_at_its_first_memory_evidence(tmp_path: Path) -> None:
    spec = TrialSpec(argv=(sys.executable, "-c", LINGERING_RANK, str(tmp_path)), env={}, launcher=Launcher.DIRECT)
    measure = MeasureConf(
        warmup_timeout_s=60.0, startup_timeout_s=60.0, stall_timeout_s=60.0, trial_timeout_s=120.0, kill_grace_s=5.0
    )
    result = trial.run(trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure), HostSampler)
    assert result.stopped_by == "out_of_memory"
    assert result.verdict.status is Status.OOM_OR_NCCL and result.verdict.reason is Reason.CUDA_OOM
    assert result.exit_code < 0 and result.leftovers == 0  # ladder killed the lingering rank: it would sleep on


# A trainer that reports progress, then its loss gone NaN, and trains on (as sb3's DQN and most trainers do): the trial
# must end at that line, not after a window no value of which could be the pick.
DIVERGING = """
import json, pathlib, sys, time
out = pathlib.Path(sys.argv[1]) / "progress.jsonl"
for i in range(1, 100000):
    with out.open("a") as fh:
        fh.write(json.dumps({"t": time.time(), "iter": i, "samples": 64 * i}) + "\\n")
    if i == 3:
        print("| train/loss | nan |", flush=True)
    time.sleep(0.05)
"""


def test_a_trial_is_stopped_at_its_line_of_diverged_training(tmp_path: Path) -> None:
    spec = TrialSpec(argv=(sys.executable, "-c", DIVERGING, str(tmp_path)), env={}, launcher=Launcher.DIRECT)
    measure = MeasureConf(window_s=600.0, warmup_iters=1, stall_timeout_s=60.0, trial_timeout_s=900.0, kill_grace_s=5)
    result = trial.run(trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure), HostSampler)
    assert result.stopped_by == "diverged"
    assert result.verdict.status is Status.DIVERGED and "| train/loss | nan |" in result.verdict.evidence
    assert "no progress line was read" not in result.verdict.evidence  # its progress was read: nothing to fix there
    assert result.exit_code < 0 and result.leftovers == 0  # killed at once: it would train on
    assert "samples_per_s" not in result.figures  # no window measured: none would make it an answer


def test_a_trial_that_diverged_before_any_progress_was_read_says_its_progress_setting_may_be_wrong_too(
    tmp_path: Path,
) -> None:
    """The same trainer printing its progress on stdout, read with a regex that matches none of it: `diverged` at its
    NaN line, and the evidence says no progress line was read before it (without the NaN the trial would be
    `no_progress_match`), so that fixing the one does not hide the other."""
    printing = DIVERGING.replace("with out.open", "print(f'step {i} samples {64 * i}', flush=True)\n    with out.open")
    spec = TrialSpec(
        argv=(sys.executable, "-c", printing, str(tmp_path)),
        env={},
        launcher=Launcher.DIRECT,
        progress_file=STDOUT,
        progress_kind=ProgressKind.REGEX,
        progress_regex=r"iteration=(?P<iter>\d+)",
    )
    measure = MeasureConf(window_s=600.0, warmup_iters=1, stall_timeout_s=60.0, trial_timeout_s=900.0, kill_grace_s=5)
    result = trial.run(trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], measure), HostSampler)
    assert result.stopped_by == "diverged" and result.verdict.status is Status.DIVERGED, result.verdict
    assert "| train/loss | nan |" in result.verdict.evidence
    assert "no progress line was read before it" in result.verdict.evidence
    assert "workload.progress_regex" in result.verdict.evidence
