"""The window rule and the figures, on recorded series."""

from __future__ import annotations

import math

import pytest

from ladder.core.measure import usage
from ladder.core.measure.bounds import SHORT_Z, final_upper, open_step_upper, rate_top, rate_upper
from ladder.core.measure.cadence import cycle_pause_s, even_s
from ladder.core.measure.noise import CUT_Z, POOL_WEIGHT_DF, Noise, carried_df, pooled_noise, step_noise
from ladder.core.measure.peak import near_cap, outlived_peak
from ladder.core.measure.rates import Rate, ratio_interval
from ladder.core.measure.repeats import repeat_verdict
from ladder.core.measure.steps import step_times
from ladder.core.measure.tdist import EXACT_T_DF, t975, t_quantile
from ladder.core.measure.usage import busy, figures, source_of
from ladder.core.measure.window import (
    Rule,
    Window,
    close_window,
    open_window,
    stable_since,
    stable_start,
    window_closed,
)
from ladder.core.records import Point, Sample, Source
from ladder.workloads.progress import parse_line

RULE = (3, 3, 0.2)


def points(step_times: list[float], t0: float = 100.0, per_iter: float = 640.0) -> list[Point]:
    out, t = [], t0
    for i, step in enumerate(step_times, start=1):
        t += step
        out.append(Point(t=t, iter=i, samples=per_iter * i, step_time_s=step))
    return out


def test_window_waits_for_warmup_and_a_stable_step_time() -> None:
    pts = points([3.0, 1.5, 1.0, 0.65, 0.5, 0.5, 0.5, 0.5])
    assert stable_start(pts, *RULE) == pts[6].t  # iters 5-7 agree within 20%; earlier ones do not
    assert stable_start(pts[:6], *RULE) is None


def test_window_opens_ungated_at_the_timeout_counted_from_the_first_progress() -> None:
    pts = points([1.0, 3.0, 1.0, 3.0, 1.0, 3.0])  # t = 101, 104, ..., 112: never steady
    assert open_window(pts, now=130.0, window_s=10, rule=RULE, timeout_s=30) is None  # 29 s after the first point
    window = open_window(pts, now=131.0, window_s=10, rule=RULE, timeout_s=30)
    assert window == Window(131.0, 141.0, gated=False)


def test_no_window_opens_before_the_trainers_first_progress_and_its_warm_up_points() -> None:
    """A trainer that prints its first line 39 s after its launch, under a 30 s warm-up limit: the limit counts from
    that line, and the window waits for the warm-up points too (`warmup_iters` of them)."""
    assert open_window([], now=1e9, window_s=10, rule=RULE, timeout_s=30) is None
    late = points([39.0, 3.0], t0=0.0)  # launched at 0: lines at 39 and 42
    assert open_window(late, now=60.0, window_s=10, rule=RULE, timeout_s=30) is None  # 60 s after launch
    assert open_window(late, now=70.0, window_s=10, rule=RULE, timeout_s=30) is None  # 2 points of warmup_iters 3
    enough = points([39.0, 3.0, 1.0, 3.0, 1.0, 3.0], t0=0.0)
    assert open_window(enough, now=69.0, window_s=10, rule=RULE, timeout_s=30) == Window(69.0, 79.0, gated=False)


def test_window_closes_when_progress_passes_its_end() -> None:
    pts = points([0.5] * 10)
    window = Window(pts[2].t, pts[2].t + 2.0, gated=True)
    assert not window_closed(window, pts[:6])
    assert window_closed(window, pts[:7])


def test_a_window_closes_only_with_enough_points_and_counts_the_one_that_closed_it() -> None:
    """A trainer reporting every 5 s against a 2 s window: the first point past the end is not enough; the window
    goes on until it holds `min_points`, and then ends at (and counts) the point that closed it."""
    pts = points([5.0] * 6)  # t = 105, 110, ..., 130
    window = Window(pts[0].t, pts[0].t + 2.0, gated=True)
    assert close_window(window, pts[:2], min_points=4) is None  # past its end, but 2 points
    closed = close_window(window, pts[:4], min_points=4)
    assert closed == Window(pts[0].t, pts[3].t, gated=True)
    f = figures([], pts[:4], closed, launch_t=100.0)
    assert f["n_iters"] == 3 and f["samples_per_s"] == pytest.approx(640.0 / 5.0)


def test_a_rate_interval_is_never_below_zero() -> None:
    """Three wildly different steps: the t-interval's lower end is negative; a rate's is clipped at zero."""
    pts = [Point(100.0, 1, 0.0), Point(101.0, 2, 5000.0), Point(111.0, 3, 5100.0), Point(111.5, 4, 9000.0)]
    rate, lo, _ = ratio_interval([5000.0, 100.0, 3900.0], [1.0, 10.0, 0.5])
    assert lo < 0 < rate
    f = figures([], pts, Window(100.0, 111.5, gated=True), launch_t=100.0)
    assert f["samples_per_s_lo"] == 0.0 < f["samples_per_s"] < f["samples_per_s_hi"]


