"""The live view's picture and the plain lines, rendered to text."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from ladder.core import walk
from ladder.core.measure.window import Window
from ladder.core.records import Phase, Reason, Sample, Status, TrialRecord
from ladder.core.stop import Course, Stage, Terms
from ladder.runner.trial import Tick, _waiting
from ladder.settings.config import MeasureConf
from ladder.ui.view import LiveView, PlainView, found_line, make_view
from ladder.ui.view import _attempts as attempts_of
from ladder.ui.view import _next_line as next_line
from tests.unit.test_stats import points


def record(
    profile: str,
    rung: int,
    status: Status,
    util: float | None = None,
    sps: float = 3900.0,
    reason: Reason | None = None,
) -> TrialRecord:
    figures = {"max_mem0": 800.0, "max_mem1": 801.0} | ({"min_avg_util": util, "samples_per_s": sps} if util else {})
    reason = reason or (Reason.NONE if status is Status.OK else Reason.HOST_OOM)
    info = {"duration_s": "4.1"}
    return TrialRecord("amp_pi_plus", "amp", profile, rung, Phase.PROBE, status, reason, "", figures, info)


def console() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)


def test_live_view_draws_the_ladder_the_running_trial_and_what_comes_next() -> None:
    view = LiveView(console())
    view.sweep_started("banner", "amp_pi_plus", [256, 128, 64], ["default", "hiutil"])
    view.trial_finished(record("default", 256, Status.OOM_OR_NCCL))
    view.trial_started("default", 128)
    view.tick(Tick(12.0, "window", 9, 0.5, (Sample(1.0, 0, 87.0, 809.0), Sample(1.0, 1, 85.0, 810.0))))
    view.close()
    text = view.console.file.getvalue()  # type: ignore[attr-defined]
    assert "amp_pi_plus    default  e256   oom_or_nccl  host_oom" in text  # the finished trial's line
    final = text.split("amp_pi_plus: the ladder so far")[-1]
    flat = " ".join(final.split())
    assert "┃ num_envs ┃ default ┃ hiutil ┃" in flat  # a rung a row, a profile a column
    assert "│ e256 │ oom/nccl │ · │ │ e128 │ running │ · │ │ e64 │ · │ · │" in flat, final
    assert "running default e128: window 50%, iter 9, 12 s   [0] 87% 809 MiB  [1] 85% 810 MiB" in final
    assert "on oom/nccl or timeout, default e64 (the highest rung left)" in " ".join(final.split())


def test_plain_view_prints_one_line_per_trial_and_nothing_per_tick() -> None:
    view = PlainView(console())
    view.sweep_started("banner line", "amp_pi_plus", [64], ["default"])
    view.trial_started("default", 64)
    view.tick(Tick(1.0, "warm-up", 1, 0.0, ()))
    view.trial_finished(record("default", 64, Status.OK, util=87.5))
    lines = view.console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "banner line"
    assert lines[1].startswith("amp_pi_plus    default  e64    ok") and "util=  87.5" in lines[1]
    assert len(lines) == 2


def test_a_resumed_sweep_prints_the_trials_it_found_as_rows_under_one_line_saying_what_happens_to_them() -> None:
    view = PlainView(console())
    view.sweep_started("banner line", "amp_pi_plus", [256, 64], ["default"])
    view.found([record("default", 256, Status.OOM_OR_NCCL), record("default", 64, Status.INTERRUPTED)])
    view.trial_started("default", 64)
    view.trial_finished(record("default", 64, Status.OK, util=87.5))
    lines = view.console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[1] == (
        "found in sweep storage: 2 trial(s) this sweep recorded before (1 finished, not run again; 1 interrupted, "
        "to run again)"
    )
    assert lines[2].startswith("amp_pi_plus    default  e256   oom_or_nccl")
    assert lines[3].startswith("amp_pi_plus    default  e64    interrupted")
    assert lines[4].startswith("amp_pi_plus    default  e64    ok") and len(lines) == 5


def test_an_interrupted_trial_whose_rung_finished_since_is_not_to_run_again() -> None:
    """The second resume of a sweep whose e64 was interrupted, then run again by the first resume: e64 has its
    answer; the interrupted launch is history. A launch interrupted after its rung's answer (a second launch of
    it) and one of a rung never answered still run again."""
    numbered = [
        (0, record("default", 64, Status.INTERRUPTED)),
        (1, record("default", 64, Status.OK)),
        (2, record("hiutil", 64, Status.OK)),
        (3, record("hiutil", 64, Status.INTERRUPTED)),
        (4, record("hiutil", 32, Status.INTERRUPTED)),
    ]
    found = [replace(r, number=n) for n, r in numbered]
    assert found_line(found) == (
        "found in sweep storage: 5 trial(s) this sweep recorded before (2 finished, not run again; 2 interrupted, "
        "to run again; 1 interrupted before, run again since)"
    )


def test_the_live_board_of_a_resumed_sweep_holds_what_it_found_and_asks_the_walk_from_there() -> None:
    view = LiveView(console())
    view.sweep_started("banner", "amp_pi_plus", [256, 128, 64], ["default", "hiutil"])
    view.found([record("default", 256, Status.OOM_OR_NCCL), record("default", 128, Status.OK, util=40.0)])
    view.trial_started("hiutil", 128)  # seeded at default's fit, which this process did not run
    view.close()
    text = view.console.file.getvalue()  # type: ignore[attr-defined]
    assert "found in sweep storage: 2 trial(s) this sweep recorded before (2 finished, not run again)" in text
    final = text.split("amp_pi_plus: the ladder so far")[-1]
    assert "│ e256 │ oom/nccl │ · │ │ e128 │ * ok util 40% │ running │ │ e64 │ not run │ · │" in " ".join(final.split())
    assert "* the pick so far; default not run: it fits at e128, the rest below need no launch" in final
    assert "next: on ok, hiutil e256 (just above the largest rung that fits)" in " ".join(final.split())


def test_a_window_whose_time_is_up_says_what_it_still_waits_for() -> None:
    """'window 100%' stood for tens of seconds while the window lacked points or was held for a fit."""
    view = LiveView(console())
    view.sweep_started("banner", "amp_pi_plus", [64], ["default"])
    view.trial_started("default", 64)
    view.tick(Tick(41.0, "window", 6, 1.0, (), waiting="3/5 points"))
    view.close()
    final = view.console.file.getvalue().split("the ladder so far")[-1]  # type: ignore[attr-defined]
    assert "running default e64: window 100% (3/5 points), iter 6, 41 s" in final
    held_open = Course(
        Terms(MeasureConf(), 0.0), Stage.HELD, window=Window(103.5, 104.0, True), unsettled="no update yet"
    )
    waiting = _waiting(held_open, points([1.0] * 6), 5)
    assert waiting == "3/5 points"  # points at 104, 105, 106: under five
    assert _waiting(held_open, points([1.0] * 9), 5) == "held for a fit: no update yet"


def test_a_pipe_gets_the_plain_view() -> None:
    assert isinstance(make_view(Console(file=io.StringIO())), PlainView)


def final_picture(view: LiveView) -> str:
    """The last redraw, one space between words (rich wraps long lines at the console's width)."""
    text = view.console.file.getvalue()  # type: ignore[attr-defined]
    return " ".join(text.split("the ladder so far")[-1].split())


def seeded(objective: str = "min_avg_util") -> LiveView:
    """default walked down to e64, which fits; hiutil starts at that seed."""
    view = LiveView(console())
    view.sweep_started(
        "banner", "amp_pi_plus", [256, 128, 64, 48], ["default", "hiutil"], "num_envs", walk.Tuning(), objective
    )
    for rung, status, util in ((256, Status.OOM_OR_NCCL, None), (128, Status.OOM_OR_NCCL, None), (64, Status.OK, 38.0)):
        view.trial_started("default", rung)
        view.trial_finished(record("default", rung, status, util, sps=1600.0))
    return view


def test_the_next_line_of_a_seeded_profile_is_what_the_walk_runs_next() -> None:
    view = seeded()
    view.trial_started("hiutil", 64)
    view.close()
    text = final_picture(view)
    # on ok the rung above the seed is still open (the walk ran hiutil e128 there, once said "hiutil is done")
    assert "next: on ok, hiutil e128 (just above the largest rung that fits);" in text, text
    assert "on oom/nccl or timeout, hiutil e48 (the highest rung left)" in text, text
    view = seeded()
    view.trial_started("hiutil", 64)
    view.trial_finished(record("hiutil", 64, Status.OK, 20.0, sps=390.0))
    view.trial_started("hiutil", 128)
    view.close()
    text = final_picture(view)
    assert "next: on ok, hiutil e256 (" in text and "on oom/nccl or timeout, the sweep ends" in text, text


def test_the_next_line_agrees_with_the_walk_at_every_step_of_a_scripted_sweep() -> None:
    """Each trial the walk starts is the one the line before it named for the outcome that came (with the descent
    below the largest fit: for a fit that beat the best so far, or one that did not)."""
    rungs, profiles = (256, 128, 64, 48, 32), ("default", "hiutil")
    tuning = walk.Tuning(descend=True, descent_gain_max=None, descent_idle_util=None)
    fits = {"default": 64, "hiutil": 128}  # the largest rung that fits each profile
    rate = {
        ("default", 64): 900.0,
        ("default", 48): 990.0,
        ("default", 32): 950.0,
        ("hiutil", 128): 400.0,
        ("hiutil", 64): 300.0,
        ("hiutil", 48): 250.0,
    }  # default's e48 beats its e64, e32 does not
    view = LiveView(console())
    view.sweep_started("banner", "c", rungs, profiles, "num_envs", tuning, "samples_per_s")
    said, launched, beat = [], [], []
    while (d := walk.next_trial(rungs, profiles, _attempts(view), tuning)) is not None:
        launched.append(f"{d.profile} e{d.rung}")
        view.trial_started(d.profile, d.rung)
        ok = d.rung <= fits[d.profile]
        line = " ".join(_next(view).split())
        said.append(line.split("; on oom/nccl or timeout, ")[0 if ok else 1].removeprefix("next: on ok, "))
        mine = [r for r in view.board.records if r.profile == d.profile and r.status is Status.OK]
        own = [r.figures["samples_per_s"] for r in mine]
        beat.append(ok and rate[(d.profile, d.rung)] > max(own, default=0.0))
        status = Status.OK if ok else Status.OOM_OR_NCCL
        view.trial_finished(record(d.profile, d.rung, status, 30.0 if ok else None, rate.get((d.profile, d.rung), 0)))
    view.close()
    assert launched == [
        "default e256",
        "default e128",
        "default e64",
        "default e48",
        "default e32",
        "hiutil e64",
        "hiutil e48",
        "hiutil e128",
        "hiutil e256",
    ], launched
    for line, then, won in zip(said, [*launched[1:], "the sweep ends"], beat, strict=True):
        if "'s best so far, else " in line:
            line = line.split(" if it beats ")[0] if won else line.split("'s best so far, else ")[1]
        assert line.removeprefix(line.split("; ")[0] + "; " if " is done; " in line else "").startswith(then), (
            line,
            then,
        )


def test_the_next_line_names_the_bottom_check_a_failure_without_memory_evidence_would_bring() -> None:
    """After a failure whose evidence names no memory, a second such failure sends the walk to the lowest rung
    (does num_envs matter at all?), an out-of-memory one to the rung below: the line names both, and the walk runs
    what it named for the failure that came."""
    rungs = [256, 128, 64, 32]
    for reason, then in ((Reason.NCCL_TIMEOUT, "default e32 (the lowest rung"), (Reason.CUDA_OOM, "default e64 (")):
        view = LiveView(console())
        view.sweep_started("banner", "c", rungs, ["default"])
        view.trial_finished(record("default", 256, Status.OOM_OR_NCCL, reason=Reason.NCCL_TIMEOUT))
        view.trial_started("default", 128)
        line = " ".join(_next(view).split())
        on_fail = line.split("; on oom/nccl or timeout, ")[1]
        memory, no_memory = on_fail.split(" if its evidence names memory, else ")
        assert memory.startswith("default e64 (the highest rung left)") and no_memory.startswith(
            "default e32 (the lowest rung"
        ), line
        view.trial_finished(record("default", 128, Status.OOM_OR_NCCL, reason=reason))
        decision = walk.next_trial(rungs, ("default",), _attempts(view), walk.Tuning())
        assert decision is not None and f"{decision.profile} e{decision.rung} ({decision.why}".startswith(then)
        view.close()


def _attempts(view: LiveView) -> list[walk.Attempt]:
    return attempts_of(view.board.records, view.board.objective)


def _next(view: LiveView) -> str:
    return next_line(view.board).plain


def test_cells_name_their_figure_and_say_why_a_rung_was_skipped() -> None:
    view = seeded()
    view.trial_started("hiutil", 64)
    view.trial_finished(record("hiutil", 64, Status.OK, 20.0, sps=390.0))
    view.trial_started("hiutil", 128)
    view.trial_finished(record("hiutil", 128, Status.OOM_OR_NCCL))
    view.close()
    text = final_picture(view)
    assert "│ e256 │ oom/nccl │ skipped (above the failure at 128 envs) │" in text, text
    assert "│ e128 │ oom/nccl │ oom/nccl │ │ e64 │ * ok util 38% │ ok util 20% │ │ e48 │ not run │ not run │" in text
    assert "default not run: it fits at e64, the rest below need no launch;" in text, text
    assert "skipped (above the failure at 128 envs)" in text  # hiutil e256: never launched, and why
    assert "skipped: hiutil e256: above the failure at 128 envs" in text
    assert "·" not in text  # every cell says what happened to its rung
    by_rate = seeded(objective="samples_per_s")
    by_rate.close()
    assert "ok 1600 samples/s" in final_picture(by_rate)


def test_at_80_columns_the_board_keeps_names_whole_and_each_trial_line_on_one_line() -> None:
    """The demo's eight rungs on an 80-column terminal: a profile's name is not cut (`defau…`), a walk's reason
    for its unrun rungs is said once under the table (not in each cell, where it wrapped the table tall), a
    reused trial is marked, and the plain line printed per trial is left whole for the terminal to wrap."""
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None))
    rungs = [256, 128, 64, 48, 40, 38, 36, 32]
    view.sweep_started("banner", "amp_pi_plus", rungs, ["default", "hiutil"])
    view.trial_finished(record("default", 256, Status.OOM_OR_NCCL))
    view.trial_finished(replace(record("default", 128, Status.OK, util=40.0), info={"reused_from": "old#3"}))
    view.close()
    text = view.console.file.getvalue()  # type: ignore[attr-defined]
    board = text.split("the ladder so far")[-1]
    rows = [line for line in board.splitlines() if line.startswith("│")]
    assert "┃ num_envs ┃ default ┃ hiutil ┃" in " ".join(board.split()), board
    assert "…" not in board and len(rows) == len(rungs), board  # a rung a line, not a cell's reason wrapped tall
    flat = " ".join(board.split())
    assert "(reused) run by an earlier sweep" in flat and "default not run: it fits at e128" in flat, board
    lines = [line for line in text.splitlines() if "amp_pi_plus    default  e256" in line]
    assert len(lines) == 1 and "util=" in lines[0] and "samples/s=" in lines[0], text
