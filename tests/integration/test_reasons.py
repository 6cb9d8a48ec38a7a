"""Reasons that say what happened, on real trainers run by `trial.run`: a trainer that prints evenly and exits by
itself before its window could stand is `unmeasured` with how long it ran and what its window needed."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from ladder.core.paths import STDOUT
from ladder.core.records import Reason, Status
from ladder.core.spec import Launcher, ProgressKind, TrialSpec
from ladder.runner import trial
from ladder.runner.host import HostSampler
from ladder.workloads.command import DEFAULT_REGEX
from tests.unit.test_measure import conf

# `iter N samples M` every 0.05 s, then a clean exit after `seconds`: what a short run of a trainer prints
SHORT = """
import sys, time
end, i = time.time() + float(sys.argv[1]), 0
while time.time() < end:
    i += 1
    print(f"iter {i} samples {i * 8}", flush=True)
    time.sleep(0.05)
"""


def test_a_trainer_that_exits_before_its_evenly_printed_window_stands_says_it_exited(tmp_path: Path) -> None:
    """Read with the default regex (its lines may come from inside a rollout), its window stands only after three
    windows of even printing (3 s of a 1 s window); it exits after 2 s with dozens of points: the reason is its
    exit, with how long it ran and how long its window needed, never too few points."""
    spec = TrialSpec(
        argv=(sys.executable, "-c", SHORT, "2"),
        env={},
        launcher=Launcher.DIRECT,
        progress_file=STDOUT,
        progress_kind=ProgressKind.REGEX,
        progress_regex=DEFAULT_REGEX,
    )
    request = trial.TrialRequest(spec, tmp_path, uuid.uuid4().hex[:12], conf(min_window_iters=5))
    verdict = trial.run(request, HostSampler).verdict
    assert (verdict.status, verdict.reason) == (Status.UNMEASURED, Reason.FEW_POINTS), verdict
    assert verdict.evidence.startswith("it exited by itself after "), verdict.evidence
    ran = float(verdict.evidence.split("after ")[1].split(" s")[0])
    assert 2.0 <= ran < 3.0
    assert "before its window could stand" in verdict.evidence and "of the 3 s (3 windows)" in verdict.evidence
    assert "run the trainer longer" in verdict.evidence and "of the 5 needed" not in verdict.evidence