def test_a_printed_rate_stands_for_samples_per_s_where_no_count_is_printed() -> None:
    pts = [Point(100.0 + i, i, 0.0, sps=s) for i, s in enumerate([900.0, 1000.0, 1100.0, 1000.0], start=1)]
    f = figures([], pts, Window(101.0, 104.0, gated=True), launch_t=100.0)
    assert f["rate_reported"] == 1.0 and f["samples_per_s"] == 1000.0
    assert 0 < f["samples_per_s_lo"] < 1000.0 < f["samples_per_s_hi"]
    counted = figures([], points([1.0] * 4), Window(101.0, 104.0, gated=True), launch_t=100.0)
    assert counted["rate_reported"] == 0.0


@pytest.mark.parametrize(
    ("utils", "mems", "expected"),
    [
        ([0.5] * 8, [800.0] * 8, False),
        ([0.0, 0.0, 60.0, 80.0, 0.0, 0.0, 0.0, 0.0], [800.0] * 8, True),
        ([0.5] * 8, [800.0, 820.0, 900.0, 1000.0, 1200.0, 1300.0, 1400.0, 1500.0], True),
    ],
    ids=["idle", "cpu-busy", "memory-growing"],
)
def test_busy_is_util_or_growing_memory(utils: list[float], mems: list[float], expected: bool) -> None:
    samples = [Sample(100.0 + i, 0, u, m, Source.HOST) for i, (u, m) in enumerate(zip(utils, mems, strict=True))]
    assert busy(samples, since_t=100.0) is expected
    assert busy(samples, since_t=200.0) is False  # nothing sampled since


def test_busy_host_cpu_beside_an_idle_gpu() -> None:
    """On a GPU machine a first update may be CPU work (env creation): the host samples alone say it works."""
    gpu = [Sample(100.0 + i, 0, 0.0, 500.0, Source.NVML) for i in range(6)]
    host = [Sample(100.0 + i, 0, 8.0, 900.0, Source.HOST) for i in range(6)]
    assert busy(gpu + host, since_t=100.0) and not busy(gpu, since_t=100.0)


def test_figures_over_the_window_only() -> None:
    pts = points([1.0] * 10)  # t = 101..110, 640 samples per iteration
    window = Window(104.0, 108.0, gated=True)
    samples = [
        Sample(float(t), i, util=(90.0 if 104 <= t <= 108 else 0.0) - 20 * i, mem_mb=500.0 + t)
        for t in range(100, 111)
        for i in (0, 1)
    ]
    f = figures(samples, pts, window, launch_t=100.0)
    assert f["avg_util0"] == 90.0 and f["avg_util1"] == 70.0 and f["min_avg_util"] == 70.0
    assert f["p50_util"] == 80.0 and f["n_samples"] == 5.0
    assert f["max_mem0"] == 610 and f["max_mem1"] == 610  # peak over the whole trial, not only the window
    assert f["samples_per_s"] == pytest.approx(640.0) and f["window_start_s"] == 4.0 and f["gated"] == 1.0
    assert f["first_step_s"] == 1.0  # launch to the first progress point


def test_failed_trial_has_memory_but_no_rate() -> None:
    samples = [Sample(1.0, 0, 12.0, 300.0), Sample(1.1, 0, 14.0, 900.0)]
    f = figures(samples, [], None, launch_t=0.0)
    assert f["max_mem0"] == 900 and "samples_per_s" not in f and f["min_avg_util"] == 13.0
    assert "first_step_s" not in f  # it never reached a step


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"t": 1.5, "iter": 2, "samples": 128, "step_time_s": 0.5, "peak_mem_mb": [1, 2]}',
            Point(1.5, 2, 128.0, 0.5, (1.0, 2.0)),
        ),
        ('{"t": 1.5, "iter": 2, "iter_time": 0.7}', Point(1.5, 2, 0.0, 0.7)),
        ('{"event": "start", "t": 1.0}', None),
        ("not json", None),
        ('{"t": 1.5, "iter": 3, "samp', None),
    ],
    ids=["proxy", "metrics-jsonl", "start-event", "garbage", "partial"],
)
def test_parse_line(line: str, expected: Point | None) -> None:
    assert parse_line(line) == expected


# ---------------------------------------------------------------- data times, seconds, intervals, repeats


def with_data(step_times: list[float], data_times: list[float | None]) -> list[Point]:
    return [
        Point(p.t, p.iter, p.samples, p.step_time_s, (), d) for p, d in zip(points(step_times), data_times, strict=True)
    ]


