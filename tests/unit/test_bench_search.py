"""The bench's verdict on a pick (`scripts/bench_search.py`): hand-made grids, every figure known."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import ModuleType

import pytest

from ladder.core.measure.tdist import t975
from ladder.core.records import Status
from tests.helpers import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The script, loaded as a module."""
    return load_script("bench_search")


def cell(bench: ModuleType, value: float | None, half: float = 0.0) -> object:
    if value is None:
        return bench.Cell(Status.OOM_OR_NCCL, 2.0, None, None, None, None, None)
    return bench.Cell(Status.OK, 30.0, value, value + half, value - half, 400.0, 8.0)  # an 8 s window in 30 s


def test_the_run_to_run_spread_is_pooled_over_configurations_run_more_than_once(bench: ModuleType) -> None:
    a, b, c = ("default", 64), ("default", 48), ("default", 256)
    tables = [
        {a: cell(bench, 90.0), b: cell(bench, 50.0), c: cell(bench, None)},
        {a: cell(bench, 110.0), b: cell(bench, 50.0), c: cell(bench, 300.0)},
    ]
    pool, spread = bench.pooled(tables)
    # a: residuals -0.1 and +0.1 of its mean 100; b: none; two degrees of freedom (one from each)
    assert spread == pytest.approx(math.sqrt((0.01 + 0.01) / 2))
    half = t975(2) * spread * 100.0 / math.sqrt(2)
    assert pool[a] == pytest.approx(bench.Pooled(100.0, 100.0 - half, 100.0 + half, 2))
    assert pool[c].runs == 1 and pool[c].hi - pool[c].lo == pytest.approx(2 * t975(2) * spread * 300.0)


def test_a_pick_is_the_same_within_the_interval_of_the_grids_best_over_every_run(bench: ModuleType) -> None:
    best, near, far, failing = ("default", 64), ("default", 48), ("default", 32), ("default", 128)
    runs = [(100.0, 97.0, 80.0), (104.0, 99.0, 79.0), (96.0, 101.0, 81.0)]
    tables = [
        {best: cell(bench, x), near: cell(bench, y), far: cell(bench, z), failing: cell(bench, None)}
        for x, y, z in runs
    ]
    tables[1][failing] = cell(bench, 500.0)  # fits under another card: no figure where it failed
    pool, _ = bench.pooled(tables)
    every = bench.with_every_run(tables[0], pool)
    assert bench.winner(every, list(every)) == best
    assert bench.same_pick(every, best, near)  # 99 on average, inside 100's interval
    assert not bench.same_pick(every, best, far)  # 80 on average
    assert not bench.same_pick(every, best, None) and bench.same_pick(every, None, None)


def test_the_grids_best_over_every_run_may_differ_from_its_one_pass(bench: ModuleType) -> None:
    high, low = ("default", 48), ("default", 40)
    runs = [(92.0, 99.0), (100.0, 94.0), (105.0, 95.0), (100.0, 92.0)]  # the first pass has the lower one 7.6% ahead
    tables = [{high: cell(bench, x), low: cell(bench, y)} for x, y in runs]
    assert bench.winner(tables[0], list(tables[0])) == low
    every = bench.with_every_run(tables[0], bench.pooled(tables)[0])
    assert bench.winner(every, list(every)) == high and bench.same_pick(every, high, high)


def test_one_window_is_judged_against_one_window(bench: ModuleType) -> None:
    best, other = ("default", 64), ("default", 48)
    table = {best: cell(bench, 100.0, half=5.0), other: cell(bench, 96.0)}
    assert bench.same_pick(table, best, other)
    table = {best: cell(bench, 100.0, half=3.0), other: cell(bench, 96.0)}
    assert not bench.same_pick(table, best, other)


