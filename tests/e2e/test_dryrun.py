"""What a user sees of a sweep before and after it: the dry run (what shapes every trial, an estimate from the
recorded history), the hint for a `${x}` meant for the trainer, and the report drawn from a real sweep."""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from ladder.storage.tsv import read_tsv
from ladder.ui.report import build, charts
from tests.e2e.test_sweep_e2e import FAST, GATED, ONE, search, sweep_dir

# ---- pure: what shapes a trial, the estimate's basis ---------------------------------------------------------------


# ---- a `${x}` meant for a child Hydra app ------------------------------------------------------------------------


def test_an_interpolation_meant_for_the_trainer_gets_the_form_that_reaches_it(tmp_path: Path) -> None:
    base = [
        sys.executable,
        "-m",
        "ladder.search",
        "workload.kind=command",
        "case=mine",
        "ladder.rungs=[8]",
        "profile=[default]",
        "dry_run=true",
        f"output_root={tmp_path}/out",
    ]
    bad = 'workload.cmd="python train.py n={num_envs} +trainer.out=${x} lr=${trainer.lr}"'
    proc = subprocess.run([*base, bad], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Interpolation key 'x' not found" in proc.stderr and "Traceback" not in proc.stderr
    fixed = shlex.split(proc.stderr.split("escape it: ")[1])  # the override as the hint writes it, shell-quoted
    assert fixed == [r'workload.cmd="python train.py n={num_envs} +trainer.out=\${{x}} lr=\${{trainer.lr}}"']
    good = subprocess.run([*base, *fixed], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    assert "argv: python train.py n=8 '+trainer.out=${x}' 'lr=${trainer.lr}'" in good.stdout  # the trainer's own


# ---- one real sweep: the dry run's history, the report ---------------------------------------------------------


def test_a_dry_run_estimates_from_the_recorded_trials_of_the_same_case(swept: Path) -> None:
    rows = read_tsv(sweep_dir(swept, "first") / "trials.tsv")
    # planned with 20 s windows: a recorded fit counts for its time outside its window, plus 20 s
    fits = [
        float(r["duration_s"]) - float(r["window_s"]) + 20
        for r in rows
        if r["status"] == "ok" and not float(r.get("cut") or 0)
    ]
    fails = [float(r["duration_s"]) for r in rows if r["status"] == "oom_or_nccl"]
    env = {**os.environ, "NCCL_DEBUG": "WARN"}
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "ladder.search",
            "case=amp_pi_plus",
            "device=cpu",
            "reuse=false",
            f"output_root={swept}/output/train",
            "sweep=plan",
            "dry_run=true",
            *FAST,
            *GATED,
            "measure.window_s=20",
            "workload.host_mem_limit_gb=4",
        ],
        cwd=swept,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert plan.returncode == 0, plan.stderr
    out = plan.stdout
    assert f"a fitting one ~{statistics.median(fits):.0f} s" in out, out
    assert f"a failing launch ~{statistics.median(fails):.0f} s" in out, out
    assert f"estimate basis: history: medians of {len(fits)} fitting, {len(fails)} failing" in out, out
    assert (
        "of case amp_pi_plus, workload proxy, on cpu (a fit: its time outside its window, plus measure.window_s=20)"
        in out
    )
    assert "caps: memory cgroup 4 GB for the whole trial" in out and "emulated card 0.6 GB per rank" in out
    assert "NCCL_DEBUG=WARN" in out and "reuse of earlier sweeps' trials: off" in out
    assert not (sweep_dir(swept, "plan") / "journal.log").exists()
    fresh = subprocess.run(
        [
            sys.executable,
            "-m",
            "ladder.search",
            "case=amp_pi_plus",
            "device=cpu",
            "dry_run=true",
            f"output_root={swept}/elsewhere",
            *FAST,
        ],
        cwd=swept,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "estimate basis: defaults: no recorded trial of this case and workload here" in fresh.stdout, fresh.stdout


def test_the_report_of_a_real_sweep_explains_its_pick(swept: Path) -> None:
    folder = sweep_dir(swept, "first")
    # the command the sweep's summary ends with
    (line,) = [ln for ln in (swept / "console.txt").read_text().splitlines() if ln.startswith("plots, report.md: ")]
    printed = shlex.split(line.split(": ", 1)[1])
    assert printed == ["python", "-m", "ladder.report", str(folder)], line
    proc = subprocess.run([sys.executable, *printed[1:]], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    trials, (best,) = read_tsv(folder / "trials.tsv"), read_tsv(folder / "best_by_case.tsv")
    chart = charts.case_chart(build.read_tsv(folder / "trials.tsv"), "amp_pi_plus", [best])
    failed = {(r["variant"], int(r["num_envs"])) for r in trials if r["status"] != "ok"}
    cut = {(r["variant"], int(r["num_envs"])) for r in trials if r["status"] == "ok" and float(r.get("cut") or 0)}
    # a rung measured in two windows (a best measured again once a lower rung beat it) may have one cut and one whole
    whole = {(r["variant"], int(r["num_envs"])) for r in trials if r["status"] == "ok" and not float(r.get("cut") or 0)}
    assert ("default", 256) in failed
    marked = {(s.label.split()[0], int(x)) for s in chart.marks for x in s.x}
    assert marked == failed | cut  # every failed or cut trial is marked at its rung...
    plotted = {(s.label.split()[0], int(x)) for s in (*chart.util, *chart.sps) for x in s.x}
    assert not plotted & (failed | (cut - whole))  # ... and none is plotted as a figure: only whole windows are
    assert plotted == whole
    shown = {
        (s.label, x): (lo, y, hi, x in s.no_interval)
        for s in chart.sps
        for x, lo, y, hi in zip(s.x, s.lo, s.y, s.hi, strict=True)
    }
    windows: dict[tuple[str, int], list[dict[str, str]]] = {}
    for r in trials:  # a rung measured in several whole windows (a narrow win measured again): as the pick counts it
        if r["status"] == "ok" and not float(r.get("cut") or 0):
            windows.setdefault((r["variant"], int(r["num_envs"])), []).append(r)
    standing = [sorted(rs, key=lambda r: float(r["samples_per_s"] or 0))[(len(rs) - 1) // 2] for rs in windows.values()]
    for r in standing:  # each measured rate with its recorded interval, or hollow where the window had too few points
        lo, y, hi, hollow = shown[(r["variant"], float(r["num_envs"]))]
        assert y == float(r["samples_per_s"])
        if r["samples_per_s_hi"] == "inf":
            assert hollow and lo == y == hi
        else:
            assert not hollow and (lo, hi) == (float(r["samples_per_s_lo"]), float(r["samples_per_s_hi"]))
    assert chart.card_mem_mb == 614.0  # the emulated card's line
    assert chart.best_sps is not None and chart.best_sps.x == (float(best["num_envs"]),)
    report = (folder / "report.md").read_text()
    why = report.split("**Why this pick.** ")[1].splitlines()[0]
    assert why.startswith(f"{best['variant']} e{best['num_envs']}: "), why
    assert best["variant"] != "default" or "Above it: e256 failed (host_oom)" in why, why
    for png in [folder / "plots" / "amp_pi_plus.png", *(folder / "plots" / charts.trial_plot_name(r) for r in trials)]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real sweep of the proxy: e256 runs out of memory, e64 fits, the descent measures e48 (or cuts it short);
    hiutil is seeded at e64."""
    tmp = tmp_path_factory.mktemp("swept")
    proc = search(
        tmp,
        *FAST,
        *GATED,
        ONE,
        "profile=[default,hiutil]",
        "ladder.rungs=[256,64,48]",
        "sweep=first",
        "objective=samples_per_s",
    )
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    (tmp / "console.txt").write_text(out)
    return tmp