@pytest.mark.parametrize(
    ("data_times", "rule", "opens_at"),
    [
        ([0.0012, 0.0015, 0.0011, 0.0018, 0.0012, 0.0014], RULE, 2),  # exp076 run1: ms-level, steady
        ([0.0011, 2.4, 0.0012, 6.57, 0.9, 0.0011], RULE, None),  # exp076 run2: seconds of jitter
        ([0.05, 0.05, 0.05, 0.05, 0.05, 0.05], Rule(3, 3, 0.2, 0.02), None),  # steady, but over the seed's 0.02 s
        ([None] * 6, Rule(3, 3, 0.2, 0.02), 2),  # no data times reported: the step time decides
    ],
    ids=["steady-ms", "second-stalls", "over-the-bound", "not-reported"],
)
def test_data_times_gate_the_window(data_times: list[float | None], rule: Rule, opens_at: int | None) -> None:
    pts = with_data([1.0] * 6, data_times)
    assert stable_start(pts, *rule) == (None if opens_at is None else pts[opens_at].t)


def test_step_times_come_from_the_points_when_not_reported() -> None:
    pts = [Point(10.0, 10, 0.0), Point(20.0, 20, 0.0), Point(20.0, 30, 0.0), Point(26.0, 33, 0.0, 2.5)]
    assert step_times(pts) == [None, 1.0, None, 2.5]


def seconds_of(utils_per_second: list[tuple[float, float]], hz: int = 10) -> list[Sample]:
    """Two GPUs sampled at hz for as many seconds as given, each second at the given util."""
    return [
        Sample(1000.0 + s + k / hz, i, u, 1000.0)
        for s, pair in enumerate(utils_per_second)
        for k in range(hz)
        for i, u in enumerate(pair)
    ]


def test_active_and_idle_seconds_as_seed_003_counts_them() -> None:
    # exp078 probe1: GPU0 busy at ~20% for 31 s then idle; GPU1 at ~95% the same 31 s
    series = seconds_of([(18.0, 95.2)] * 31 + [(0.0, 0.0)] * 29)
    f = figures(series, [], Window(1000.0, 1060.0, gated=True), launch_t=990.0)
    assert (f["active_s"], f["idle_s"]) == (31.0, 29.0)
    assert f["avg_active_util"] == pytest.approx(56.6)  # the seed's both_avg_active
    assert f["avg_util0"] == pytest.approx(18.0 * 31 / 60, abs=0.01) and f["n_samples"] == 600
    assert f["p50_util"] == pytest.approx(56.6)


def test_proc_memory_sm_util_and_the_host_alongside() -> None:
    nvml = [
        Sample(float(t), 0, 90.0, 20000.0 + t, Source.NVML, 15000.0 + t if t % 2 else None, 40.0 if t % 2 else None)
        for t in range(10)
    ]
    host = [Sample(float(t), r, 100.0 + 10 * r, 3000.0 + t, Source.HOST) for t in range(0, 10, 3) for r in (0, 1)]
    f = figures(nvml + host, [], None, 0.0)
    assert (f["max_mem0"], f["proc_mem_max0"], f["avg_sm_util0"]) == (20009, 15009, 40.0)
    assert (f["host_cpu_avg0"], f["host_cpu_avg1"], f["host_rss_max1"]) == (100.0, 110.0, 3009)
    assert f["min_avg_util"] == 90.0  # the host series does not enter the GPU figures
    assert source_of(nvml + host) == "nvml" and source_of(host) == "host" and source_of([]) == ""


def test_samples_per_s_interval() -> None:
    steady = points([0.5] * 20)
    f = figures([], steady, Window(steady[4].t, steady[4].t + 5.0, gated=True), launch_t=100.0)
    assert f["samples_per_s"] == f["samples_per_s_lo"] == f["samples_per_s_hi"] == 1280.0
    noisy = points([0.4, 0.6] * 20)
    g = figures([], noisy, Window(noisy[4].t, noisy[4].t + 10.0, gated=True), launch_t=100.0)
    assert g["samples_per_s_lo"] < g["samples_per_s"] < g["samples_per_s_hi"]
    assert g["samples_per_s"] == pytest.approx(1280.0, rel=0.02)
    assert g["samples_per_s_hi"] - g["samples_per_s_lo"] < 0.2 * g["samples_per_s"]


def test_ratio_interval_matches_student_t() -> None:
    rate, lo, hi = ratio_interval([10.0, 14.0, 12.0], [1.0, 1.0, 1.0])  # per-interval rates 10, 14, 12
    assert (rate, hi - rate) == (12.0, pytest.approx(4.303 * 2.0 / 3**0.5))
    assert ratio_interval([5.0], [1.0])[1:] == (float("-inf"), float("inf"))
    assert t975(30) == pytest.approx(2.042, abs=0.001) and t975(200) == pytest.approx(1.972, abs=0.001)


