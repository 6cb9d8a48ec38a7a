"""What a user sees of a sweep before and after it: the dry run (what shapes every trial, an estimate from the
recorded history), the hint for a `${x}` meant for the trainer, and the report drawn from a real sweep."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.settings.config import MeasureConf
from ladder.sweep.dryrun import default_durations, from_history, settings_lines
from tests.helpers import REPO
from tests.unit.test_workloads import settings

ROOT = REPO


def probe(rung: int, status: Status, seconds: str, **info: str) -> TrialRecord:
    figures = {"cut": 1.0} if info.pop("cut", "") else {}
    return TrialRecord(
        "amp_pi_plus",
        "amp",
        "default",
        rung,
        Phase.PROBE,
        status,
        Reason.NONE,
        "",
        figures,
        {"duration_s": seconds, **info},
    )


# ---- pure: what shapes a trial, the estimate's basis ---------------------------------------------------------------


def test_the_settings_that_shape_every_trial_are_listed_with_what_applies() -> None:
    s = settings("amp_pi_plus", "workload.host_mem_limit_gb=3", "workload.emulate_gpu_mem_gb=0.6", "measure.repeats=3")
    environ = {"PYTHONPATH": "/opt/lib", "NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "8", "HOME": "/root", "X_OTHER": "1"}
    text = "\n".join(settings_lines(s, 2, "cpu", 0.6, environ, {"OMP_NUM_THREADS": "1"}))
    assert "ranks: 2 on cpu" in text
    assert "caps: memory cgroup 3 GB for the whole trial" in text and "emulated card 0.6 GB per rank (614 MiB)" in text
    m = s.measure
    assert f"window {m.window_s:g} s of at least {m.min_window_iters} progress points" in text and "3 repeats" in text
    assert "inherited environment that matters: NCCL_DEBUG=INFO PYTHONPATH=/opt/lib;" in text
    assert "set by ladder over the inherited value: OMP_NUM_THREADS" in text
    assert "HOME" not in text and "X_OTHER" not in text  # what changes no trial is left out
    unapplied = "\n".join(settings_lines(s, 1, "cpu", None, {}, {}))  # a workload that takes no emulated card
    assert (
        "no emulated card (workload.emulate_gpu_mem_gb=0.6 applies on a GPU, or to the built-in proxy on CPU)"
        in unapplied
    )
    assert "inherited environment that matters: (none)" in unapplied
    assert "reuse of earlier sweeps' trials: on\n" in unapplied + "\n"  # no version known: none shown
    versions = {"workload_version": "cf831aca06b0", "trainer_version": "files:0123abcd"}
    shown = "\n".join(settings_lines(s, 1, "cpu", None, {}, {}, versions))
    assert (
        "reuse of earlier sweeps' trials: on, from trials of the same code only "
        "(ladder cf831aca06b0, trainer files:0123abcd)" in shown
    )


def test_the_estimate_takes_medians_of_the_recorded_history_and_says_so() -> None:
    defaults = default_durations(MeasureConf(), descends=True)
    assert defaults.basis.startswith("defaults:") and from_history([], defaults, "x") == defaults
    # MimicKit builds its env and agent for ~24 s before its first line (a failing launch took 27.6 s on CPU)
    mimickit = default_durations(MeasureConf(), descends=True, workload="mimickit")
    assert mimickit.fail_s > defaults.fail_s and mimickit.fit_s - mimickit.fail_s == defaults.fit_s - defaults.fail_s
    assert mimickit.basis.endswith("(a start-up guessed at 25 s)")
    history = [
        probe(256, Status.OOM_OR_NCCL, "6.0"),
        probe(128, Status.OOM_OR_NCCL, "8.0"),
        probe(128, Status.TIMEOUT, "30.0"),
        probe(64, Status.OK, "200.0"),
        probe(64, Status.OK, "210.0"),
        probe(48, Status.OK, "20.0", cut="1"),
        probe(64, Status.OK, "999.0", reused_from="s#1"),
        probe(64, Status.ERROR, "999.0"),
    ]
    took = from_history(history, defaults, "case amp_pi_plus, workload proxy, on cpu")
    assert (took.fail_s, took.fit_s, took.cut_s) == (8.0, 205.0, 20.0)  # a reused copy, an error: not counted
    assert took.basis == (
        "history: medians of 2 fitting, 3 failing, 1 cut-short recorded trial(s) of case "
        "amp_pi_plus, workload proxy, on cpu"
    )
    # fits measured with 8 s windows, estimated for a sweep of 60 s windows: their time outside the window, plus 60 s
    windowed = [replace(r, figures={"window_s": 8.5}) for r in history[3:5]]
    longer = from_history(history[:3] + windowed, defaults, "c", window_s=60.0)
    assert longer.fit_s == pytest.approx(205.0 - 8.5 + 60.0) and longer.fail_s == 8.0
    assert longer.basis.endswith("(a fit: its time outside its window, plus measure.window_s=60)")
    only_fails = from_history(history[:2], default_durations(MeasureConf(), descends=False), "c")
    assert only_fails.fit_s == defaults.fit_s and only_fails.cut_s is None
    assert only_fails.basis.endswith("; defaults for fitting")


# ---- a `${x}` meant for a child Hydra app ------------------------------------------------------------------------


# ---- one real sweep: the dry run's history, the report ---------------------------------------------------------
