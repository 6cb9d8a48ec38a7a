"""The ladder walk on plain data, and the model strategy against simulated cards."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from ladder.core.records import Reason, Status
from ladder.core.walk import MAX_RETRIES, Attempt, Outcome, Step, Strategy, Tuning, memory_line, next_trial, standing

RUNGS = (256, 128, 64, 48)
PI_PLUS = (256, 128, 64, 48, 40, 38, 36, 32)
OOM, OK, ERR, TIMEOUT = Status.OOM_OR_NCCL, Status.OK, Status.ERROR, Status.TIMEOUT
PLAIN = Tuning(Strategy.PLAIN)


def attempts(profile: str, *pairs: tuple[int, Status]) -> list[Attempt]:
    return [Attempt(profile, rung, status) for rung, status in pairs]


@pytest.mark.parametrize("tuning", [PLAIN, Tuning()], ids=["plain", "model"])
@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], (Outcome.PENDING, 256)),
        ([(256, OK)], (Outcome.FOUND, 256)),
        ([(256, OOM), (128, OK)], (Outcome.FOUND, 128)),
        ([(256, OOM), (128, ERR)], (Outcome.ERROR, 128)),
        ([(256, OOM), (128, OOM), (64, OOM), (48, OOM)], (Outcome.EXHAUSTED, None)),
        ([(256, Status.INTERRUPTED)], (Outcome.PENDING, 256)),
        ([(256, Status.RETRY)], (Outcome.PENDING, 256)),
        ([(256, Status.RETRY)] * MAX_RETRIES, (Outcome.ERROR, 256)),
    ],
    ids=[
        "fresh",
        "top-fits",
        "ok-found",
        "error-stops",
        "exhausted",
        "interrupted-reruns",
        "retry-same-rung",
        "retry-bounded",
    ],
)
def test_walk_states(history: list[tuple[int, Status]], expected: tuple[Outcome, int | None], tuning: Tuning) -> None:
    state = standing(RUNGS, "default", attempts("default", *history), tuning)
    assert (state.outcome, state.rung) == expected


def test_plain_walk_steps_down_one_rung_at_a_time() -> None:
    assert standing(RUNGS, "default", attempts("default", (256, OOM)), PLAIN).rung == 128
    assert standing(RUNGS, "default", attempts("default", (256, OOM), (128, TIMEOUT)), PLAIN).rung == 64


def test_error_never_steps_down() -> None:
    history = attempts("default", (256, ERR))
    assert standing(RUNGS, "default", history).outcome is Outcome.ERROR
    assert next_trial(RUNGS, ["default"], history) is None


def test_profiles_walk_in_order_and_independently() -> None:
    history = attempts("default", (256, OOM), (128, OK)) + attempts("hiutil", (256, OOM))
    decision = next_trial(RUNGS, ["default", "hiutil"], history, PLAIN)
    assert decision is not None and (decision.profile, decision.rung) == ("hiutil", 128)
    assert standing(RUNGS, "hiutil", attempts("default", (256, OOM))).rung == 256


def test_memory_line() -> None:
    fit = memory_line([(32, 0.5), (64, 0.7), (48, 0.6)])
    assert fit is not None and fit.slope == pytest.approx(0.00625) and fit.predict(128) == pytest.approx(1.1)
    assert memory_line([(32, 0.5), (32, 0.6)]) is None


# ---------------------------------------------------------------- the model strategy on simulated cards


def simulate(
    rungs: tuple[int, ...], mems: dict[str, object], tuning: Tuning
) -> tuple[dict[str, tuple[Outcome, int | None]], list[tuple[str, int]]]:
    """Run the walk against a card where `mems[profile](rung)` is the peak memory fraction."""
    history: list[Attempt] = []
    launches: list[tuple[str, int]] = []
    while (d := next_trial(rungs, list(mems), history, tuning)) is not None:
        assert len(launches) < 3 * len(rungs) * len(mems), "the walk does not end"
        mem = mems[d.profile](d.rung)  # type: ignore[operator]
        history.append(Attempt(d.profile, d.rung, OK if mem <= 1.0 else OOM, mem if mem <= 1.0 else None))
        launches.append((d.profile, d.rung))
    ends = {p: (w.outcome, w.rung) for p in mems for w in [standing(rungs, p, history, tuning)]}
    return ends, launches


def line(intercept: float, slope: float):
    return lambda rung: intercept + slope * rung


CARDS = [(a, b) for a, b in itertools.product([0.05, 0.3, 0.6, 0.9], [0.0005, 0.002, 0.004, 0.008, 0.02])]


@pytest.mark.parametrize("tuning", [PLAIN, Tuning()], ids=["plain", "model"])
@pytest.mark.parametrize(("intercept", "slope"), CARDS, ids=[f"a{a}-b{b}" for a, b in CARDS])
def test_same_pick_as_the_exhaustive_grid(intercept: float, slope: float, tuning: Tuning) -> None:
    mems = {"default": line(intercept, slope), "hiutil": line(intercept * 0.9, slope * 1.3)}
    ends, launches = simulate(PI_PLUS, mems, tuning)
    for profile, mem in mems.items():
        fitting = [r for r in PI_PLUS if mem(r) <= 1.0]
        assert ends[profile] == ((Outcome.FOUND, fitting[0]) if fitting else (Outcome.EXHAUSTED, None))
    assert len(set(launches)) == len(launches)  # no rung launched twice


def test_a_seeded_profile_needs_fewer_launches() -> None:
    mems = {"default": line(0.6, 0.006), "hiutil": line(0.58, 0.0065)}  # both fit at 64, fail at 128
    walked = simulate(PI_PLUS, mems, PLAIN)[1]
    modelled = simulate(PI_PLUS, mems, Tuning())[1]
    assert walked == [
        ("default", 256),
        ("default", 128),
        ("default", 64),
        ("hiutil", 256),
        ("hiutil", 128),
        ("hiutil", 64),
    ]
    assert modelled == [("default", 256), ("default", 128), ("default", 64), ("hiutil", 64), ("hiutil", 128)]


def test_a_seed_that_fails_walks_on_down() -> None:
    mems = {"default": line(0.6, 0.006), "hiutil": line(0.6, 0.009)}  # default fits at 64, hiutil at 40
    ends, launches = simulate(PI_PLUS, mems, Tuning())
    assert ends["hiutil"] == (Outcome.FOUND, 40)
    assert launches[3:] == [("hiutil", 64), ("hiutil", 48), ("hiutil", 40)]


def test_two_memory_points_jump_and_record_the_skips() -> None:
    history = [Attempt("p", 32, OK, 0.5), Attempt("p", 36, OK, 0.55)]  # 0.1 + 0.0125 per env
    decision = next_trial(PI_PLUS, ["p"], history)
    assert (
        decision is not None
        and decision.rung == 64
        and decision.why == "memory fit predicts 90% of the card at 64 envs"
    )
    state = standing(PI_PLUS, "p", history)
    assert dict(state.skipped) == {
        256: "memory fit predicts 330% of the card",
        128: "memory fit predicts 170% of the card",
    }


def test_a_failed_confirmation_steps_the_walk_down() -> None:
    """The sweep passes a confirmation that failed as one more attempt at that rung: it outweighs the probe's ok."""
    history = attempts("default", (256, OOM), (128, OOM), (64, OK), (64, TIMEOUT))
    state = standing(PI_PLUS, "default", history)
    assert (state.outcome, state.rung) == (Outcome.PENDING, 48)