@pytest.mark.parametrize(
    ("rates", "stable", "why"),
    [
        ([Rate(1000, 990, 1010), Rate(1020, 1010, 1030)], True, ""),
        ([Rate(1000, 990, 1010), Rate(1080, 1070, 1090)], False, "repeats differ by 7.7% (over 5%)"),
        ([Rate(1000, 900, 1100)], False, "95% interval 20.0% of samples/s (over 10%)"),
        ([Rate(1000, 900, 1100), Rate(1010, 990, 1030)], True, ""),  # pooled: 3.9% wide
        ([Rate(1000, 850, 1150), Rate(1020, 870, 1170)], False, "95% interval 21.0% of samples/s (over 10%)"),
        ([Rate(1000, -math.inf, math.inf)], False, "95% interval inf% of samples/s (over 10%)"),
        ([], False, "no repeat measured a rate"),
        ([Rate(700, 600, 800, wide=True), Rate(1000, 990, 1010)], True, ""),  # a whole wide window set aside
        (
            [Rate(700, 600, 800, wide=True), Rate(1000, 850, 1150, wide=True)],
            False,
            "95% interval 21.0% of samples/s (over 10%); repeats differ by 35.3% (over 5%)",
        ),
    ],
    ids=[
        "agree",
        "disagree",
        "wide-interval",
        "wide-then-narrow",
        "both-wide",
        "no-interval",
        "none",
        "slow-stretch-set-aside",
        "every-window-wide",
    ],
)
def test_repeat_verdict(rates: list[Rate], stable: bool, why: str) -> None:
    verdict = repeat_verdict(rates)
    assert (verdict.stable, verdict.why) == (stable, why)
    assert verdict.figures()["unstable"] == (0.0 if stable else 1.0)


def test_rate_from_figures() -> None:
    assert Rate.of({"samples_per_s": 5.0, "samples_per_s_lo": 4.0, "samples_per_s_hi": 6.0}) == Rate(5.0, 4.0, 6.0)
    whole_wide = {"samples_per_s": 5.0, "samples_per_s_lo": 4.0, "samples_per_s_hi": 6.0, "window_unstable": 1.0}
    assert Rate.of(whole_wide) == Rate(5.0, 4.0, 6.0, wide=True)
    assert Rate.of(whole_wide | {"cut": 1.0}) == Rate(5.0, 4.0, 6.0)  # a cut window is evidence however wide
    assert Rate.of({"min_avg_util": 50.0}) is None


# ---------------------------------------------------------------- a fit outlives its memory peak


def mem(ts_mb: list[tuple[float, float]], index: int = 0) -> list[Sample]:
    return [Sample(t, index, 50.0, mb, Source.HOST) for t, mb in ts_mb]


def bursts(rollout: int, step_s: float, pause_s: float, n: int, t0: float = 100.0) -> list[Point]:
    """`n` rollouts of `rollout` lines `step_s` apart, each followed by a silent update of `pause_s`."""
    out, t, i = [], t0, 0
    for _ in range(n):
        for _ in range(rollout):
            t, i = t + step_s, i + 1
            out.append(Point(t=t, iter=i, samples=64.0 * i))
        t += pause_s
    return out


def test_bursts_are_told_apart_from_an_even_cadence() -> None:
    assert cycle_pause_s(points([1.0] * 10)) is None  # one point an iteration
    assert cycle_pause_s(bursts(20, 0.02, 2.0, 3)) == pytest.approx(2.02)  # a rollout's lines, then the update
    assert cycle_pause_s(bursts(20, 0.02, 2.0, 2)) is None  # one pause seen: no cadence until it recurs
    assert cycle_pause_s(points([0.1, 0.1, 0.1, 0.3])) is None  # a slower line is no pause (under 0.5 s)
    # a first update longer than the rest (compiling, first allocations): the cadence is the pause that recurs
    first_long = bursts(20, 0.02, 5.0, 1) + bursts(20, 0.02, 1.0, 3, t0=105.42)
    assert cycle_pause_s(first_long) == pytest.approx(1.02)


def test_a_stall_mid_rollout_is_not_taken_for_the_update() -> None:
    """A loaded machine stalls the trainer for a second inside its first rollout: one pause, not a cadence. The
    window that holds it stands for no fit, whatever its length, until the trainer has printed evenly for three
    windows after it or a pause has recurred (its update has come)."""
    stalled = points([0.02] * 20 + [1.0] + [0.02] * 20)  # 100.02..100.4, a 1 s stall, 101.42..101.82
    assert cycle_pause_s(stalled) is None
    window = Window(100.3, 101.82, gated=True)  # held the stall
    assert "cadence is unknown" in outlived_peak([], stalled, window, window_s=0.3, per_iteration=False)
    # before, the stall was taken for the update and the window that held it for a fit
    assert even_s(stalled) == pytest.approx(0.4)
    updated = stalled + bursts(1, 0.6, 0.0, 1, t0=stalled[-1].t) + bursts(40, 0.02, 0.0, 1, t0=stalled[-1].t + 0.6)
    assert cycle_pause_s(updated) == pytest.approx(0.6)  # the update came: a second pause, the cadence known
    assert outlived_peak([], updated, Window(101.5, updated[-1].t, True), 0.3, per_iteration=False) == ""


