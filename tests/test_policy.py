"""The ladder walk on plain data."""

from __future__ import annotations

import pytest

from ladder.policy import MAX_RETRIES, Attempt, Outcome, next_trial, walk
from ladder.records import Status

RUNGS = (256, 128, 64, 48)
OOM, OK, ERR, TIMEOUT = Status.OOM_OR_NCCL, Status.OK, Status.ERROR, Status.TIMEOUT


def attempts(profile: str, *pairs: tuple[int, Status]) -> list[Attempt]:
    return [Attempt(profile, rung, status) for rung, status in pairs]


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([], (Outcome.PENDING, 256)),
        ([(256, OOM)], (Outcome.PENDING, 128)),
        ([(256, OOM), (128, TIMEOUT)], (Outcome.PENDING, 64)),
        ([(256, OOM), (128, OK)], (Outcome.FOUND, 128)),
        ([(256, OOM), (128, ERR)], (Outcome.ERROR, 128)),
        ([(256, OOM), (128, OOM), (64, OOM), (48, OOM)], (Outcome.EXHAUSTED, None)),
        ([(256, Status.INTERRUPTED)], (Outcome.PENDING, 256)),
        ([(256, Status.RETRY)], (Outcome.PENDING, 256)),
        ([(256, Status.RETRY)] * MAX_RETRIES, (Outcome.ERROR, 256)),
    ],
    ids=["fresh", "oom-steps-down", "timeout-steps-down", "ok-found", "error-stops", "exhausted",
         "interrupted-reruns", "retry-same-rung", "retry-bounded"],
)  # fmt: skip
def test_walk(history: list[tuple[int, Status]], expected: tuple[Outcome, int | None]) -> None:
    state = walk(RUNGS, "default", attempts("default", *history))
    assert (state.outcome, state.rung) == expected


def test_error_never_steps_down() -> None:
    history = attempts("default", (256, ERR))
    assert walk(RUNGS, "default", history).outcome is Outcome.ERROR
    assert next_trial(RUNGS, ["default"], history) is None


def test_profiles_walk_in_order_and_independently() -> None:
    history = attempts("default", (256, OOM), (128, OK)) + attempts("hiutil", (256, OOM))
    assert next_trial(RUNGS, ["default", "hiutil"], history) == ("hiutil", 128)
    assert next_trial(RUNGS, ["default", "hiutil"], history[:1]) == ("default", 128)


def test_other_profiles_attempts_do_not_count() -> None:
    assert walk(RUNGS, "hiutil", attempts("default", (256, OOM))).rung == 256