# ---------------------------------------------------------------- below the largest fit (samples/s)

DESCEND = Tuning(descend=True, descent_gain_max=None, descent_idle_util=None)


def rate(rung: int, value: float, hi: float | None = None, status: Status = OK) -> Attempt:
    return Attempt("default", rung, status, None, value, hi if hi is not None else value * 1.02)


def test_once_the_largest_fit_is_measured_the_rung_below_is_too_and_must_beat_its_interval() -> None:
    history = [rate(256, 5000.0)]
    decision = next_trial(PI_PLUS, ["default"], history, DESCEND)
    assert decision is not None and (decision.rung, decision.beat) == (128, 5100.0)
    assert "below the largest fit" in decision.why
    assert next_trial(PI_PLUS, ["default"], history, Tuning()) is None  # util: the largest fit is the answer


def test_the_descent_goes_on_while_lower_rungs_win_by_more_than_the_interval() -> None:
    better = [rate(256, 5000.0), rate(128, 6200.0)]
    decision = next_trial(PI_PLUS, ["default"], better, DESCEND)
    assert decision is not None and (decision.rung, decision.beat) == (64, 6324.0)
    worse = [*better, rate(64, 5000.0)]
    assert next_trial(PI_PLUS, ["default"], worse, DESCEND) is None
    state = standing(PI_PLUS, "default", worse, DESCEND)
    assert (state.outcome, state.rung) == (Outcome.FOUND, 256)  # the largest fit; the pick is by objective


def test_a_lower_rung_within_the_interval_is_a_tie_and_ends_the_descent() -> None:
    tie = [rate(256, 5000.0, hi=5200.0), rate(128, 5150.0)]
    assert next_trial(PI_PLUS, ["default"], tie, DESCEND) is None


def test_the_descent_starts_at_the_largest_fit_not_at_the_top_and_stops_at_the_bottom() -> None:
    history = [Attempt("default", 256, OOM), Attempt("default", 128, OOM), rate(64, 4000.0)]
    decision = next_trial(PI_PLUS, ["default"], history, DESCEND)
    assert decision is not None and decision.rung == 48
    bottom = [rate(32, 3000.0)]
    assert next_trial((64, 32), ["default"], [Attempt("default", 64, OOM), *bottom], DESCEND) is None


NOISY = Tuning(
    descend=True, noise=0.05, descent_gain_max=None, descent_idle_util=None
)  # the pick's run-to-run allowance for samples/s (`pick.RUN_TO_RUN`)


def band(rung: int, value: float, repeats: int = 1, profile: str = "default") -> Attempt:
    """A window as `walk.attempts` hands it to the walk: its tie band reaches 5% above its value."""
    return Attempt(profile, rung, OK, None, value, value * 1.05, repeats=repeats)


def test_a_lower_rung_that_wins_narrowly_gets_a_second_window_before_the_descent_goes_on() -> None:
    """128 beat the top of 256's band (5250) by less than four times the noise (6000): one window's win that size
    is as likely two launches' noise. It runs again, carrying what it must beat (256's band), and stands as the
    lower of its two windows: the descent goes on only where both beat 256."""
    narrow = [band(256, 5000.0), band(128, 5300.0)]
    again = next_trial(PI_PLUS, ["default"], narrow, NOISY)
    assert again is not None and (again.rung, again.beat, again.step) == (128, 5250.0, Step.DESCENT)
    assert "beat 256 by 6.0%" in again.why and "second window" in again.why
    assert next_trial(PI_PLUS, ["default"], narrow, DESCEND).rung == 64  # no allowance: no second window
    fell_back = [band(256, 5000.0), band(128, 5100.0, repeats=2)]
    assert next_trial(PI_PLUS, ["default"], fell_back, NOISY) is None
    assert standing(PI_PLUS, "default", fell_back, NOISY).rung == 256
    held = [band(256, 5000.0), band(128, 5300.0, repeats=2)]
    assert next_trial(PI_PLUS, ["default"], held, NOISY).rung == 64