def test_a_window_inside_a_rollout_is_no_fit_until_it_holds_an_update() -> None:
    """CleanRL's shape, read with a regex of the user's: a line per env step, the update in silence. A window that
    closed inside the second rollout holds no update; one that spans a pause does."""
    pts = bursts(40, 0.02, 2.0, 3)  # t: 100.02..100.8, pause, 102.82..103.6, pause, ...
    inside = Window(103.0, 103.4, gated=True)
    assert "no update yet" in outlived_peak([], pts, inside, window_s=0.4, per_iteration=False)
    spanning = Window(100.5, 103.4, gated=True)
    assert outlived_peak([], pts, spanning, window_s=0.4, per_iteration=False) == ""


def test_a_trainer_that_prints_once_an_iteration_is_not_held_for_the_machines_stalls() -> None:
    """A line once a whole iteration, update included (MimicKit, the proxy, the presets that print so): a busy
    machine stalled it twice during its warm-up, then it printed evenly. Its pauses recur, but they are stalls, not
    a rollout's end: any two of its lines hold an update, so a window with no pause in it is a fit. The same lines
    from a regex of the user's (which may print inside a rollout) still read as bursts whose update the window lacks."""
    pts = points([0.1] * 3 + [1.5] + [0.1] * 3 + [1.5] + [0.1] * 30)
    assert cycle_pause_s(pts) == pytest.approx(1.5)
    window = Window(pts[12].t, pts[-1].t, gated=True)  # 2.5 s of even lines, after both stalls
    assert outlived_peak([], pts, window, window_s=1.0, per_iteration=True) == ""
    assert "no update yet" in outlived_peak([], pts, window, window_s=1.0, per_iteration=False)


def test_an_unknown_cadence_must_show_itself_before_a_window_stands() -> None:
    """A regex of the user's: even lines for a second may still be a rollout (no pause seen yet); after three
    windows of even lines the trainer is taken to print once an iteration. A preset that prints once an iteration
    (`per_iteration`) needs no such wait."""
    early = points([0.1] * 10)  # 1 s of even lines
    window = Window(early[5].t, early[-1].t, gated=True)
    assert "cadence is unknown" in outlived_peak([], early, window, window_s=0.4, per_iteration=False)
    assert outlived_peak([], early, window, window_s=0.4, per_iteration=True) == ""
    later = points([0.1] * 20)  # 2 s: five windows of 0.4 s
    assert outlived_peak([], later, Window(later[15].t, later[-1].t, True), 0.4, per_iteration=False) == ""
    paused = points([0.1] * 10 + [2.0] + [0.1] * 10)  # one pause, then 1 s of even lines: the count starts again
    assert "cadence is unknown" in outlived_peak([], paused, Window(paused[15].t, paused[-1].t, True), 0.4, False)


def test_memory_still_rising_at_the_windows_end_is_no_fit() -> None:
    pts = points([1.0] * 12)  # t = 101 .. 112
    window = Window(104.0, 112.0, gated=True)
    flat = mem([(100.0 + k / 2, 800.0 if k > 4 else 100.0 * k) for k in range(25)])  # peak from t=102.5 on
    assert outlived_peak(flat, pts, window, window_s=8.0) == ""
    climbing = mem([(100.0 + k / 2, 400.0 + 20.0 * k) for k in range(25)])  # 40 MiB a second, to the end
    assert "still rising in the last 2.0 s" in outlived_peak(climbing, pts, window, window_s=8.0)
    creep = mem([(100.0 + k / 2, 800.0 + 0.5 * k) for k in range(25)])  # 1 MiB a second: within 2% and 8 MiB
    assert outlived_peak(creep, pts, window, window_s=8.0) == ""
    young = mem([(111.0, 800.0), (112.0, 800.0)])  # nothing sampled before the last 2 s: too young to tell
    assert "still rising" in outlived_peak(young, pts, window, window_s=8.0)


