"""A fit needs a measurement (`trial.run` on small real programs): the window waits for its points, a trainer that
prints too rarely is `unmeasured`, one whose lines never match is a setting to fix, and a slow first update that
visibly works is no hang."""

from __future__ import annotations

import time

import pytest

from ladder.core.measure import usage
from ladder.core.measure.bounds import rate_upper
from ladder.core.measure.cadence import pace_s, stall_limit_s
from ladder.core.measure.noise import POOL_WEIGHT_DF, Noise, step_noise
from ladder.core.measure.rates import ci_frac, projected_ci_frac, steady_noise, whole_window_noise, window_ci_frac
from ladder.core.measure.tdist import t975
from ladder.core.measure.window import Plan, Window, close_by
from ladder.core.records import Point, StopCause
from ladder.core.stop import Course, Mark, Observation, Stage, Terms, decide
from ladder.core.stop.cut import beaten, short_lost
from ladder.core.stop.record import judged_on
from ladder.core.stop.window import closed as window_done
from ladder.settings.config import MeasureConf


def conf(**kw: float) -> MeasureConf:
    base = {
        "warmup_iters": 1,
        "stable_k": 2,
        "stable_tol": 5.0,
        "warmup_timeout_s": 60.0,
        "window_s": 1.0,
        "min_window_iters": 4,
        "startup_timeout_s": 60.0,
        "stall_timeout_s": 60.0,
        "trial_timeout_s": 60.0,
        "kill_grace_s": 2.0,
        "sample_hz": 5.0,
    }
    base["budget_s"] = kw.get("trial_timeout_s", base["trial_timeout_s"])  # no overtime unless a test gives one
    return MeasureConf(**{**base, **kw})  # type: ignore[arg-type]


def course(
    measure: MeasureConf, window: Window, extended: bool = False, marks: frozenset[Mark] = frozenset(), **terms: object
) -> Course:
    """A trial's course with its window open (`extended`: once already), judged on `measure` and `terms`."""
    stage, more = (Stage.EXTENDED, {Mark.EXTENDED}) if extended else (Stage.MEASURING, set())
    short_s = terms.pop("short_s", None)
    return Course(Terms(measure, 990.0, **terms), stage, window=window, marks=marks | more, short_s=short_s)  # type: ignore[arg-type]


def look(points: list[Point], elapsed_s: float = 0.0) -> Observation:
    """A look at the trial now, its last point just read."""
    return Observation(points, [], time.time(), elapsed_s=elapsed_s, silent_s=0.0)


def done(after: Course) -> bool:
    return after.cause is StopCause.WINDOW_DONE


def test_out_of_trial_time_while_extended_keeps_the_window_it_had() -> None:
    """A window extended for its wide interval, then the trial's time runs out: it closes at its last point (the
    figures say `unstable`), where a window that never held its points leaves the trial unmeasured."""
    pts = [Point(1000.0 + i, i, 100.0 * i) for i in range(1, 8)]
    measure = conf(trial_timeout_s=1.0)
    extended = decide(course(measure, Window(1001.0, 1012.0, gated=True), extended=True), look(pts, elapsed_s=5.0))
    assert extended.cause == "window_done"
    assert extended.window == Window(1001.0, 1007.0, gated=True)
    short = decide(course(measure, Window(1001.0, 1012.0, True)), look(pts, elapsed_s=5.0))
    assert short.cause == "trial_timeout"


def test_an_extended_window_closes_once_its_interval_is_narrow_enough() -> None:
    """Extended for a wide interval, the window does not always run a whole second `window_s`: at the first point
    where the interval over all of it is within `max_ci_frac`, it closes there; a rate that stays wide, where more
    steps of its spread would narrow it, runs on."""
    steady = [Point(1000.0 + i, i, 100.0 * i) for i in range(1, 12)]  # 100 samples each second: a narrow interval
    measure = conf(window_s=15.0)
    watch = window_done(course(measure, Window(1001.0, 1030.0, True), extended=True), look(steady))
    assert done(watch)
    assert watch.window == Window(1001.0, 1011.0, gated=True)
    jitter = [Point(1000.0 + i, i, 100.0 * i + (10.0 if i % 2 else 0.0)) for i in range(1, 12)]  # 20% apart
    wide = window_done(course(measure, Window(1001.0, 1030.0, True), extended=True), look(jitter))
    assert not done(wide)
    assert wide.window == Window(1001.0, 1030.0, gated=True)
    first = window_done(course(measure, Window(1001.0, 1030.0, True)), look(steady))
    assert not done(first)  # not extended: its window_s runs whole