def test_a_clear_win_or_a_rung_that_cannot_be_the_pick_gets_no_second_window() -> None:
    clear = [band(256, 5000.0), band(128, 6100.0)]  # faster by more than four times the noise
    assert next_trial(PI_PLUS, ["default"], clear, NOISY).rung == 64
    behind = [band(256, 9000.0, profile="hiutil"), band(256, 5000.0), band(128, 5300.0)]
    decision = next_trial(PI_PLUS, ["hiutil", "default"], behind, replace(NOISY, descent_short=False))
    assert decision is None or (decision.profile, decision.rung) != ("default", 128)


def test_a_lower_rung_that_beats_a_wide_window_gets_that_window_measured_again_first() -> None:
    """256's one window was wide (a slow stretch of the machine spreads the steps and drags the mean down): 128
    beating it says as little as that window. 256 runs again, carrying what it must reach to stay the pick over 128,
    and the descent goes on only once its second window is in."""
    doubt = [replace(band(256, 4000.0), value_hi=4600.0, wide=1), band(128, 5000.0)]
    again = next_trial(PI_PLUS, ["default"], doubt, NOISY)
    assert again is not None and (again.rung, again.step) == (256, Step.DESCENT)
    assert again.beat == pytest.approx(5000.0 / 1.05)  # 128's value less the run-to-run allowance (rung above)
    assert "128 envs beat 256, whose one window was wide" in again.why and "second window" in again.why
    narrow = [band(256, 4000.0), band(128, 5000.0)]  # the same win over a narrow window: the descent goes on
    assert next_trial(PI_PLUS, ["default"], narrow, NOISY).rung == 64
    twice = [replace(band(256, 4000.0, repeats=2), wide=2), band(128, 5000.0)]  # wide twice: it stands
    assert next_trial(PI_PLUS, ["default"], twice, NOISY).rung == 64
    held = [band(256, 5400.0, repeats=2), band(128, 5000.0)]  # the second window was narrow, and 256 stays the best
    assert next_trial(PI_PLUS, ["default"], held, NOISY) is None
    assert standing(PI_PLUS, "default", held, NOISY).rung == 256
    behind = [band(256, 9000.0, profile="hiutil"), *doubt]  # 128 cannot be the case's pick: no second window
    decision = next_trial(PI_PLUS, ["hiutil", "default"], behind, replace(NOISY, descent_short=False))
    assert decision is None or (decision.profile, decision.rung) != ("default", 256)


def test_a_later_profile_is_still_seeded_at_the_earlier_profiles_largest_fit_and_must_reach_the_case_best() -> None:
    history = [rate(256, 5000.0), rate(128, 4000.0)]
    decision = next_trial(PI_PLUS, ["default", "hiutil"], history, DESCEND)
    assert decision is not None and (decision.profile, decision.rung, decision.beat) == ("hiutil", 256, 5000.0)
    assert next_trial(PI_PLUS, ["default", "hiutil"], history, Tuning()).beat is None  # util: nothing is cut


def test_the_first_launch_has_nothing_to_beat() -> None:
    decision = next_trial(PI_PLUS, ["default", "hiutil"], [], DESCEND)
    assert decision is not None and decision.beat is None


def test_a_seeded_profile_measures_below_first_and_its_memory_fit_may_rule_out_the_rung_above() -> None:
    """(Without the short insurance: with it, default's rising pair would keep hiutil from measuring lower at all,
    `test_where_more_envs_was_faster_a_profile_below_the_cases_best_is_not_measured_lower`.)"""
    DESCEND = Tuning(descend=True, descent_short=False, descent_gain_max=None, descent_idle_util=None)  # noqa: N806
    rungs = (4096, 2048, 1024, 512)
    first = [
        Attempt("default", 4096, OOM),
        Attempt("default", 2048, OK, 0.82, 174674.0, 179300.0),
        Attempt("default", 1024, OK, 0.60, 131845.0, 140000.0),
    ]
    seeded = next_trial(rungs, ["default", "hiutil"], first, DESCEND)
    assert seeded is not None and (seeded.profile, seeded.rung) == ("hiutil", 2048)
    history = [*first, Attempt("hiutil", 2048, OK, 0.82, 59450.0, 63590.0)]
    below = next_trial(rungs, ["default", "hiutil"], history, DESCEND)
    assert below is not None and (below.rung, below.beat) == (1024, 179300.0)  # the case's best: default's 2048
    history.append(Attempt("hiutil", 1024, OK, 0.61, 37912.0, 39000.0))
    assert next_trial(rungs, ["default", "hiutil"], history, DESCEND) is None  # 4096: predicted 124% of the card
    state = standing(rungs, "hiutil", history, DESCEND)
    assert (state.outcome, state.rung) == (Outcome.FOUND, 2048)
    assert state.skipped == ((4096, "memory fit predicts 124% of the card"),)
    close = [*history[:-1], Attempt("hiutil", 1024, OK, 0.72, 37912.0, 39000.0)]  # a flat fit: 4096 may fit
    above = next_trial(rungs, ["default", "hiutil"], close, DESCEND)
    assert above is not None and above.rung == 4096


def test_where_nothing_fitted_an_earlier_profile_a_later_one_starts_at_the_lowest_rung() -> None:
    exhausted = attempts("default", *((r, OOM) for r in RUNGS))
    seeded = next_trial(RUNGS, ["default", "hiutil"], exhausted, Tuning())
    assert seeded is not None and (seeded.profile, seeded.rung) == ("hiutil", 48)
    assert "no rung fitted an earlier profile" in seeded.why
    failed = [*exhausted, Attempt("hiutil", 48, OOM)]
    assert next_trial(RUNGS, ["default", "hiutil"], failed, Tuning()) is None  # one launch settles it
    assert standing(RUNGS, "hiutil", failed).outcome is Outcome.EXHAUSTED
    fits = [*exhausted, Attempt("hiutil", 48, OK)]
    up = next_trial(RUNGS, ["default", "hiutil"], fits, Tuning())
    assert up is not None and up.rung == 64  # it fits there: the walk goes up
    broken = attempts("default", (256, ERR))
    after_error = next_trial(RUNGS, ["default", "hiutil"], broken, Tuning())
    assert after_error is not None and after_error.rung == 256  # an error seeds nothing


