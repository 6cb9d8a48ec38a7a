"""`ladder.core.warmup`: the case's first-step gains and the window they predict from a trial's first steps."""

from __future__ import annotations

import math

import pytest

from ladder.core import warmup
from ladder.core.measure.noise import Noise
from ladder.core.records import Point

pytestmark = pytest.mark.unit

NOISE = Noise(0.05, 12.0)


def trace(rates: list[float], reported: bool = True, samples: float = 100.0) -> list[Point]:
    """Points of a trainer whose i-th step runs at rates[i] samples/s, `samples` per step; the first point reports
    its own step time where `reported`."""
    points, t = [], 0.0
    for i, rate in enumerate(rates, 1):
        t += samples / rate
        step = samples / rate if reported and i == 1 else None
        points.append(Point(t=t, iter=i, samples=samples * i, step_time_s=step))
    return points


def history(gain_by_step: list[float], trials: int = 1) -> warmup.Warmup:
    """The case's whole windows, each with these first-step gains."""
    figures = [{f"{warmup.GAIN}{j}": g for j, g in enumerate(gain_by_step, 1)} for _ in range(trials)]
    found = warmup.pooled(figures, NOISE)
    assert found is not None
    return found


def test_the_first_steps_are_the_first_point_s_own_step_then_the_intervals_between_points() -> None:
    points = trace([50.0, 100.0, 100.0, 100.0, 100.0, 100.0])
    steps = warmup.steps(points, first=True)
    assert len(steps) == warmup.EARLY_K
    (first, began), (second, _) = steps[0], steps[1]
    assert first.seconds == pytest.approx(2.0) and began == pytest.approx(0.0)  # the trainer's own step time
    assert second.seconds == pytest.approx(1.0) and second.samples == pytest.approx(100.0)
    # after a pause the first point seen is no first iteration: only intervals count
    assert warmup.steps(points, first=False)[0][0].seconds == pytest.approx(1.0)
    assert len(warmup.steps(trace([100.0] * 6, reported=False), first=True)) == warmup.EARLY_K


def test_a_whole_window_records_each_first_step_s_gain_over_its_own_rate() -> None:
    gains = warmup.gains(trace([50.0, 100.0, 100.0, 100.0, 100.0]), True, window_rate=100.0)
    assert gains == {"early_gain_1": 2.0, "early_gain_2": 1.0, "early_gain_3": 1.0, "early_gain_4": 1.0}


def test_no_gains_pool_without_the_case_s_step_noise_or_any_whole_window() -> None:
    assert warmup.pooled([{"early_gain_1": 1.0}], None) is None
    assert warmup.pooled([{"samples_per_s": 10.0}], NOISE) is None


def test_steady_first_steps_predict_the_window_at_their_own_rate_with_an_interval_around_it() -> None:
    predicted = history([1.0, 1.0, 1.0, 1.0]).predict(warmup.steps(trace([100.0, 100.0]), True))
    assert predicted is not None and predicted.steps == 2
    assert predicted.value == pytest.approx(100.0)
    assert predicted.lo < 100.0 < predicted.hi
    assert predicted.figures()["early_steps"] == 2.0


def test_one_step_alone_predicts_nothing() -> None:
    assert history([1.0, 1.0]).predict(warmup.steps(trace([100.0]), True)) is None


def test_a_step_the_case_s_windows_show_still_warming_up_is_left_out() -> None:
    """The case's trials ran their first step at half their window's rate: it is no settled step, so two points in
    (one settled step) nothing is predicted, and three in, the prediction rests on steps two and three alone."""
    case = history([2.0, 1.0, 1.0, 1.0], trials=3)
    assert not case.settled(1) and case.settled(2)
    slow_first = trace([50.0, 100.0, 100.0])
    assert case.predict(warmup.steps(slow_first[:2], True)) is None
    predicted = case.predict(warmup.steps(slow_first, True))
    assert predicted is not None and predicted.steps == 2 and predicted.value == pytest.approx(100.0)


def test_one_window_s_slow_step_is_judged_against_the_step_noise_and_a_measured_spread_against_ten_percent() -> None:
    """On a noisy machine (8% step noise) one whole window's second step ran 13.6% slow: one window cannot tell that
    from noise, so the step is settled and two steps in, a clear loser is predicted (and carries the gain, so its
    prediction stands higher, not lower). Three windows whose step gains spread 1.0-1.26 pass the noise test on
    their own wide spread, but their mean is over 10% slow: a warm-up that differs from rung to rung, not settled."""
    noisy = Noise(0.08, 12.0)
    one = warmup.pooled([{"early_gain_1": 1.0, "early_gain_2": 1.136}], noisy)
    assert one is not None and one.settled(1) and one.settled(2)
    predicted = one.predict(warmup.steps(trace([100.0, 100.0]), True))
    assert predicted is not None and predicted.steps == 2 and predicted.value > 100.0
    spread = warmup.pooled([{"early_gain_1": 1.0, "early_gain_2": g} for g in (1.0, 1.13, 1.26)], noisy)
    assert spread is not None and spread.settled(1) and not spread.settled(2)
    far = warmup.pooled([{"early_gain_1": 1.0, "early_gain_2": 1.25}], noisy)  # beyond the noise even in one window
    assert far is not None and not far.settled(2)