def test_a_short_probe_clearly_below_what_it_must_beat_ends_on_its_first_steady_steps() -> None:
    """An insurance probe whose steady steps' rate is below what it must beat at its one-sided 95% top
    (`bounds.rate_top`, `bounds.SHORT_Z`) ends there, its short window still open; one whose top reaches it goes on,
    to be judged at its short window's end on its rate alone."""
    pts = steps_at([1.0, 1.1, 0.9])  # 100 samples/s, its steps 10% apart

    def probe(beat: float) -> Course:
        window = Window(pts[0].t, pts[-1].t + 100.0, gated=False)
        return short_lost(course(conf(), window, beat=beat, short_s=60.0), look(pts))

    clear = probe(beat=130.0)
    assert done(clear)
    assert {Mark.SHORT, Mark.CUT} <= clear.marks and clear.window == Window(pts[0].t, pts[-1].t, gated=False)
    near = probe(beat=110.0)
    assert not done(near)
    assert not near.marks & {Mark.SHORT, Mark.CUT} and near.short_s == 60.0  # its short window decides


def test_a_window_near_its_end_is_cut_once_its_final_rate_cannot_reach_what_it_must_beat() -> None:
    """The cut asks where the window would end (`bounds.final_upper`): the same steps, a little below what the
    trial must beat, go on where most of the window is still to come and are cut where little of it is left."""
    pts = steps_at([1.0, 1.06, 0.94] * 4)  # 100 samples/s, steps 6% apart

    def full(end_in_s: float) -> Course:
        window = Window(pts[0].t, pts[-1].t + end_in_s, gated=False)
        return beaten(course(conf(), window, beat=102.0), look(pts))

    assert (upper := rate_upper(pts, pts[0].t)) is not None and upper > 102.0  # its rate's top reaches it
    early = full(end_in_s=200.0)
    assert not done(early) and Mark.CUT not in early.marks
    late = full(end_in_s=1.0)
    assert done(late) and Mark.CUT in late.marks
    assert late.window == Window(pts[0].t, pts[-1].t, gated=False)  # its figures: the steps it ran


def steps_at(times: list[float], start: float = 1000.0, samples: float = 100.0) -> list[Point]:
    """Progress points `times` seconds apart (the first at `start`), `samples` each."""
    pts, t = [Point(start, 1, samples)], start
    for i, dt in enumerate(times, start=2):
        t += dt
        pts.append(Point(t, i, samples * i))
    return pts


def test_the_projected_interval_is_today_s_at_its_last_point_and_narrows_with_more_steps_of_the_same_spread() -> None:
    """Projected to the window's own last point, the width is the interval the window has now; further on, it
    narrows as t/sqrt(n) does for more steps of the same spread. Under two steps there is none."""
    pts = steps_at([0.9, 1.1] * 4)
    window = Window(1000.0, pts[-1].t, gated=True)
    now = window_ci_frac(pts, window)  # from the figures, rounded to 0.1 samples/s
    assert now is not None and projected_ci_frac(pts, window, pts[-1].t) == pytest.approx(now, rel=0.01)
    later = projected_ci_frac(pts, window, pts[-1].t + 8.0)  # eight more steps of 1 s
    assert later is not None and later < now
    assert later == pytest.approx(now * t975(15) / t975(7) * (8 / 16) ** 0.5, rel=0.01)
    assert projected_ci_frac(pts[:2], Window(1000.0, pts[1].t, gated=True), pts[1].t + 60.0) is None


def test_a_wide_window_its_steps_can_narrow_is_extended_and_one_they_cannot_closes_unstable() -> None:
    """Wide at window_s: extended where more steps of the same spread would narrow the interval by the extension's
    end; closed there, `futile`, where even twice as many would leave it wider than
    max_ci_frac (every other step ten times longer): the extension could not make it stable."""
    measure = conf(window_s=8.0, min_window_iters=4)
    mild = steps_at([0.93, 1.07] * 4)  # 8 s of steps 14% apart: wide over 8 steps, narrow over 16
    closed = Window(1000.0, mild[-1].t, gated=True)
    assert window_ci_frac(mild, closed) > 0.10  # type: ignore[operator]
    watch = window_done(course(measure, Window(1000.0, 1008.0, True)), look(mild))
    assert not done(watch)
    assert Mark.EXTENDED in watch.marks and Mark.FUTILE not in watch.marks
    assert watch.window == Window(1000.0, mild[-1].t + 8.0, gated=True)
    rough = steps_at([0.2, 2.0] * 4)
    watch = window_done(course(measure, Window(1000.0, 1008.0, True)), look(rough))
    assert done(watch)
    assert Mark.FUTILE in watch.marks and Mark.EXTENDED not in watch.marks
    assert watch.window == Window(1000.0, rough[-1].t, gated=True)


