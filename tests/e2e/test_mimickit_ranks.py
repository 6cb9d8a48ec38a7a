"""The real MimicKit, end to end (`tests/e2e/mimickit_sweeps.py` says how it runs): two ranks stopped by Ctrl-C and
resumed, and MimicKit's own failure modes. A file apart from the cgroup sweep's, so that the two run on two workers
at once."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import psutil
import pytest

from ladder.core.errors import ExitCode
from ladder.storage.tsv import read_tsv
from tests.e2e.mimickit_sweeps import (
    SAMPLES_PER_ITER,
    descendants,
    finish,
    mimickit_table,
    run_search,
    search,
)
from tests.helpers import wait_for

pytestmark = pytest.mark.usefixtures("mimickit_ready")  # skipped with the reason where MimicKit cannot run


# ---- two ranks, Ctrl-C and resume --------------------------------------------------------------------------------


def test_two_ranks_interrupted_by_ctrl_c_and_resumed(tmp_path: Path) -> None:
    out, rungs = tmp_path / "output", ("profile=[default]", "ladder.rungs=[4]", "workload.nproc=2")
    proc = search(out, "ranks", *rungs, "measure.window_s=1200")

    # MimicKit's main process (rank 0) spawns rank 1 before either builds anything: the sweep is stopped once both
    # ranks run, during their start-up (their iterations, two ranks sharing two cores, are the resume's to measure)
    def spawned() -> list[psutil.Process]:
        found = []
        for p in descendants(proc.pid):
            with contextlib.suppress(psutil.Error):
                if "spawn_main" in " ".join(p.cmdline()):
                    found.append(p)
        return found

    try:
        wait_for(lambda: spawned() or proc.poll() is not None, 1500, 0.5)
        ranks = spawned()
        assert len(ranks) == 1  # rank 0 runs in MimicKit's main process; rank 1 is spawned (`--devices cpu cpu`)
        everything = descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
    finally:
        stopped = finish(proc, out, "ranks", timeout_s=120)
    assert stopped.code == ExitCode.INTERRUPTED, stopped.out
    assert "resume with" in stopped.out
    assert [(t["num_envs"], t["status"]) for t in stopped.trials()] == [("4", "interrupted")]
    assert not [p for p in everything if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    # the resume measures over a short window: a change of the sweep's settings, said so (the trial interrupted
    # under the old settings is set aside with them; its folder stays)
    resumed = run_search(out, "ranks", *rungs, "settings_change=accept")
    assert resumed.code == ExitCode.PICK_FOUND, resumed.out
    trials = resumed.trials()
    assert [(t["status"], t["trial_dir"].rsplit("/", 1)[1]) for t in trials] == [("ok", "default_e4_probe_2")]
    trial = resumed.trial_dir(trials[0])
    assert "--devices cpu cpu" in (trial / "cmd.txt").read_text()
    table = mimickit_table((trial / "stdout.log").read_text(errors="replace"))
    steps = [b["Samples"] - a["Samples"] for a, b in zip(table, table[1:], strict=False)]
    assert steps and set(steps) == {SAMPLES_PER_ITER * 4 * 2}  # Samples counts both ranks' envs
    (best,) = read_tsv(resumed.dir / "best_by_case.tsv")
    assert (best["n_gpus"], best["status"]) == ("2", "ok") and float(best["samples_per_s"]) > 0
    # MimicKit's ranks are one process tree (rank 1 is its spawned child), sampled as one: both ranks' PSS (their
    # shared pages once: 1155 MiB measured, where their RSS summed to 1665), more than one rank's RSS at 4 envs (843)
    assert float(best["max_mem0"]) > 1000


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
