"""Memory as the cap sees it: a trial under `workload.host_mem_limit_gb` (a real memory cgroup, a real kernel OOM
kill) gets the verdict and the figures of that cgroup, read before the cgroup is removed."""

from __future__ import annotations

import pytest

from ladder.core.measure.hostmem import as_capped
from ladder.core.records import Phase, Reason, Status, TrialRecord
from ladder.ui.view import trial_line


def record(source: str, **figures: float) -> TrialRecord:
    return TrialRecord("c", "amp", "default", 64, Phase.PROBE, Status.OK, Reason.NONE, "", figures, {"source": source})


def line(source: str, **figures: float) -> str:
    return trial_line(record(source, **figures))


@pytest.mark.parametrize(
    ("source", "figures", "shown"),
    [
        ("host", {"max_mem0": 810.0, "max_mem1": 811.0}, "pss=    810/811 MiB  samples"),
        ("nvml", {"max_mem0": 810.0}, "mem=        810 MiB  samples"),
        (
            "host",
            {"max_mem0": 810.0, "cap_used_mb": 499.0, "cap_mb": 614.0},
            "cap=499/614 MiB pss=        810 MiB  ",
        ),
        # one rank under a capped cgroup: its max_mem0 is the cgroup's peak, shown once, as the cap counts it
        (
            "host",
            as_capped({"max_mem0": 633.0, "cgroup_peak_mb": 500.2, "cgroup_limit_mb": 512.0}, "host"),
            "util=     - cgroup=500/512 MiB  samples/s=",
        ),
        # several ranks: each rank's PSS, and the cgroup's peak (their total) before them
        (
            "host",
            as_capped(
                {"max_mem0": 300.0, "max_mem1": 310.0, "cgroup_peak_mb": 700.2, "cgroup_limit_mb": 1024.0}, "host"
            ),
            "cgroup=700/1024 MiB pss=    300/310 MiB  ",
        ),
        # a cgroup peak without a cap is not shown
        ("host", {"max_mem0": 633.0, "cgroup_peak_mb": 500.2}, "pss=        633 MiB  samples"),
    ],
    ids=["pss", "gpu-mem", "emulated-card", "host-cap", "host-cap-ranks", "cgroup-without-cap"],
)
def test_the_console_line_names_its_memory_figure_and_shows_what_the_cap_limits(
    source: str, figures: dict, shown: str
) -> None:
    assert shown in line(source, **figures)


@pytest.mark.parametrize(
    ("figures", "shown"),
    [
        ({"samples_per_s": 3000.0}, "samples/s=   3000  ("),
        ({"samples_per_s": 3000.0, "repeats": 2.0}, "samples/s=   3000 window 2  ("),
        ({"samples_per_s": 2600.0, "repeats": 2.0, "unstable": 1.0, "cut": 1.0}, "=2600 (cut) window 2 unstable  ("),
        ({"samples_per_s": 2600.0, "cut": 1.0, "short": 1.0}, "=2600 (cut, short probe)  ("),
        ({"samples_per_s": 640.0, "cut": 1.0, "cut_open_step_s": 12.34}, "=640 (cut, a step open 12.3 s)  ("),
    ],
    ids=["one-window", "second", "second-cut-unstable", "short-probe", "cut-on-an-open-step"],
)
def test_the_console_line_says_which_window_of_a_configuration_launched_again_it_is(figures: dict, shown: str) -> None:
    assert shown in line("host", **figures)


def test_the_best_line_says_its_figure_is_the_median_of_its_windows() -> None:
    pooled = trial_line(record("host", samples_per_s=3000.0, repeats=2.0), pooled=True)
    assert "samples/s=   3000 median of 2 windows  (" in pooled
    aside = trial_line(record("host", samples_per_s=3000.0, repeats=2.0, wide_windows=1.0), pooled=True)
    assert "samples/s=   3000 1 of 2 windows (1 wide set aside)  (" in aside


@pytest.mark.parametrize(
    ("source", "figures", "recorded"),
    [
        (
            "host",
            {"max_mem0": 2473.0, "cgroup_peak_mb": 1742.4, "cgroup_limit_mb": 2560.0},
            {"max_mem0": 1742, "pss_max0": 2473.0},
        ),
        ("host", {"max_mem0": 300.0, "max_mem1": 310.0, "cgroup_peak_mb": 700.2, "cgroup_limit_mb": 1024.0}, {}),
        ("host", {"max_mem0": 633.0, "cgroup_peak_mb": 500.2}, {}),
        ("nvml", {"max_mem0": 11840.0, "cgroup_peak_mb": 500.2, "cgroup_limit_mb": 512.0}, {}),
    ],
    ids=["one-rank-capped", "ranks-capped", "no-cap", "gpu"],
)
def test_a_one_rank_trials_memory_under_a_capped_cgroup_is_the_cgroups_peak(
    source: str, figures: dict, recorded: dict
) -> None:
    """The cap counts the cgroup's charge (pages shared between the trial's processes once): where one rank is the
    whole trial, that is its max_mem0, its sampled figure kept beside it; elsewhere the figures stay as sampled."""
    assert as_capped(figures, source) == figures | recorded
