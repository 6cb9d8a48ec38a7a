"""The live view's picture and the plain lines, rendered to text."""

from __future__ import annotations

import io

from rich.console import Console

from ladder.monitor import Sample
from ladder.records import Phase, Reason, Status, TrialRecord
from ladder.trial import Tick
from ladder.view import LiveView, PlainView, make_view


def record(variant: str, rung: int, status: Status, util: float | None = None) -> TrialRecord:
    figures = {"max_mem0": 800.0, "max_mem1": 801.0} | ({"min_avg_util": util, "samples_per_s": 3900.0} if util else {})
    reason = Reason.NONE if status is Status.OK else Reason.HOST_OOM
    info = {"duration_s": "4.1"}
    return TrialRecord("amp_pi_plus", "amp", variant, rung, Phase.PROBE, status, reason, "", figures, info)


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
    assert "│ default │ oom/nccl │ running │  ·  │" in final
    assert "running default e128: window 50%, iter 9, 12 s   [0] 87% 809 MiB  [1] 85% 810 MiB" in final
    assert "on oom/nccl or timeout, a lower rung (from e64)" in " ".join(final.split())


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


def test_a_pipe_gets_the_plain_view() -> None:
    assert isinstance(make_view(Console(file=io.StringIO())), PlainView)