def test_a_profile_that_cannot_reach_the_cases_best_even_gain_max_times_over_is_not_measured_lower() -> None:
    first = [Attempt("default", 128, OOM), rate(64, 4140.0), Attempt("default", 48, OK, None, 4006.0, 4100.0)]
    hiutil = [*first, Attempt("hiutil", 64, OK, None, 2384.0, 2450.0), Attempt("hiutil", 128, OOM)]
    capped = Tuning(
        descend=True, descent_gain_max=1.5, descent_short=False, descent_idle_util=None
    )  # with it, default's rising pair bounds by 1
    assert next_trial(PI_PLUS, ["default", "hiutil"], hiutil, capped) is None  # 1.5 x 2450 < 4140
    state = standing(PI_PLUS, "hiutil", hiutil, capped)
    assert (state.outcome, state.rung) == (Outcome.FOUND, 64)
    assert state.skipped[-1] == (48, "even 1.5 x 2,450 at 64 envs stays below the case's best 4,140")  # its top
    close = [*first, Attempt("hiutil", 64, OK, None, 3000.0, 3100.0), Attempt("hiutil", 128, OOM)]  # 4650 > 4140
    decision = next_trial(PI_PLUS, ["default", "hiutil"], close, capped)
    assert decision is not None and (decision.profile, decision.rung) == ("hiutil", 48)
    wide = [*first, Attempt("hiutil", 64, OK, None, 2700.0, 2900.0), Attempt("hiutil", 128, OOM)]  # its top decides:
    decision = next_trial(PI_PLUS, ["default", "hiutil"], wide, capped)  # 1.5 x 2700 < 4140 < 1.5 x 2900
    assert decision is not None and (decision.profile, decision.rung) == ("hiutil", 48)
    assert (
        standing(PI_PLUS, "hiutil", hiutil, replace(DESCEND, descent_short=False)).rung == 48
    )  # always measured lower


def test_where_more_envs_was_faster_a_profile_below_the_cases_best_is_not_measured_lower() -> None:
    """Every measured pair rose with num_envs (`rising`) and a profile's best ran clear of the card (no memory
    pressure): a lower rung is taken to be no faster than the one above (gain 1, whatever `descent_gain_max`), so a
    profile whose best, at the top of its interval, is below the case's best is not measured lower. Near the card's
    limit `descent_gain_max` still bounds it; the case's best profile is still measured lower (the insurance), and a
    profile within reach too."""
    first = [Attempt("default", 128, OOM), rate(64, 4140.0), Attempt("default", 48, OK, None, 4006.0, 4100.0)]
    close = [*first, Attempt("hiutil", 64, OK, 0.90, 3000.0, 3100.0), Attempt("hiutil", 128, OOM)]
    assert next_trial(PI_PLUS, ["default", "hiutil"], close, DESCEND) is None  # gain_max 1.3 would measure 48
    state = standing(PI_PLUS, "hiutil", close, DESCEND)
    assert (state.outcome, state.rung) == (Outcome.FOUND, 64)
    assert state.skipped[-1] == (
        48,
        "samples/s rose with num_envs in every measured pair (1), and 64 envs used 90% "
        "of the card: a lower rung is taken to be no faster than 64 envs, whose 3,100 "
        "stays below the case's best 4,140",
    )
    for near in (0.97, None):  # near the card's limit, or its memory unknown: gain_max (1.3 x 3100 > 4140)
        pressed = [*first, Attempt("hiutil", 64, OK, near, 3000.0, 3100.0), Attempt("hiutil", 128, OOM)]
        below = next_trial(PI_PLUS, ["default", "hiutil"], pressed, DESCEND)
        assert below is not None and (below.profile, below.rung) == ("hiutil", 48), near
    level = [*first, Attempt("hiutil", 64, OK, 0.90, 4000.0, 4300.0), Attempt("hiutil", 128, OOM)]
    below = next_trial(PI_PLUS, ["default", "hiutil"], level, DESCEND)  # its interval reaches the case's best
    assert below is not None and (below.profile, below.rung, below.short) == ("hiutil", 48, True)
    own = next_trial(
        PI_PLUS,
        ["default", "hiutil"],
        [
            Attempt("default", 128, OOM),
            rate(64, 4140.0),
            Attempt("hiutil", 64, OK, None, 2000.0, 2100.0),
            Attempt("hiutil", 32, OK, None, 900.0, 950.0),
        ],
        DESCEND,
    )
    assert own is not None and (own.profile, own.rung, own.short) == ("default", 48, True)  # the best's own: short
    falling = [
        Attempt("default", 128, OOM),
        rate(64, 4140.0),
        Attempt("default", 48, OK, None, 4300.0, 4400.0),
        Attempt("hiutil", 64, OK, None, 3000.0, 3100.0),
        Attempt("hiutil", 128, OOM),
    ]
    again = next_trial(PI_PLUS, ["default", "hiutil"], falling, DESCEND)  # fewer envs was faster: no bound at all
    assert again is not None and again.profile == "default" and again.rung == 40


PRESSED = Tuning(descend=True, descent_gain_max=1.3, descent_idle_util=None)  # the default gain bound, no idle rule


