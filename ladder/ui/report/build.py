"""Read a sweep folder, draw every chart, write report.md (and cards.tsv): the report's one effectful step."""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ladder.core.caseclass import DEFAULT
from ladder.core.paths import SweepPaths, TrialPaths
from ladder.storage import studies, sweeps
from ladder.ui.report import bench, cards, charts, draw, page
from ladder.ui.report.charts import Row, TrialFiles

log = logging.getLogger(__name__)

PLOTS = "plots"
BENCH_MD = "summary.md"  # a bench's summary, beside report.md
BENCH_PLOT = "bench.png"


def read_tsv(path: Path) -> list[Row]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def read_trial(trial_dir: Path) -> TrialFiles:
    """A trial folder's samples, progress lines and verdict; missing or broken files read as empty."""
    files = TrialPaths(trial_dir)
    samples = list(csv.DictReader(_text(files.samples).splitlines()))
    try:
        verdict = json.loads(_text(files.verdict) or "{}")
    except ValueError:
        verdict = {}
    return TrialFiles(samples, _text(files.progress).splitlines(), verdict, _mtime(files.cmd))


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


TRIAL_COLUMNS = ("case", "num_envs", "status", "phase", "number")  # trials.tsv's, which the report reads


def write_report(sweep_dir: Path) -> Path:
    """Every plot (under plots/) and report.md in `sweep_dir`; returns the report's path."""
    if sweep_dir.is_file():
        raise FileNotFoundError(f"{sweep_dir} is a file: give the sweep folder that holds it ({sweep_dir.parent})")
    if not sweep_dir.exists():
        raise FileNotFoundError(f"no such folder: {sweep_dir}")
    trials, best = read_tsv(sweep_dir / "trials.tsv"), read_tsv(sweep_dir / "best_by_case.tsv")
    if trials and (missing := [c for c in TRIAL_COLUMNS if c not in trials[0]]):
        raise FileNotFoundError(
            f"{sweep_dir / 'trials.tsv'} is not a trials.tsv ladder wrote: it has no {', '.join(missing)} column(s)"
        )
    if not trials and (held := sweeps.names(sweep_dir)):  # an output root: the sweeps are one level down
        last = sweeps.latest(sweep_dir) or held[-1]
        raise FileNotFoundError(
            f"{sweep_dir} holds sweeps ({len(held)}), not one sweep's trials: give one of its sweep folders, e.g. "
            f"python -m ladder.report {SweepPaths.of(sweep_dir, last).sweep_dir}"
        )
    if not trials:
        raise FileNotFoundError(f"no trials in {sweep_dir / 'trials.tsv'}: is this a sweep folder?")
    for case in sorted({r.get("case", "") for r in trials}):
        draw.draw_case(charts.case_chart(trials, case, best), sweep_dir / PLOTS / f"{case}.png")
    for row in trials:
        chart = charts.trial_chart(row, read_trial(sweep_dir / row.get("trial_dir", "")))
        draw.draw_trial(chart, sweep_dir / PLOTS / charts.trial_plot_name(row))
    out = sweep_dir / "report.md"
    name = (best or trials)[0].get("sweep") or sweep_dir.name
    table, charted = cards.write_cards(sweep_dir)  # cards.tsv and the memory charts (an older sweep's too)
    section = "\n".join(cards.cards_md(table, charted))
    out.write_text(page.summary_md(name, best, trials) + (f"\n{section}\n" if section else ""))
    if bench.is_bench(best):
        write_bench(sweep_dir, name, best, trials)
    log.info("report: %s (%d case and %d trial plots)", out, len({r.get("case") for r in trials}), len(trials))
    return out


def write_bench(sweep_dir: Path, sweep: str, best: Sequence[Row], trials: Sequence[Row]) -> Path:
    """A bench's summary.md (the cases by class, method averages, the decision table) and its chart."""
    grid = grid_launches(sweep_dir, sweep, trials)
    chart = sweep_dir / PLOTS / BENCH_PLOT
    draw.draw_bench(bench.points(best), DEFAULT.low_mem_frac, DEFAULT.vram_frac, chart)
    out = sweep_dir / BENCH_MD
    out.write_text(bench.summary_md(sweep, best, trials, grid) + f"\n![the bench]({PLOTS}/{BENCH_PLOT})\n")
    log.info("bench summary: %s", out)
    return out


def grid_launches(sweep_dir: Path, sweep: str, trials: Sequence[Row]) -> int | None:
    """Every rung of every profile of every case, as the sweep recorded its ladders; None where none is recorded."""
    if not SweepPaths(sweep, sweep_dir).journal.is_file():  # a server's storage, or none: no grid then
        return None
    recorded = studies.sweep_settings(studies.open_storage_at(str(sweep_dir)), sweep)
    total = 0
    for case in sorted({r.get("case", "") for r in trials}):
        rungs = recorded.get(case, {}).get("ladder.rungs") or ()
        profiles = {r.get("variant") for r in trials if r.get("case") == case}
        if not rungs:
            return None
        total += len(rungs) * len(profiles)
    return total


def main(argv: Sequence[str] | None = None) -> int:
    about = "PNG plots and a one-page report.md next to a sweep's TSVs"
    parser = argparse.ArgumentParser(prog="python -m ladder.report", description=about)
    parser.add_argument("sweep_dir", type=Path, help="a sweep folder, e.g. output/train/case_gpu_bench_<sweep>")
    args = parser.parse_args(argv)
    try:
        print(write_report(args.sweep_dir))
    except ModuleNotFoundError as exc:
        if exc.name != "matplotlib":
            raise
        print('ladder.report: the plots need matplotlib: pip install -e ".[report]"', file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"ladder.report: {exc}", file=sys.stderr)
        return 2
    return 0