@pytest.mark.parametrize(
    ("figures", "card_mb", "said"),
    [
        ({"cgroup_peak_mb": 512.0, "cgroup_limit_mb": 512.0}, None, "512/512 MiB of its memory cgroup (100%"),
        ({"cgroup_peak_mb": 480.0, "cgroup_limit_mb": 512.0}, None, ""),  # 94%: clear of it
        # full, but of page cache it would reclaim first (a trainer that reads its libraries and writes its logs)
        ({"cgroup_peak_mb": 512.0, "cgroup_limit_mb": 512.0, "cgroup_file_mb": 60.0}, None, ""),
        ({"cgroup_peak_mb": 512.0, "cgroup_limit_mb": 512.0, "cgroup_file_mb": 4.0}, None, "508/512 MiB of its"),
        ({"cap_used_mb": 630.0, "cap_mb": 640.0}, None, "630/640 MiB of its emulated card (98%"),
        ({"max_mem0": 80000.0, "max_mem1": 20000.0}, 81559.0, "80000/81559 MiB of its GPU memory"),
        ({"max_mem0": 80000.0}, None, ""),  # on a CPU (no card): RSS is not the card
    ],
    ids=["cgroup-full", "cgroup-clear", "cgroup-cache", "cgroup-little-cache", "emulated-card", "gpu", "host-rss"],
)
def test_a_peak_within_the_headroom_of_its_cap_is_named(figures: dict[str, float], card_mb: float | None, said: str):
    got = near_cap(figures, card_mb, headroom=0.02)
    assert got.startswith(said) if said else got == ""


def test_a_clear_loser_is_out_of_reach_as_its_window_opens_on_the_steps_that_opened_it() -> None:
    """The stable rule opens the window once `stable_k` steps agree: those steps are steady, so a cut may count
    them. Here 640 samples per 0.2 s step (3,200 samples/s) against a best of 6,000: out of reach at the window's
    start, where the window alone has no step yet."""
    pts = points([1.0, 0.5, 0.2, 0.21, 0.2])  # two warm-up steps, then three steady ones
    rule = Rule(warmup_iters=3, stable_k=3, stable_tol=0.25)
    window = open_window(pts, pts[-1].t, 30.0, rule, 60.0)
    assert window is not None and window.gated and window.start_t == pts[-1].t
    assert rate_upper(pts, window.start_t) is None  # the window alone: nothing yet
    since = stable_since(pts, window, rule.stable_k)
    assert since == pts[-4].t
    upper = rate_upper(pts, since)
    assert upper is not None and 3_000 < upper < 6_000
    ungated = Window(pts[-1].t, pts[-1].t + 30.0, gated=False)  # opened by the timeout: no steady steps behind it
    assert stable_since(pts, ungated, rule.stable_k) == ungated.start_t


# ---------------------------------------------------------------- the case's pooled step noise


def test_a_window_records_its_steps_spread_and_degrees_of_freedom() -> None:
    got = step_noise([10.0, 14.0, 12.0], [1.0, 1.0, 1.0])  # per-step rates 10, 14, 12 around 12
    assert got["step_df"] == 2.0
    assert got["step_sd_frac"] == pytest.approx(2.0 / 12.0, rel=1e-3)
    assert step_noise([10.0], [1.0]) == {}  # one step: no spread
    pts = points([0.2, 0.21, 0.2, 0.22, 0.2])
    figures = usage.figures([], pts, Window(pts[0].t, pts[-1].t, gated=True), 99.0)
    assert figures["step_df"] == 3.0 and 0.0 < figures["step_sd_frac"] < 0.1
    assert "noise_pooled_df" not in figures


def test_the_pool_weighs_each_window_by_its_degrees_of_freedom_and_needs_enough_of_them() -> None:
    pool = pooled_noise([{"step_sd_frac": 0.1, "step_df": 30.0}, {"step_sd_frac": 0.2, "step_df": 10.0}, {}])
    assert pool is not None and pool.df == POOL_WEIGHT_DF  # it weighs no more than that against a trial
    assert pool.sd_frac == pytest.approx(math.sqrt((30 * 0.01 + 10 * 0.04) / 40))
    assert 0.1 < pool.sd_frac < 0.15  # nearer the window with more steps
    assert pooled_noise([{"step_sd_frac": 0.1, "step_df": 1.0}]) is None  # too few to say more than a trial
    assert pooled_noise([]) is None
    few = pooled_noise([{"step_sd_frac": 0.1, "step_df": 1.0}, {"step_sd_frac": 0.1, "step_df": 1.0}])
    assert few is not None and few.df == 2.0  # a slow trainer's two short windows: a pool, at t's wide quantile
    assert pooled_noise([{"step_sd_frac": 0.0, "step_df": 4.0}]) is None  # steps alike to the clock: no spread