def test_near_the_card_a_pair_that_rose_under_as_much_pressure_bounds_a_losing_profile_by_one() -> None:
    """A bench at a 0.473 GB cap: default's e48 used 95.5% of the card (memory pressure, so its rung below was
    measured: the insurance) and ran faster than e40. hiutil's e48, as near the card, measured far below the case's
    best, its top within `descent_gain_max` of it: since memory pressure that near the card was measured not to make
    fewer envs faster, hiutil's e40 is not launched, and the walk says why. hiutil nearer the card than any pair that
    rose, or a pair that fell: `descent_gain_max` bounds it as before."""
    default = [
        Attempt("default", 64, OOM),
        Attempt("default", 48, OK, 0.955, 2653.0, 2700.0),
        Attempt("default", 40, OK, 0.917, 2545.0, 2650.0),
    ]
    case = [*default, Attempt("hiutil", 64, OOM), Attempt("hiutil", 48, OK, 0.955, 1300.0, 2100.0)]
    assert next_trial(PI_PLUS, ["default", "hiutil"], case, PRESSED) is None  # 1.3 x 2100 > 2653: measured before
    state = standing(PI_PLUS, "hiutil", case, PRESSED)
    assert state.skipped[-1] == (
        40,
        "samples/s rose with num_envs in every measured pair (1), and 48 envs used 96% "
        "of the card, no nearer it than default e48 (96%), faster than the rung below "
        "it: a lower rung is taken to be no faster than 48 envs, whose 2,100 stays "
        "below the case's best 2,653",
    )
    nearer = [*default, Attempt("hiutil", 64, OOM), Attempt("hiutil", 48, OK, 0.97, 1300.0, 2100.0)]
    fell = [*default[:2], Attempt("default", 40, OK, 0.917, 2660.0, 2700.0), *case[3:]]
    for history in (nearer, fell):
        below = next_trial(PI_PLUS, ["default", "hiutil"], history, PRESSED)
        assert below is not None and (below.profile, below.rung) == ("hiutil", 40)


IDLE = Tuning(descend=True, descent_gain_max=1.3, descent_idle_util=45.0)


def test_a_best_that_left_its_gpus_mostly_idle_and_clear_of_the_card_is_not_measured_lower() -> None:
    """NVML saw the best's GPUs busy less than `descent_idle_util` of the time and it ran clear of the card: neither way
    for fewer envs to run faster is near, so the rung below is not launched, even for the case's best and with no
    measured pair yet (the insurance the walk otherwise pays), and its walk says why. Busy GPUs, memory near the
    card or unknown, a CPU (no GPU util), a pair that fell, or `descent_short` off: the descent runs as before."""
    idle = [Attempt("default", 128, OOM), Attempt("default", 64, OK, 0.63, 6874.0, 7059.0, util=14.6)]
    assert next_trial(PI_PLUS, ["default"], idle, IDLE) is None
    state = standing(PI_PLUS, "default", idle, IDLE)
    assert (state.outcome, state.rung) == (Outcome.FOUND, 64)
    assert state.skipped[-1] == (
        48,
        "64 envs kept the GPUs busy 15% of the time (under 45%) and used 63% of the "
        "card: with neither near its limit, a lower rung is taken to be no faster than "
        "64 envs",
    )
    for other in ({"util": 60.0}, {"util": None}, {"mem_frac": 0.97}, {"mem_frac": None}):
        pressed = [idle[0], replace(idle[1], **other)]
        below = next_trial(PI_PLUS, ["default"], pressed, IDLE)
        assert below is not None and (below.rung, below.step) == (48, Step.DESCENT), other
        assert all(r != 48 for r, _ in standing(PI_PLUS, "default", pressed, IDLE).skipped), other
    for tuning in (replace(IDLE, descent_short=False), replace(IDLE, descent_idle_util=None)):
        assert next_trial(PI_PLUS, ["default"], idle, tuning) is not None
    fell = [
        *idle,
        Attempt("hiutil", 64, OK, 0.6, 2000.0, 2100.0, util=10.0),
        Attempt("hiutil", 48, OK, 0.5, 2200.0, 2300.0, util=9.0),
    ]
    assert next_trial(PI_PLUS, ["default", "hiutil"], fell, IDLE) == next_trial(
        PI_PLUS, ["default", "hiutil"], fell, replace(IDLE, descent_idle_util=None)
    )  # fewer envs was faster once: no rule
    seeded = [*idle, Attempt("hiutil", 64, OK, 0.63, 1811.0, 1910.0, util=12.0)]
    decision = next_trial(PI_PLUS, ["default", "hiutil"], seeded, IDLE)  # not below: the rung above is in reach
    assert decision is not None and (decision.profile, decision.rung) == ("hiutil", 128)


def test_a_rung_above_that_even_perfect_scaling_cannot_lift_to_the_cases_best_is_not_launched() -> None:
    """samples/s grows at most in proportion to num_envs (an iteration never gets faster with more envs): a later
    profile's rungs above its fit whose bound stays below the case's best are skipped, and say why; the walk still
    launches the ones within reach, lowest first, and never one more than it would without the bound."""
    first = [
        Attempt("default", 64, OOM),
        Attempt("default", 48, OK, None, 5374.0, 5500.0),
        Attempt("default", 40, OK, None, 5218.0, 5400.0),
    ]
    hiutil = [*first, Attempt("hiutil", 48, OK, None, 2410.0, 2600.0)]
    tuning = Tuning(descend=True, descent_gain_max=1.3, throughput=True, descent_idle_util=None)
    decision = next_trial(PI_PLUS, ["default", "hiutil"], hiutil, tuning)  # 64: at most 2600 x 64/48 = 3467
    assert decision is not None and (decision.profile, decision.rung) == ("hiutil", 128)  # 6933: still within reach
    assert "could still become the pick" in decision.why
    without = next_trial(PI_PLUS, ["default", "hiutil"], hiutil, replace(tuning, throughput=False))
    assert without is not None and without.rung == 64

    done = [*hiutil, Attempt("hiutil", 128, OOM)]
    assert next_trial(PI_PLUS, ["default", "hiutil"], done, tuning) is None
    state = standing(PI_PLUS, "hiutil", done, tuning)
    assert (state.outcome, state.rung) == (Outcome.FOUND, 48)
    assert dict(state.skipped)[64] == (
        "even perfect scaling from 2,600 at 48 envs (3,467) stays below the case's best 5,374"
    )

    slow = [*first, Attempt("hiutil", 48, OK, None, 900.0, 1000.0)]  # 256: 5333, every rung above is out of reach
    assert next_trial(PI_PLUS, ["default", "hiutil"], slow, tuning) is None
    assert [r for r, _ in standing(PI_PLUS, "hiutil", slow, tuning).skipped][:3] == [256, 128, 64]  # and 40: gain_max
    assert next_trial(PI_PLUS, ["default", "hiutil"], slow, replace(tuning, strategy=Strategy.PLAIN)) is not None