def test_steps_faster_than_the_case_s_window_predict_as_a_bound_at_their_own_rate() -> None:
    """The case's window ran 14% slower than its first steps (a trainer that slows as its buffers fill, as the
    proxy's update does): no warm-up, and not within the noise of 1 either. Those steps still predict, as a bound:
    the window at the steps' own rate, never below it, so a clear loser is cut on them and the prediction can only
    stand above its window. A step slower than the window (warming up) still predicts nothing."""
    case = history([0.93, 0.86, 0.87, 0.92])
    assert not case.settled(2) and case.slowing(2) and case.log_gain(2) == 0.0
    assert case.settled(1) and case.log_gain(1) == pytest.approx(math.log(0.93))
    predicted = case.predict(warmup.steps(trace([100.0, 100.0]), True))
    assert predicted is not None and predicted.steps == 2
    assert 100.0 * 0.86 < predicted.value < 100.0  # step 1 at its gain, step 2 at its own rate
    both = history([0.86, 0.86]).predict(warmup.steps(trace([100.0, 100.0]), True))
    assert both is not None and both.value == pytest.approx(100.0)  # not 86: the bound, not the estimate
    warming = history([1.25, 1.25])
    assert not warming.slowing(1) and warming.log_gain(1) is None
    assert warming.predict(warmup.steps(trace([100.0, 100.0]), True)) is None


def test_a_trial_slower_in_its_first_step_than_the_case_s_others_predicts_nothing() -> None:
    """The case's first steps were steady, but this trial's first step ran at 70% of its second (a compile cache it
    missed): its own steps disagree, so no window is predicted from them; a loser it is or not, its window says."""
    case = history([1.0, 1.0, 1.0, 1.0], trials=3)
    assert case.predict(warmup.steps(trace([70.0, 100.0]), True)) is None
    assert case.predict(warmup.steps(trace([98.0, 100.0]), True)) is not None


def test_a_trial_whose_second_step_ran_slower_than_its_first_still_predicts_its_window() -> None:
    """A later step slower than an earlier one is no warm-up (warm-up slows the earliest steps): the two still
    predict, lower than the first alone, where the same steps the other way round (the first slower) predict
    nothing. Seen at 1.339 GB in the bench: a losing profile's steps 11.3 s then 12.4 s ran to its window."""
    case = history([1.0, 1.0, 1.0, 1.0], trials=3)
    slower_later = case.predict(warmup.steps(trace([100.0, 85.0]), True))
    assert slower_later is not None and slower_later.value < 100.0
    assert case.predict(warmup.steps(trace([85.0, 100.0]), True)) is None


def test_the_gains_correct_the_prediction_and_their_spread_widens_it() -> None:
    """Steps settled at 4% below the window (within the noise) predict 4% above their rate; gains that differ from
    trial to trial more than the step noise widen the interval."""
    steady = history([1.04, 1.04, 1.04, 1.04], trials=3).predict(warmup.steps(trace([100.0, 100.0]), True))
    assert steady is not None and steady.value == pytest.approx(104.0, rel=1e-3)
    figures = [{"early_gain_1": g, "early_gain_2": g} for g in (0.97, 1.0, 1.05)]
    spread = warmup.pooled(figures, NOISE)
    assert spread is not None
    wide = spread.predict(warmup.steps(trace([100.0, 100.0]), True))
    narrow = history([1.0, 1.0], trials=3).predict(warmup.steps(trace([100.0, 100.0]), True))
    assert wide is not None and narrow is not None
    assert math.log(wide.hi / wide.value) >= math.log(narrow.hi / narrow.value)


def test_a_tie_reaches_further_than_the_prediction_s_top_only_where_the_window_would_end_wide() -> None:
    predicted = warmup.Prediction(value=100.0, lo=90.0, hi=110.0, steps=2, start_t=0.0)
    assert predicted.reach(band=0.05, window_steps=16.0, noise=NOISE) == 110.0
    assert predicted.reach(band=0.0, window_steps=1.0, noise=NOISE) > 110.0