def test_earlier_sweeps_windows_only_fill_what_the_sweeps_own_leave_short_of_the_pool() -> None:
    """Windows of earlier sweeps (newest first) top the pool up to `POOL_WEIGHT_DF`, each weighted by no more than
    the room left; a sweep whose own windows fill it takes none of them, and a first window has a pool at once."""
    old = [{"step_sd_frac": 0.05, "step_df": 3.0}, {"step_sd_frac": 0.5, "step_df": 3.0}]
    first = pooled_noise([], earlier=old)  # the case's first trial of this sweep
    assert first is not None and first.df == POOL_WEIGHT_DF and carried_df([], old) == 6.0
    assert pooled_noise([]) is None
    own = [{"step_sd_frac": 0.1, "step_df": 4.0}]
    topped = pooled_noise(own, earlier=old)  # 4 of its own, 2 of the newest earlier window, none of the older
    assert topped is not None and topped.df == POOL_WEIGHT_DF and carried_df(own, old) == 2.0
    assert topped.sd_frac == pytest.approx(math.sqrt((4 * 0.01 + 2 * 0.0025) / 6))
    long = [{"step_sd_frac": 0.5, "step_df": 40.0}]  # a long earlier window does not outweigh this sweep's own
    assert pooled_noise(own, earlier=long).sd_frac == pytest.approx(math.sqrt((4 * 0.01 + 2 * 0.25) / 6))
    full = [{"step_sd_frac": 0.1, "step_df": 6.0}]
    assert pooled_noise(full, earlier=old) == pooled_noise(full) and carried_df(full, old) == 0.0


def test_t_s_quantile_is_exact_at_a_few_degrees_of_freedom_where_the_expansion_falls_short() -> None:
    """Student t's tables: the one-sided 0.5% (CUT_Z) and 2.5% quantiles at 1-5 degrees of freedom, where the
    Cornish-Fisher expansion alone gives too narrow an interval; a fractional count takes the wider quantile."""
    for df, want in ((1, 63.657), (2, 9.925), (3, 5.841), (4, 4.604), (5, 4.032)):
        assert t_quantile(df, CUT_Z) == pytest.approx(want, abs=0.002)
    for df in range(1, 11):
        assert t_quantile(df, 1.959964) == pytest.approx(t975(df), abs=0.002)
    assert t_quantile(3.7, CUT_Z) == t_quantile(3, CUT_Z)
    assert t_quantile(3, -CUT_Z) == -t_quantile(3, CUT_Z)
    below, at = t_quantile(EXACT_T_DF - 1, CUT_Z), t_quantile(EXACT_T_DF, CUT_Z)
    assert below == pytest.approx(at, rel=0.001) and below > at > CUT_Z  # the two methods meet


def test_with_the_pool_two_steps_bound_a_rate_and_a_noisier_trial_widens_its_own_interval() -> None:
    pool = Noise(0.05, 30.0)
    ys, xs = [1000.0, 1040.0], [1.0, 1.0]
    _, _, own_hi = ratio_interval(ys, xs)
    rate, lo, hi = ratio_interval(ys, xs, pool)
    assert lo < rate < hi < own_hi  # two steps alone say little (t with 1 df); the pool says more
    _, _, noisy_hi = ratio_interval([1000.0, 1400.0], xs, pool)
    assert noisy_hi - 1200.0 > hi - rate  # a trial whose own steps spread more is judged wider
    assert ratio_interval([1000.0], [1.0], pool)[1:] == (float("-inf"), float("inf"))  # one step: still nothing
    assert pool.half(0.05, 8) < pool.half(0.05, 3) < pool.half(0.2, 3)


def test_the_pooled_cut_looks_at_a_stricter_quantile_than_a_single_window_interval() -> None:
    """At every look the pooled cut takes the one-sided 0.5% quantile: with the same spread and many degrees of
    freedom its interval is wider than the 95% one, so looking at each step does not add up to many wrong cuts."""
    pool = Noise(0.05, 1000.0)
    assert pool.half(0.05, 10) == pytest.approx(CUT_Z * 0.05 / math.sqrt(10), rel=0.01)
    assert pool.half(0.05, 10) > t975(1009) * 0.05 / math.sqrt(10)
    assert t_quantile(7, CUT_Z) == pytest.approx(3.499, rel=0.015)  # Student t 99.5%, 7 df
    assert t_quantile(12, 1.959964) == pytest.approx(2.179, abs=0.01)  # Student t 97.5%, 12 df


def test_a_clear_loser_is_cut_on_fewer_steps_with_the_case_s_pooled_noise() -> None:
    pts = points([1.0, 0.5, 0.2, 0.21])  # two warm-up steps, then two steady ones: 640 per 0.2 s (3,200/s)
    since = pts[1].t
    alone = rate_upper(pts, since)
    pooled = rate_upper(pts, since, Noise(0.06, 40.0))
    assert alone is not None and pooled is not None
    assert pooled < 4_000 < alone  # against a best of 4,000: out of reach by the pool, not by two steps alone