def test_an_extension_ends_once_its_steps_say_the_rest_of_it_cannot_narrow_the_interval() -> None:
    """Extended, a window whose steps turn rough (the machine got busy) closes at the newest point once the steps
    left before the extension's end could not bring its interval within reach; while they still could, it runs on."""
    pts = steps_at([0.93, 1.07] * 4 + [0.3, 2.5] * 2)
    hopeful = window_done(
        course(conf(window_s=15.0, min_window_iters=4), Window(1000.0, 1030.0, True), extended=True), look(pts[:9])
    )
    assert not done(hopeful)
    assert Mark.FUTILE not in hopeful.marks
    rough = window_done(
        course(conf(window_s=10.0, min_window_iters=4), Window(1000.0, 1020.0, True), extended=True), look(pts)
    )
    assert done(rough)
    assert Mark.FUTILE in rough.marks and rough.window == Window(1000.0, pts[-1].t, gated=True)


# ---------------------------------------------------------------- a slow trainer's budget


def test_pace_and_stall_limit_come_from_the_trainer_s_own_points() -> None:
    """Seconds per point over all points (an update's pause included); a stall is three of its longest pauses,
    never less than stall_timeout_s."""
    pts = [Point(100.0 + t, i, 10.0 * i) for i, t in enumerate([0.0, 1.0, 2.0, 3.0, 43.0, 44.0], start=1)]
    assert pace_s(pts) == 44.0 / 5
    assert pace_s(pts[:1]) is None
    assert stall_limit_s(pts, 60.0) == 120.0  # 3 x the 40 s update
    assert stall_limit_s(pts[:4], 60.0) == 60.0
    assert stall_limit_s(pts[:1], 60.0) == 60.0


def test_the_window_s_close_is_projected_at_the_trainer_s_pace() -> None:
    """A point every 10 s: not open yet, it opens after its warm-up and steady points (or its warm-up limit, if
    sooner) and then needs window_s and min_window_iters points; open, the points it still lacks."""
    plan = Plan(warmup_iters=3, stable_k=2, warmup_timeout_s=1000.0, window_s=5.0, min_window_iters=4)
    pts = [Point(100.0 + 10 * i, i, 10.0 * i) for i in range(2)]  # two points: t=100, 110
    assert close_by(pts, None, 110.0, plan) == 110.0 + 3 * 10 + 4 * 10  # 3 more to open, then 4 in it
    soon = Plan(warmup_iters=3, stable_k=2, warmup_timeout_s=15.0, window_s=5.0, min_window_iters=4)
    assert close_by(pts, None, 110.0, soon) == 120.0 + 40.0  # the warm-up limit, once 3 points have come
    window = Window(start_t=115.0, end_t=120.0, gated=True)
    pts3 = [*pts, Point(120.0, 2, 20.0)]
    assert close_by(pts3, window, 120.0, plan) == 120.0 + 3 * 10  # it holds 1 of its 4
    assert close_by(pts[:1], None, 110.0, plan) is None


# ---------------------------------------------------------------- a whole window judged on the case's step noise