def test_the_reports_end_each_variant_with_its_ratios(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """`summarize` and `report` on a hand-made grid of two caps (the bench's own trials aside): every cell of the
    walk there, and its last line per variant with `ratio_vs_strict` last."""
    s = bench.settings(8.0)
    fits = {256: None, 128: None, 64: 3000.0, 48: 2800.0, 40: 2700.0, 38: 2600.0, 36: 2500.0, 32: 2400.0}
    table = {
        (p.name, r): cell(bench, v and (v if p.name == "default" else v / 2))
        for p in s.profiles
        for r, v in fits.items()
    }
    ladder = bench.Ladder(70.0, ("default", 64), 6, [6.0, 5.0], [(5.0, 9.0, 8.0, 18.0)])
    caps = [0.5, 0.6]
    rows = {"ladder": [bench.summarize(s, cap, table, ladder) for cap in caps]}
    bench.report(caps, [table, table], rows, {"ladder": [ladder, ladder]})
    out = capsys.readouterr().out
    assert "cap 0.5 GB: grid" in out and "grid pick ('default', 64), ladder pick ('default', 64)" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("ladder: ratio_vs_oracle=") and "same_pick=2/2" in last
    assert last.endswith(f"ratio_vs_strict={140.0 / 60.0:.3f}")  # the winner alone: a 30 s cell at each cap
    # the floor at each cap: the winner's 30 s, the failing rung above (2 s), the rung below and hiutil's cheapest
    # fit, each a whole 30 s cell here (no window opening recorded)
    assert f"ratio_vs_floor={140.0 / 184.0:.3f} floor_vs_strict={184.0 / 60.0:.3f} seeded_vs_strict=" in last
    # at the seed, hiutil's launch is at the winner's rung (e64): the same 30 s cell here as its cheapest fit
    assert f"seeded_vs_strict={184.0 / 60.0:.3f} ratio_vs_strict=" in last


def test_the_strict_oracle_is_priced_at_one_window_where_the_grid_extended_its_cell(bench: ModuleType) -> None:
    """The strict oracle is the winner's one warm-up and one window: a grid cell whose window ran twice as long
    (extended once for a wide interval) counts without the extension; one that ran its window as set counts whole."""
    extended = bench.Cell(Status.OK, 50.0, 100.0, 104.0, 96.0, 400.0, 16.0)
    assert bench.one_window(extended, 8.0) == pytest.approx(42.0)
    assert bench.one_window(cell(bench, 100.0), 8.0) == 30.0
    assert bench.one_window(bench.Cell(Status.OK, 30.0, 100.0, 104.0, 96.0, 400.0, 7.9), 8.0) == 30.0


def test_the_floor_prices_the_winners_window_its_neighbours_and_one_launch_of_each_other_profile(
    bench: ModuleType,
) -> None:
    """The least a search could spend, from hand-made cells: the winner's one window, the failing rung above it
    (its whole run), the fitting rung below it and the other profile's cheapest fit (each to its window's opening),
    nothing for rungs a search need not launch; with no winner, the bottom rung failing for each profile."""
    rungs, profiles = [128, 64, 48, 32], ["default", "hiutil"]

    def fit(duration: float, opens: float) -> object:
        return bench.Cell(Status.OK, duration, 100.0, 104.0, 96.0, 400.0, 8.0, opens)

    fail = bench.Cell(Status.OOM_OR_NCCL, 3.0, None, None, None, None, None)
    table = {
        ("default", 128): fail,
        ("default", 64): fit(30.0, 12.0),
        ("default", 48): fit(29.0, 11.0),
        ("default", 32): fit(28.0, 10.0),
        ("hiutil", 128): fail,
        ("hiutil", 64): fail,
        ("hiutil", 48): fit(40.0, 20.0),
        ("hiutil", 32): fit(35.0, 16.0),
    }
    assert bench.floor(rungs, profiles, table, ("default", 64), 8.0) == pytest.approx(30.0 + 3.0 + 11.0 + 16.0)
    # the top rung as the pick: no rung above it to prove
    table[("default", 128)] = fit(31.0, 13.0)
    assert bench.floor(rungs, profiles, table, ("default", 128), 8.0) == pytest.approx(31.0 + 12.0 + 16.0)
    none = {(p, r): fail for p in profiles for r in rungs}
    assert bench.floor(rungs, profiles, none, None, 8.0) == pytest.approx(6.0)


def test_the_floor_at_the_seed_launches_each_other_profile_at_the_winners_rung_and_walks_it_down(
    bench: ModuleType,
) -> None:
    """Where ladder seeds a later profile: at the winner's rung, each failure whole on the way down, the first fit to
    its window's opening; not the profile's cheapest fit, which no search reaches without assuming across profiles."""
    rungs, profiles = [128, 64, 48, 32], ["default", "hiutil"]

    def fit(opens: float) -> object:
        return bench.Cell(Status.OK, opens + 20.0, 100.0, 104.0, 96.0, 400.0, 8.0, opens)

    fail = bench.Cell(Status.OOM_OR_NCCL, 3.0, None, None, None, None, None)
    table = {("default", 128): fail, ("default", 64): fit(12.0), ("default", 48): fit(11.0), ("default", 32): fit(10.0)}
    table |= {("hiutil", 128): fail, ("hiutil", 64): fail, ("hiutil", 48): fit(20.0), ("hiutil", 32): fit(9.0)}
    winner = 32.0 + 3.0 + 11.0  # its one window (opening 12 s + 20 s), the failing rung above, the rung below
    assert bench.floor(rungs, profiles, table, ("default", 64), 8.0) == pytest.approx(winner + 9.0)
    assert bench.floor(rungs, profiles, table, ("default", 64), 8.0, seeded=True) == pytest.approx(winner + 3.0 + 20.0)
    nowhere = table | {("hiutil", r): fail for r in rungs}  # hiutil fits nowhere: walked down to the bottom
    assert bench.floor(rungs, profiles, nowhere, ("default", 64), 8.0, seeded=True) == pytest.approx(winner + 9.0)


def test_a_losing_launch_is_priced_to_its_second_point_where_that_came_before_its_window_opened(
    bench: ModuleType, tmp_path: Path
) -> None:
    """The cut before the window fires at a trial's second progress point at the earliest (two first steps): a fit
    whose window opened later is priced there, one whose window opened sooner at its opening. The second point's
    time is read from the trial's progress file: its first point (`first_step_s`) and the time between them."""
    rows = [{"event": "start", "t": 100.0}, {"t": 104.0, "iter": 1}, {"t": 109.5, "iter": 2}, {"t": 115.0, "iter": 3}]
    (tmp_path / "progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert bench._early_point_s(tmp_path, 4.5) == pytest.approx(10.0)  # 4.5 s to the first point, 5.5 s after
    assert bench._early_point_s(tmp_path, None) is None
    assert bench._early_point_s(tmp_path / "absent", 4.5) is None
    late = bench.Cell(Status.OK, 40.0, 100.0, 104.0, 96.0, 400.0, 8.0, 16.0, 10.0)
    soon = bench.Cell(Status.OK, 40.0, 100.0, 104.0, 96.0, 400.0, 8.0, 6.0, 10.0)
    unknown = bench.Cell(Status.OK, 40.0, 100.0, 104.0, 96.0, 400.0, 8.0, 16.0)
    assert [bench._proof(c) for c in (late, soon, unknown)] == [10.0, 6.0, 16.0]


def test_a_trial_judged_on_its_first_steps_is_counted_apart_from_the_phases(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    # (first step, window start, window, duration): two measured in a window; one whose window starts at its first
    # step's start (2.0 s), before its first point (4.0 s): judged on its first steps, no warm-up to take
    bench._phases("ladder", [(4.0, 6.0, 8.0, 20.0), (5.0, 9.0, 10.0, 21.0), (4.0, 2.0, 3.0, 7.0)])
    line = capsys.readouterr().out
    assert "medians over 2" in line and "warm-up 3.0 s" in line and "window 9.0 s" in line, line
    assert "1 more judged on their first steps" in line and " -" not in line, line
    bench._phases("ladder", [(4.0, 2.0, 3.0, 7.0)])
    assert "none measured in a window; 1 more judged" in capsys.readouterr().out