# --- a step-down on weak evidence is confirmed on the same rung once (README: Verdicts) ---

WEAK = "weak"  # a low-confidence oom_or_nccl (a simulator buffer overflow, a bare SIGKILL with no kernel line)


def history(*steps: tuple[int, object]) -> list[Attempt]:
    return [
        Attempt("default", rung, OOM, confirmed=False) if status == WEAK else Attempt("default", rung, status)
        for rung, status in steps
    ]


UNM = Status.UNMEASURED


@pytest.mark.parametrize("tuning", [PLAIN, Tuning()], ids=["plain", "model"])
@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([(256, WEAK)], (Outcome.PENDING, 256)),  # once more on the same rung, not a step down
        ([(256, WEAK), (256, WEAK)], (Outcome.PENDING, 128)),  # failed twice: it counts
        ([(256, WEAK), (256, OOM)], (Outcome.PENDING, 128)),
        ([(256, WEAK), (256, OK)], (Outcome.FOUND, 256)),  # it fits after all
        ([(256, OOM)], (Outcome.PENDING, 128)),  # proved (the kernel's evidence, a named line): steps down at once
        ([(256, OOM), (128, WEAK)], (Outcome.PENDING, 128)),
        ([(256, OOM), (128, WEAK), (128, WEAK), (64, OK)], (Outcome.FOUND, 64)),
        ([(256, TIMEOUT)], (Outcome.PENDING, 128)),  # a timeout carries no confidence: as before
    ],
    ids=[
        "weak-reruns",
        "weak-twice-steps-down",
        "weak-then-proved",
        "weak-then-fits",
        "proved-steps-down",
        "weak-below-a-proved-failure",
        "confirmed-twice-then-fits-below",
        "timeout-unchanged",
    ],
)
def test_a_weak_step_down_runs_the_same_rung_once_more(
    steps: list[tuple[int, object]], expected: tuple[Outcome, int | None], tuning: Tuning
) -> None:
    state = standing(RUNGS, "default", history(*steps), tuning)
    assert (state.outcome, state.rung) == expected


def test_the_confirmation_says_why() -> None:
    decision = next_trial(RUNGS, ["default"], history((256, WEAK)))
    assert decision is not None and (decision.rung, "weak evidence" in decision.why) == (256, True)


@pytest.mark.parametrize("tuning", [PLAIN, Tuning()], ids=["plain", "model"])
@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([(256, UNM)], (Outcome.FOUND, 256)),
        ([(256, OOM), (128, UNM)], (Outcome.FOUND, 128)),
        ([(256, UNM), (128, OK)], (Outcome.FOUND, 256)),
        ([(256, OOM), (128, UNM), (64, OK)], (Outcome.FOUND, 128)),
    ],
    ids=["top-survived", "survived-below-a-failure", "survived-above-a-measured-fit", "below-it-nothing-to-walk"],
)
def test_an_unmeasured_rung_is_a_fit_for_memory(
    history: list[tuple[int, Status]], expected: tuple[Outcome, int | None], tuning: Tuning
) -> None:
    """It survived, so the rungs below it fit: the walk ends there as at an `ok` rung (its lack of figures is the
    pick's business, `rows.best`, not the walk's)."""
    state = standing(RUNGS, "default", attempts("default", *history), tuning)
    assert (state.outcome, state.rung) == expected


def test_an_unmeasured_rung_gives_the_memory_fit_a_point_but_no_value_to_beat() -> None:
    history = [
        Attempt("default", 256, OOM),
        Attempt("default", 64, UNM, mem_frac=0.30),
        Attempt("default", 48, OK, mem_frac=0.25, value=900.0, value_hi=950.0),
    ]
    # two memory points (the unmeasured one among them): the fit (0.10 + 0.003125 x) puts 128 at 50% of the card
    decision = next_trial(RUNGS, ["default"], history, Tuning())
    assert decision is not None and decision.rung == 128 and "memory fit" in decision.why
    # with the descent, what a launch must beat comes from the measured rung only
    descend = Tuning(descend=True, throughput=True, descent_gain_max=None, descent_idle_util=None)
    decision = next_trial(RUNGS, ["default"], history, descend)
    assert decision is not None and decision.beat is not None and decision.beat >= 900.0


DIV = Status.DIVERGED


@pytest.mark.parametrize("tuning", [PLAIN, Tuning()], ids=["plain", "model"])
@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([(256, DIV)], (Outcome.PENDING, 128)),  # never the answer: the walk goes on below it
        ([(256, DIV), (128, OK)], (Outcome.FOUND, 128)),
        ([(256, OOM), (128, DIV), (64, OK)], (Outcome.FOUND, 64)),
        ([(256, DIV), (128, DIV), (64, DIV), (48, DIV)], (Outcome.DIVERGED, 48)),  # fits, but nothing trains
    ],
    ids=["steps-below", "fits-below", "below-a-failure", "all-diverged"],
)
def test_a_diverged_rung_is_never_the_answer_and_the_walk_goes_on_below_it(
    history: list[tuple[int, Status]], expected: tuple[Outcome, int | None], tuning: Tuning
) -> None:
    state = standing(RUNGS, "default", attempts("default", *history), tuning)
    assert (state.outcome, state.rung) == expected


