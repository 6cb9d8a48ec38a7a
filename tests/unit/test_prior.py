"""A sweep on another card starts from the memory model's prediction: the predicted rung, then the one above it.
The prior only orders launches: on simulated cards the walk with it picks what the cold walk picks, in fewer
launches where the prediction holds and no more than one extra where it is one rung off."""

from __future__ import annotations

import pytest

from ladder.core.memory import first
from ladder.core.memory.cards import answer
from ladder.core.memory.model import Observation, fit
from ladder.core.records import Status
from ladder.core.walk import Attempt, Outcome, Seed, Strategy, Tuning, next_trial, standing
from ladder.storage.history import Group
from ladder.sweep import prior

DEFAULT_LADDER = (4096, 2048, 1024, 512, 256, 128, 64)
GB = 1024.0
FIXED_MB, PER_ENV_MB = 1000.0, 2.0  # a trainer's memory: a fixed part and a part per env
OK, OOM = Status.OK, Status.OOM_OR_NCCL


def needs(rung: int) -> float:
    return FIXED_MB + PER_ENV_MB * rung


COLD = Tuning()


def walk_on(card_gb: float, priors: dict[str, Seed] | None, tuning: Tuning = COLD, profiles=("default",)):
    """The walk on a simulated card: each launch fits where the rung's memory is under the card; the launches in
    order and each profile's standing at the end."""
    attempts: list[Attempt] = []
    while (d := next_trial(DEFAULT_LADDER, profiles, attempts, tuning, priors)) is not None:
        fits = needs(d.rung) <= card_gb * GB
        attempts.append(
            Attempt(d.profile, d.rung, OK if fits else OOM, needs(d.rung) / (card_gb * GB) if fits else None)
        )
        assert len(attempts) < 40
    return [a.rung for a in attempts], [standing(DEFAULT_LADDER, p, attempts, tuning) for p in profiles]


def measured_on(card_gb: float) -> list[Observation]:
    """What a cold sweep on one card leaves in storage: its fits as points, its failures as bounds."""
    rungs, _ = walk_on(card_gb, None)
    cap = card_gb * GB
    return [Observation(r, cap, (needs(r),)) if needs(r) <= cap else Observation(r, cap, (), False) for r in rungs]


def seed_for(observations: list[Observation], card_gb: float, headroom: float = 0.05) -> dict[str, Seed]:
    found = first.opening(answer(fit(observations), DEFAULT_LADDER, card_gb, headroom), DEFAULT_LADDER)
    return prior.seeds({"default": found})


@pytest.mark.parametrize("card_gb", [1.8, 3.5, 6.0, 12.0], ids=["1.8GB", "3.5GB", "6GB", "12GB"])
def test_a_prediction_that_holds_settles_the_largest_fit_in_two_launches(card_gb: float) -> None:
    history = measured_on(4.0) + measured_on(8.0)  # two cards give two points at least
    cold, cold_end = walk_on(card_gb, None)
    warm, warm_end = walk_on(card_gb, seed_for(history, card_gb))
    assert [(s.outcome, s.rung) for s in warm_end] == [(s.outcome, s.rung) for s in cold_end]  # the same pick
    assert len(warm) <= min(2, len(cold))


def test_the_opening_is_the_predicted_rung_then_the_one_above() -> None:
    seeds = seed_for(measured_on(4.0) + measured_on(8.0), 1.8)
    warm, _ = walk_on(1.8, seeds)
    assert seeds["default"].rung == 256 and seeds["default"].why.startswith("history: ")
    assert warm == [256, 512]  # 256 fits 1.8 GB less 5%, 512 does not: settled


def test_a_prediction_one_rung_too_high_costs_one_launch_and_changes_no_pick() -> None:
    wrong = {"default": Seed(1024, "history: a prediction one rung too high")}
    cold, cold_end = walk_on(1.8, None)
    warm, warm_end = walk_on(1.8, wrong)
    assert warm == [1024, 512, 256]  # the walk goes on as it would have: down from the failure
    assert [(e.outcome, e.rung) for e in warm_end] == [(e.outcome, e.rung) for e in cold_end] == [(Outcome.FOUND, 256)]