def test_a_step_still_running_counts_once_it_is_the_slowest_and_only_lowers_the_rate() -> None:
    """A step in progress ends no sooner than now: counted as ending now, it bounds the rate from above. It counts
    only once it has run longer than every step before it, and it never narrows the interval."""
    pts = points([1.0, 1.0, 1.0, 1.1])  # 640 per second, steady
    since, last = pts[0].t, pts[-1].t
    pool = Noise(0.05, 40.0)
    assert open_step_upper(pts, since, last + 1.0, pool) is None  # not yet longer than the 1.1 s step
    done = rate_upper(pts, since, pool)
    assert done is not None
    longer = [open_step_upper(pts, since, last + s, pool) for s in (1.5, 3.0, 6.0, 12.0)]
    assert all(u is not None for u in longer)
    assert done > longer[0] > longer[1] > longer[2] > longer[3]  # the longer it runs, the lower the top
    # what the step leaves when it ends later still is no higher than its bound now
    ended = [*pts, Point(t=last + 3.5, iter=pts[-1].iter + 1, samples=pts[-1].samples + 640.0)]
    upper = rate_upper(ended, since, pool)
    assert upper is not None and upper <= open_step_upper(pts, since, last + 3.0, pool)  # type: ignore[operator]
    assert open_step_upper(pts[:2], since, last + 30.0, pool) is None  # one step: no rate to bound yet


def test_a_step_still_running_never_narrows_a_wide_interval() -> None:
    """Steps that spread widely keep their width: the open step may move the rate down, not the interval in."""
    pts = points([0.5, 1.5, 0.5, 1.5])
    since, last = pts[0].t, pts[-1].t
    _, _, hi = ratio_interval([640.0] * 3, [1.5, 0.5, 1.5])
    rate = 1920.0 / 3.5
    bound = open_step_upper(pts, since, last + 1.6)
    assert bound is not None
    open_rate = 2560.0 / 5.1
    assert bound >= open_rate * hi / rate - 1e-9  # at least the completed steps' relative width


def test_rate_top_is_the_rate_some_standard_errors_up_from_two_steps_on() -> None:
    pts = points([1.0, 1.0, 1.1, 0.9])  # 640 samples a step: 640/s over the last three, spread 10%
    since = pts[0].t
    assert rate_top(pts[:2], since, SHORT_Z) is None  # one step says nothing of its spread
    one, short, cut = (rate_top(pts, since, z) for z in (1.0, SHORT_Z, CUT_Z))
    upper = rate_upper(pts, since)
    assert one is not None and short is not None and cut is not None and upper is not None
    assert 640.0 < one < short < cut
    assert short < upper  # the short probe's 95% one-sided top is below the cut's two-sided one
    calm = rate_top(pts, since, SHORT_Z, Noise(0.01, 1000.0))
    assert calm is not None and 640.0 < calm < short  # a calm case's pooled noise narrows it


def test_final_upper_narrows_as_the_window_runs_out_and_never_rises_above_the_rate_s_top() -> None:
    """Only the steps still to come can move the window's final rate: the further its end is, the closer the top
    of where it can end lies to the rate's own top (`rate_upper`), and as the end nears it comes down to the rate
    (one step more kept: a window may be held open)."""
    pts = points([1.0, 1.05, 0.95, 1.0, 1.05, 0.95, 1.0])  # 640/s, steps 5% apart
    since, last = pts[0].t, pts[-1].t
    rate, upper = (pts[-1].samples - pts[0].samples) / (last - since), rate_upper(pts, since)
    assert upper is not None
    tops = [final_upper(pts, since, last + left, 0.05) for left in (1000.0, 20.0, 5.0, 0.0, -3.0)]
    assert all(t is not None for t in tops)
    far, mid, near, at_end, past = (float(t) for t in tops if t is not None)
    assert rate < at_end == past < near < mid < far <= upper  # past its end: as at its end, one step still counted
    assert far == pytest.approx(upper, rel=2e-3)  # a window far from its end: its rate's top, as before
    assert final_upper(pts[:2], since, last, 0.05) is None  # one step: no spread, no rate's top either


def test_final_upper_keeps_a_wide_window_s_reach_where_its_interval_would_end_wider_than_the_band() -> None:
    """A tie reaches a value's interval top less the run-to-run band where that is higher (`pick.reach`): a trial
    whose steps are far apart keeps its interval in the bound to its window's end; calm steps do not."""
    calm = points([1.0, 1.02, 0.98] * 3)
    rough = points([1.0, 1.6, 0.6] * 3)
    for pts in (calm, rough):
        since, last = pts[0].t, pts[-1].t
        rate = (pts[-1].samples - pts[0].samples) / (last - since)
        top = final_upper(pts, since, last, 0.05)
        assert top is not None
        upper = rate_upper(pts, since)
        assert upper is not None
        if pts is calm:
            assert top < rate * 1.01  # the end is near: where it ends is about the rate
        else:
            assert rate * 1.05 < top <= upper  # its final interval would reach past the band
