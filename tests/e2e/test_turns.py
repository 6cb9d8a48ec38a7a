"""Turn-taking between the processes that run one case's walk (`ladder.storage.turns`), and a sweep step that loads the
case's records once.

The unit tests use a real Optuna journal storage in a temporary folder; two processes are stood in for by two study
handles (and two `Turns`) on the one storage. The real processes are in test_resume and test_faults.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ladder.core.records import Phase, Status
from ladder.runner.machine import find_machine
from ladder.settings.argv import known_cases
from ladder.settings.catalog import CONF_DIR
from ladder.settings.config import register, settings_from
from ladder.storage import studies
from ladder.sweep import loop as sweep
from ladder.sweep import resume
from ladder.ui.view import PlainView

STEP = [
    "case=amp_pi_plus",
    "device=cpu",
    "reuse=false",
    "profile=[default]",
    "ladder.rungs=[256,64]",
    "confirm_s=3",
    "measure.window_s=3",
    "measure.warmup_iters=2",
    "measure.stable_tol=0.5",
    "measure.stable_k=1",
    "measure.warmup_timeout_s=150",
    "measure.extend_unstable=false",
    "workload.nproc=1",  # one rank, started directly: the ranks are not what these tests are about
]

# ---------------------------------------------------------------- a sweep step loads the case's records once


def test_a_sweep_step_loads_the_case_records_once_and_the_sweep_records_once_per_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real small sweep (proxy trainer, torchrun on CPU): 256 runs out of memory, 64 fits, its confirmation
    passes, and the step after finds nothing left. Each step reads the case's records once (its snapshot), and a
    step that ran a trial reads the sweep's once more for trials.tsv: at most 2 loads a step."""
    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*STEP, "sweep=loads", f"output_root={tmp_path}/output/train"])
    settings = settings_from(cfg, known_cases())
    paths, machine = resume.paths_for(settings, datetime.now(timezone.utc)), find_machine(settings)

    loads, per_step = [0], []
    real_records, real_step = studies.records, sweep._step

    def records(study):  # type: ignore[no-untyped-def]
        loads[0] += 1
        return real_records(study)

    def step(ctx, gate):  # type: ignore[no-untyped-def]
        before = loads[0]
        try:
            return real_step(ctx, gate)
        finally:
            per_step.append(loads[0] - before)

    monkeypatch.setattr(studies, "records", records)
    monkeypatch.setattr(sweep, "_step", step)
    summary = sweep.run(settings, paths, machine, PlainView())

    walked = [(r.num_envs, r.phase, r.status) for r in summary.records]
    assert walked == [
        (256, Phase.PROBE, Status.OOM_OR_NCCL),
        (64, Phase.PROBE, Status.OK),
        (64, Phase.CONFIRM, Status.OK),
    ]
    assert len(per_step) == 4, per_step  # three launches, then the step that finds nothing left
    assert max(per_step) <= 2 and per_step[-1] == 1, per_step
