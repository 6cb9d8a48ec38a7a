"""A step-down on weak evidence is confirmed before it counts: a trainer killed by SIGKILL with no kernel line
(a scheduler, a user, or the OOM killer outside any cgroup of ladder's) is `oom_or_nccl` with low confidence, so the
walk runs that rung once more; a second failure steps down, as the README says (Verdicts and their confidence)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from ladder.storage.tsv import read_tsv
from tests.e2e.test_resume import FIRST, finish, search, sweep_dir

# Above 8 envs the trainer dies by SIGKILL after a few progress lines, with nothing else to say.
TRAINER = textwrap.dedent(
    """
    import os, signal, sys, time
    envs = int(sys.argv[1])
    for i in range(1, 10**6):
        print(f"iter {i} samples {i * envs}", flush=True)
        if envs > 8 and i == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.05)
    """
)


def test_a_bare_sigkill_runs_its_rung_once_more_before_the_walk_steps_down(tmp_path: Path) -> None:
    trainer = tmp_path / "trainer.py"
    trainer.write_text(TRAINER)
    command = f'workload.command=["{sys.executable}","{trainer}","{{num_envs}}"]'
    out = finish(
        search(
            tmp_path,
            f"case={FIRST}",
            "profile=[default]",
            "ladder.rungs=[16,8]",
            "workload.kind=command",
            command,
            "measure.window_s=2",
            "measure.warmup_iters=2",
            "measure.stable_tol=0.5",
            "sweep=weak",
        )
    )
    rows = read_tsv(sweep_dir(tmp_path, "weak") / "trials.tsv")
    walk = [(r["num_envs"], r["status"], r["confidence"]) for r in rows]
    assert walk == [("16", "oom_or_nccl", "low"), ("16", "oom_or_nccl", "low"), ("8", "ok", "high")], out
    verdict = json.loads((sweep_dir(tmp_path, "weak") / rows[0]["trial_dir"] / "verdict.json").read_text())
    assert (verdict["status"], verdict["confidence"]) == ("oom_or_nccl", "low") and verdict["basis"], verdict