def test_a_prediction_one_rung_too_low_walks_up_to_the_same_pick() -> None:
    low = {"default": Seed(128, "history: a prediction one rung too low")}
    warm, warm_end = walk_on(1.8, low)
    assert warm[:2] == [128, 256] and (warm_end[0].outcome, warm_end[0].rung) == (Outcome.FOUND, 256)


def test_the_plain_walk_takes_no_prior() -> None:
    plain = Tuning(Strategy.PLAIN)
    cold, _ = walk_on(1.8, None, plain)
    warm, _ = walk_on(1.8, {"default": Seed(256, "history")}, plain)
    assert warm == cold and cold[0] == 4096


def test_a_profiles_own_prior_comes_before_an_earlier_profiles_pick() -> None:
    priors = {"hiutil": Seed(128, "history: hiutil's own")}
    launches, _ = walk_on(1.8, priors, profiles=("default", "hiutil"))
    assert launches[:5] == [4096, 2048, 1024, 512, 256]  # default: cold, down to its largest fit
    assert launches[5] == 128  # hiutil opens at its own prior, not at default's pick


def test_a_prior_stands_under_failures_carried_from_a_larger_card() -> None:
    carried = [Attempt("default", 4096, OOM), Attempt("default", 2048, OOM)]  # copied in, not run here
    decision = next_trial(DEFAULT_LADDER, ["default"], carried, Tuning(), {"default": Seed(256, "history")})
    assert decision is not None and decision.rung == 256
    fitted = [*carried, Attempt("default", 256, OK, 0.7)]
    after = next_trial(DEFAULT_LADDER, ["default"], fitted, Tuning(), {"default": Seed(256, "history")})
    assert after is not None and after.rung == 512  # the seed is spent once a rung ran: the rung above follows


def test_no_model_or_an_unreliable_one_leaves_the_walk_cold() -> None:
    one_point = [Observation(256, 4 * GB, (needs(256),))]
    assert seed_for(one_point, 1.8) == {}
    cold, _ = walk_on(1.8, None)
    assert walk_on(1.8, seed_for(one_point, 1.8))[0] == cold


def group(cap: str) -> Group:
    return Group("c", "default", cap, ())


def test_under_two_caps_the_opening_that_starts_lowest_binds() -> None:
    models = {
        group("emulated card"): fit(measured_on(4.0) + measured_on(8.0)),
        group("memory cgroup"): fit([Observation(r, 64 * GB, (500 + 1.0 * r,)) for r in (512, 1024, 4096)]),
    }
    caps = [(group("emulated card"), 1.8 * GB), (group("memory cgroup"), 64 * GB)]
    found = prior.choose(models, caps, DEFAULT_LADDER, 0.05)
    assert found is not None and found.rungs == (256, 512)
    assert prior.choose(models, [(group("memory cgroup"), 64 * GB)], DEFAULT_LADDER, 0.05).rungs == (4096,)
    assert prior.choose(models, [(group("GPU memory"), 8 * GB)], DEFAULT_LADDER, 0.05) is None
    unsure = {**models, group("memory cgroup"): fit([Observation(512, 64 * GB, (900.0,))])}
    assert prior.choose(unsure, caps, DEFAULT_LADDER, 0.05).rungs == ()  # a cap that cannot say: cold


def test_the_dry_run_line_names_the_rungs_put_first_and_why() -> None:
    found = {"default": first.Opening((256, 512), "256 is predicted to fit 2 GB"), "hiutil": first.Opening((), "no")}
    assert prior.lines(found) == [
        "default: e256 then e512 (256 is predicted to fit 2 GB)",
        "hiutil: the walk as without history (no)",
    ]
    assert list(prior.seeds(found)) == ["default"]