def test_a_profile_that_diverged_everywhere_is_no_word_against_memory_for_the_next() -> None:
    # every rung of `default` that fits diverged: `hiutil` is not seeded at the lowest rung as if none fitted
    all_diverged = [Attempt("default", r, DIV) for r in RUNGS]
    decision = next_trial(RUNGS, ["default", "hiutil"], all_diverged, Tuning())
    assert decision is not None and (decision.profile, decision.rung) == ("hiutil", 256)
    assert "lowest rung" not in decision.why


# ---------------------------------------------------------------- the descent as insurance: short where it rarely pays


def hi(rung: int, value: float) -> Attempt:
    return Attempt("hiutil", rung, OK, None, value, value * 1.02)


@pytest.mark.parametrize(
    ("history", "rises"),
    [
        ([], False),
        ([rate(256, 5000.0)], False),  # one point: no pair says anything
        ([rate(256, 5000.0), rate(128, 4000.0)], True),
        ([rate(256, 5000.0), rate(128, 5200.0)], False),  # the lower rung was faster (even within the interval)
        ([rate(256, 5000.0), rate(128, 4000.0), hi(256, 3000.0), hi(128, 3100.0)], False),  # one profile peaks lower
        ([rate(256, 5000.0), rate(128, 4000.0), hi(256, 3000.0)], True),  # a lone point of another profile is mute
        ([rate(256, 5000.0), rate(128, 4000.0), rate(64, 4100.0)], False),  # any pair that falls breaks it
        ([rate(256, 5000.0), Attempt("default", 128, OOM), rate(64, 3000.0)], True),  # failures are no figures
    ],
    ids=[
        "none",
        "one-point",
        "rising",
        "lower-faster",
        "other-profile-peaks",
        "lone-point",
        "one-pair-falls",
        "failure-ignored",
    ],
)
def test_rising_asks_every_measured_pair(history: list[Attempt], rises: bool) -> None:
    from ladder.core.walk import rising

    assert bool(rising(history)) is rises


@pytest.mark.parametrize(
    ("history", "profiles", "expected"),
    [
        # the first descent step knows no pair yet, nor its memory: a short probe (one that may win runs on)
        ([rate(256, 5000.0)], ["default"], (128, True)),
        # default rose from 128 to 256, so hiutil's step below its fit is a short probe
        ([rate(256, 5000.0), rate(128, 4000.0), hi(256, 5100.0)], ["default", "hiutil"], (128, True)),
        # where a lower rung won, the next step down is measured in full: the evidence says fewer envs may pay
        ([rate(256, 5000.0), rate(128, 6200.0)], ["default"], (64, False)),
        # no pair yet, but the largest fit ran clear of the card (no memory pressure): a short probe
        ([Attempt("default", 256, OK, 0.66, 5000.0, 5100.0)], ["default"], (128, True)),
        # ... and near the card's limit too: its short window sees a win by more than the band as well
        ([Attempt("default", 256, OK, 0.96, 5000.0, 5100.0)], ["default"], (128, True)),
        # ... and where a lower rung won, clear of the card or not
        (
            [Attempt("default", 256, OK, 0.66, 5000.0, 5100.0), Attempt("default", 128, OK, 0.5, 6200.0, 6300.0)],
            ["default"],
            (64, False),
        ),
    ],
    ids=["first-step-short", "evidence-short", "lower-won-full", "clear-short", "near-short", "clear-lower-won-full"],
)
def test_a_descent_step_is_a_short_probe_where_the_evidence_says_it_is_unlikely_to_win(
    history: list[Attempt], profiles: list[str], expected: tuple[int, bool]
) -> None:
    tuning = Tuning(descend=True, descent_gain_max=None, descent_idle_util=None)
    decision = next_trial(PI_PLUS, profiles, history, tuning)
    assert decision is not None and (decision.rung, decision.short) == expected
    assert decision.beat is not None and decision.why.startswith("below the largest fit")
    assert ("; a short probe: " in decision.why) is expected[1]
    off = next_trial(PI_PLUS, profiles, history, replace(tuning, descent_short=False))
    assert off is not None and (off.rung, off.short) == (expected[0], False)


def test_launches_that_are_not_descent_steps_are_never_short() -> None:
    rose = [rate(256, 5000.0), rate(128, 4000.0)]
    seeded = next_trial(
        PI_PLUS, ["default", "hiutil"], rose, Tuning(descend=True, descent_gain_max=None, descent_idle_util=None)
    )
    assert seeded is not None and (seeded.profile, seeded.rung, seeded.short) == ("hiutil", 256, False)
    above = next_trial(
        (512, 256, 128),
        ["default", "hiutil"],
        [*rose, hi(256, 5100.0), hi(128, 4000.0)],
        Tuning(descend=True, descent_gain_max=None, descent_idle_util=None),
    )
    assert above is not None and (above.rung, above.short) == (512, False)


@pytest.mark.parametrize(
    ("trials", "line"),
    [
        ([], ""),
        ([("walk", 9.0, {})], ""),
        (
            [("walk", 9.0, {}), ("descent", 12.5, {"cut": 1.0}), ("descent", 4.25, {"cut": 1.0, "short": 1.0})],
            "insurance: 2 trial(s) below the largest fit cost 16.8 s (1 short probe(s), 2 stopped early)",
        ),
    ],
    ids=["nothing", "no-descent", "two-steps"],
)
def test_the_summary_says_what_the_insurance_cost(trials: list, line: str) -> None:
    from ladder.core.walk import insurance

    assert insurance(trials) == line