def test_a_few_steps_as_noisy_as_the_case_s_others_close_on_the_pooled_interval_without_an_extension() -> None:
    """Four window steps 7% apart: on their own three degrees of freedom the interval is wider than max_ci_frac and
    the window is extended; with the case's pooled step noise of the same spread it is narrow, and the window closes
    at window_s, its figures that pooled interval (`noise_pooled_df`). A window twice as noisy as the pool is judged
    on its own steps (`rates.POOL_GATE`), as it was without the pool."""
    calm = steps_at([0.965, 1.035] * 2)
    window = Window(1000.0, calm[-1].t, gated=True)
    own_sd = step_noise([100.0] * 4, [0.965, 1.035] * 2)["step_sd_frac"]
    pool = Noise(own_sd, POOL_WEIGHT_DF)
    own, pooled = window_ci_frac(calm, window), window_ci_frac(calm, window, pool)
    assert own is not None and pooled is not None and pooled < 0.10 < own

    def watch(pts: list[Point], noise: Noise | None) -> Course:
        return window_done(course(conf(window_s=4.0), Window(1000.0, pts[-1].t, True), noise=noise), look(pts))

    alone = watch(calm, None)
    assert not done(alone)
    assert Mark.EXTENDED in alone.marks
    judged = watch(calm, pool)
    assert done(judged)
    assert not judged.marks & {Mark.EXTENDED, Mark.FUTILE} and judged.window == window
    figures = usage.figures([], calm, window, 990.0, *judged_on(judged, look(calm), window))
    assert figures["noise_pooled_df"] == POOL_WEIGHT_DF
    assert ci_frac(figures) == pytest.approx(pooled, rel=0.01)
    rough = steps_at([0.93, 1.07] * 2)  # twice the pool's spread: its own interval stands
    assert whole_window_noise(rough, Window(1000.0, rough[-1].t, True), pool) is None
    noisy, unpooled = watch(rough, pool), watch(rough, None)
    assert done(noisy) == done(unpooled)
    assert (noisy.marks, noisy.window) == (unpooled.marks, unpooled.window)
    assert noisy.marks & {Mark.EXTENDED, Mark.FUTILE}  # wide on its own steps
    assert judged_on(noisy, look(rough), Window(1000.0, rough[-1].t, True)) == (None, None)


def test_a_cut_keeps_the_cut_s_quantile_and_an_insurance_probe_its_own_steps() -> None:
    """The interval a trial's figures say is the one it was judged on: a cut's at `noise.CUT_Z` on the pooled noise,
    an insurance probe's on its own steps."""
    pts = steps_at([0.95, 1.05, 0.95, 1.05])
    window = Window(1000.0, pts[-1].t, gated=True)
    pool = Noise(0.05, POOL_WEIGHT_DF)
    cut = course(conf(), window, marks=frozenset({Mark.CUT}), noise=pool)
    assert judged_on(cut, look(pts), window) == (pool, None)
    short = course(conf(), window, marks=frozenset({Mark.CUT, Mark.SHORT}), noise=pool)
    assert judged_on(short, look(pts), window) == (None, None)


def test_a_case_s_first_window_counts_the_steady_steps_that_opened_it_in_its_spread() -> None:
    """No pool yet (the case's first window): the spread of the `stable_k` steady steps before the window, steps of
    the same process the rate does not count, is pooled with the window's own, so four window steps as calm as those
    close at window_s where on their own they would be extended; the figures say the pooled interval. Window steps
    twice as noisy as those weigh in by their degrees of freedom: still wide."""
    settled = [0.97, 1.03, 0.97]  # the stable rule's three steps (stable_k 3), then the window's four
    pts = steps_at([3.0, *settled, 1.03, 0.97, 1.03, 0.97])
    window = Window(pts[4].t, pts[-1].t, gated=True)
    noise = steady_noise(pts, window, 3)
    assert noise is not None and noise.df == 2.0
    ungated = Window(pts[4].t, pts[-1].t, gated=False)  # a window the stable rule did not open
    assert steady_noise(pts, ungated, 3) is None

    def watch(pts: list[Point], measure: MeasureConf) -> Course:
        return window_done(course(measure, Window(pts[4].t, pts[-1].t, gated=True)), look(pts))

    measure = conf(window_s=4.0, stable_k=3)
    first = watch(pts, measure)
    assert done(first)
    assert not first.marks & {Mark.EXTENDED, Mark.FUTILE}
    assert first.window is not None
    figures = usage.figures([], pts, first.window, 990.0, *judged_on(first, look(pts), first.window))
    assert figures["noise_pooled_df"] == 2.0 and ci_frac(figures) < 0.10  # type: ignore[operator]
    assert window_ci_frac(pts, window) > 0.10  # type: ignore[operator]  # its own three degrees of freedom
    alone = watch(pts, conf(window_s=4.0, stable_k=1))
    assert not done(alone)  # stable_k 1: no steps to pool
    assert Mark.EXTENDED in alone.marks
    rough = watch(steps_at([3.0, *settled, 1.06, 0.94, 1.06, 0.94]), measure)
    assert rough.marks & {Mark.EXTENDED, Mark.FUTILE}
