"""`scripts/sim_cut.py --short`: an insurance probe's short window, with and without its end on its first steady
steps (`bounds.rate_top` at `bounds.SHORT_Z`)."""

from __future__ import annotations

import argparse
import random

from ladder.core.measure.noise import Noise
from tests.helpers import load_script


def test_a_clearly_slower_probe_ends_sooner_and_one_that_could_win_is_seldom_ended() -> None:
    sim = load_script("sim_cut")
    noise = Noise(0.03, 6.0)

    def share(ratio: float, early: bool) -> tuple[float, float]:
        return sim.short_share(ratio, 0.03, 15, 300, random.Random(1), noise, early)

    late, late_steps = share(0.85, early=False)
    both, both_steps = share(0.85, early=True)
    assert late == both == 1.0  # every such probe ends, with or without the early end
    assert late_steps == 15 and both_steps < 4  # at its short window's end, or at its first steady steps
    assert share(1.10, early=True)[0] < 0.02  # a rung 10% above what it must beat is almost never ended


def test_the_cut_on_the_final_rate_ends_more_near_losers_and_seldom_a_window_that_would_have_won() -> None:
    """`--predict`: a trial 5% below what it must beat is cut more often on where its window would end than on its
    rate's own top, and a trial whose whole window reaches the value to beat is seldom cut (a wrong cut)."""
    sim = load_script("sim_cut")
    noise = Noise(0.08, 6.0)

    def run(ratio: float, predict: bool) -> tuple[float, float, float]:
        return sim.predict_share(ratio, 0.08, 15, 300, random.Random(1), noise, predict)

    old, new = run(0.95, predict=False), run(0.95, predict=True)
    assert new[0] > old[0]
    assert run(1.05, predict=True)[2] < 0.02


def test_the_cut_before_the_window_opens_ends_clear_losers_and_seldom_a_trial_still_warming_up() -> None:
    """`--early`: on the case's steady first steps a trial at 60% of the value to beat is mostly cut at its second
    step, one at it almost never; where the first step's warm-up differs from trial to trial (half a step on average,
    0.3 of one its spread: a compile cache found by some trials only), a trial at the value to beat is still almost
    never cut, since its own first steps disagree. A trainer whose window runs 15% slower than its first steps (they
    predict as a bound) has its clear losers cut as often, and a trial at the value to beat never."""
    sim = load_script("sim_cut")
    noise = Noise(0.05, 6.0)

    def run(ratio: float, warm: float = 0.0, warm_cv: float = 0.0, slowing: float = 0.0) -> tuple[float, float]:
        args = argparse.Namespace(trials=300, history=1, looks=2, steps=15, warm=warm, warm_cv=warm_cv, slowing=slowing)
        return sim.early_share(ratio, 0.05, args, random.Random(1), noise)

    share, steps = run(0.6)
    assert share > 0.5 and steps == 2.0
    assert run(1.0)[0] < 0.02
    assert run(1.0, warm=0.5, warm_cv=0.3)[0] < 0.02
    assert run(0.6, slowing=0.15)[0] > 0.5
    assert run(1.0, slowing=0.15)[0] < 0.02


def test_a_whole_window_s_pooled_interval_keeps_its_promise_and_is_seldom_wide_where_its_own_would_be() -> None:
    """`--coverage`: four-step windows as noisy as the case's pool, or a case's first window with its three settled
    steps, miss the true rate about as often as a 95% interval promises (5%: at most 7% of 2000 windows) and are
    wide (extended) far less often than on their own steps; a window twice as noisy as the pool is judged on its own
    steps (`rates.POOL_GATE`), so it misses no more than on its own plus a little (at most 10%)."""
    sim = load_script("sim_cut")

    def run(cv: float, noise: Noise | None, settled: int = 0) -> tuple[float, float]:
        return sim.coverage(cv, 4, 2000, random.Random(1), noise, settled)

    own = run(0.03, None)
    for pooled in (run(0.03, Noise(0.03, 6.0)), run(0.03, Noise(0.03, 0.0), settled=3)):
        assert pooled[0] <= 0.07 and pooled[1] < own[1] / 2
    assert run(0.06, Noise(0.03, 6.0))[0] <= 0.10