# ---- a failure that names no memory at every rung: the lowest rung tells whether num_envs matters at all


def failed(profile: str, rung: int, reason: Reason, status: Status = OOM, confirmed: bool = True) -> Attempt:
    return Attempt(profile, rung, status, confirmed=confirmed, reason=reason)


@pytest.mark.parametrize(
    "tuning",
    [PLAIN, Tuning(), Tuning(descend=True, descent_gain_max=None, descent_idle_util=None)],
    ids=["plain", "model", "descend"],
)
@pytest.mark.parametrize(
    ("reason", "status"),
    [(Reason.NCCL_ERROR, OOM), (Reason.PEER_LOST, OOM), (Reason.NCCL_TIMEOUT, OOM), (Reason.STALLED, TIMEOUT)],
    ids=["nccl", "peer-lost", "nccl-timeout", "stalled"],
)
def test_two_failures_without_memory_evidence_send_the_walk_to_the_lowest_rung(
    reason: Reason, status: Status, tuning: Tuning
) -> None:
    top = [failed("default", 256, reason, status)]
    assert next_trial(PI_PLUS, ["default"], top, tuning).rung == 128  # one such failure: the walk as ever
    two = [*top, failed("default", 128, reason, status)]
    bottom = next_trial(PI_PLUS, ["default"], two, tuning)
    assert bottom is not None and (bottom.rung, bottom.step) == (32, Step.BOTTOM)
    assert "256, 128" in bottom.why and str(reason) in bottom.why
    same = [*two, failed("default", 32, reason, status)]
    assert next_trial(PI_PLUS, ["default"], same, tuning) is None  # 3 launches, not 8
    assert (standing(PI_PLUS, "default", same, tuning).outcome, standing(PI_PLUS, "default", same, tuning).rung) == (
        Outcome.UNRELATED,
        32,
    )


@pytest.mark.parametrize("tuning", [PLAIN, Tuning()], ids=["plain", "model"])
def test_where_the_lowest_rung_fits_the_walk_goes_on_between_and_finds_the_same_largest_fit(tuning: Tuning) -> None:
    """NCCL failures that did depend on num_envs (fits from 48 down): one launch more than the plain walk, and
    the same answer."""
    fits_from = 48
    history: list[Attempt] = []
    while (step := next_trial(PI_PLUS, ["default"], history, tuning)) is not None:
        ok = step.rung <= fits_from
        history.append(
            Attempt("default", step.rung, OK if ok else OOM, reason=Reason.NONE if ok else Reason.NCCL_ERROR)
        )
        assert len(history) <= len(PI_PLUS)
    assert [a.rung for a in history][:3] == [256, 128, 32]
    state = standing(PI_PLUS, "default", history, tuning)
    assert (state.outcome, state.rung) == (Outcome.FOUND, fits_from)


def test_memory_evidence_or_no_reason_keeps_the_walk_stepping_down() -> None:
    memory = [failed("default", 256, Reason.CUDA_OOM), failed("default", 128, Reason.NCCL_ERROR)]
    assert next_trial(PI_PLUS, ["default"], memory, PLAIN).rung == 64  # one line named memory: it matters
    unknown = [failed("default", 256, Reason.NONE), failed("default", 128, Reason.NONE)]
    assert next_trial(PI_PLUS, ["default"], unknown, PLAIN).rung == 64  # no reason recorded: never taken for one
    weak = [failed("default", 256, Reason.NCCL_ERROR), failed("default", 128, Reason.NCCL_ERROR, confirmed=False)]
    again = next_trial(PI_PLUS, ["default"], weak, PLAIN)
    assert again is not None and (again.rung, again.step) == (128, Step.AGAIN)  # weak evidence runs once more first
    full = [
        replace(a, mem_frac=0.93)
        for a in (failed("default", 256, Reason.NCCL_ERROR), failed("default", 128, Reason.NCCL_ERROR))
    ]
    assert next_trial(PI_PLUS, ["default"], full, PLAIN).rung == 64  # at a full card, an NCCL error is memory's too
    mixed = [failed("default", 256, Reason.NCCL_ERROR), *(failed("default", r, Reason.HOST_OOM) for r in PI_PLUS[1:-1])]
    last = next_trial(PI_PLUS, ["default"], mixed, PLAIN)
    assert last is not None and (last.rung, last.step) == (32, Step.BETWEEN)  # memory named at 128..36: a plain step
    nccl_last = [*mixed, failed("default", 32, Reason.NCCL_ERROR)]
    assert standing(PI_PLUS, "default", nccl_last).outcome is Outcome.EXHAUSTED  # num_envs mattered above it
    everywhere = [failed("default", r, Reason.HOST_OOM) for r in PI_PLUS]
    assert standing(PI_PLUS, "default", everywhere).outcome is Outcome.EXHAUSTED  # out of memory at every rung: no fit


def test_a_later_profile_seeded_at_the_lowest_rung_is_the_same_check_at_once() -> None:
    first = [failed("default", r, Reason.PEER_LOST) for r in (256, 128, 32)]
    seeded = next_trial(PI_PLUS, ["default", "hiutil"], first, Tuning())
    assert seeded is not None and (seeded.profile, seeded.rung, seeded.step) == ("hiutil", 32, Step.BOTTOM)
    same = [*first, failed("hiutil", 32, Reason.PEER_LOST)]
    assert next_trial(PI_PLUS, ["default", "hiutil"], same, Tuning()) is None
    assert standing(PI_PLUS, "hiutil", same).outcome is Outcome.UNRELATED
    memory = [*first, failed("hiutil", 32, Reason.HOST_OOM)]
    assert standing(PI_PLUS, "hiutil", memory).outcome is Outcome.EXHAUSTED  # its own failure there named memory
