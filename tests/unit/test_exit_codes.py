"""`python -m ladder.search` exits with a code that says how the sweep ended (ladder.core.errors.ExitCode), and its
advice matches: real runs of the proxy demo under its emulated card, a missing program and a typo'd flag through
`workload.kind=command`, bad settings, and a multirun whose jobs end differently."""

from __future__ import annotations

import pytest

from ladder.core.errors import ExitCode
from ladder.core.outcome import WORST_FIRST, case_outcome, worst
from ladder.core.records import Objective, Phase, Reason, Status, TrialRecord
from ladder.core.walk import Step

OOM, PEER = Status.OOM_OR_NCCL, Reason.PEER_LOST


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ([], ExitCode.PICK_FOUND),
        ([0, 0], ExitCode.PICK_FOUND),
        ([0, 3], ExitCode.NO_RUNG_FITS),
        ([3, 4, 0], ExitCode.BROKEN_CONFIG),
        ([4, 2], ExitCode.BAD_SETTINGS),
        ([2, 1], ExitCode.CRASH),
        ([1, 130, 4], ExitCode.INTERRUPTED),
        ([130, 143, 0], ExitCode.TERMINATED),
        ([0, 77], ExitCode.CRASH),  # a code ladder does not define counts as a crash
    ],
    ids=[
        "none",
        "all-found",
        "one-no-fit",
        "broken-beats-no-fit",
        "bad-settings",
        "crash",
        "interrupted",
        "terminated",
        "unknown",
    ],
)
def test_worst_of_a_multiruns_codes(codes: list[int], expected: int) -> None:
    assert worst(codes) == expected


def test_every_exit_code_has_a_place_in_the_order() -> None:
    assert sorted(WORST_FIRST) == sorted(ExitCode)


def test_a_full_disk_is_found_behind_the_errors_raised_from_it() -> None:
    """The TSV writer's ENOSPC reaches the sweep chained (raised while handling it, or from it): it is found there;
    another OSError is not a full disk."""
    import errno

    from ladder.core.errors import disk_full

    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise full
        except OSError as exc:
            raise RuntimeError("while writing trials.tsv") from exc
    except RuntimeError as outer:
        assert disk_full(outer) is full
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded")) is not None
    assert disk_full(OSError(errno.EACCES, "Permission denied")) is None
    assert disk_full(None) is None


def _failed(envs: int, reason: Reason, number: int, step: str = "walk") -> TrialRecord:
    info = {"step": step, "trial_dir": f"trials/amp_pi_plus/default_e{envs}_probe_1"}
    evidence = "[rank0]: RuntimeError: Connection closed by peer"
    return TrialRecord("amp_pi_plus", "amp", "default", envs, Phase.PROBE, OOM, reason, evidence, {}, info, number)


def test_a_case_that_failed_at_the_lowest_rung_as_above_it_is_told_to_fix_it_not_to_step_down() -> None:
    same = [_failed(256, PEER, 1), _failed(128, PEER, 2), _failed(32, PEER, 3, step=str(Step.BOTTOM))]
    row = case_outcome(same, Objective.MIN_AVG_UTIL).row
    assert row is not None and (row["num_envs"], row["status"], row["reason"]) == ("32", "oom_or_nccl", "peer_lost")
    assert row["class"] == "broken configuration" and "stepping num_envs down will not help" in row["action"]
    assert "Connection closed by peer" in row["action"] and "default_e32_probe_1" in row["action"]
    # memory named at the lowest rung, or something of the case fitting: the usual rows
    memory = [*same[:2], _failed(32, Reason.HOST_OOM, 3, step=str(Step.BOTTOM))]
    assert case_outcome(memory, Objective.MIN_AVG_UTIL).row["class"] == "unstable"  # type: ignore[index]
    walked = [*same[:2], _failed(64, PEER, 3)]  # the plain walk's next rung: nothing said yet
    assert case_outcome(walked, Objective.MIN_AVG_UTIL).row["class"] == "unstable"  # type: ignore[index]


def test_a_walk_stopped_on_an_error_below_a_failure_is_told_to_fix_it_not_to_step_down() -> None:
    """The row keeps the lowest failure's rung (an error says nothing of the rung), and its class says what the
    console's `best:` line and the exit code say: a broken configuration."""
    error = TrialRecord(
        "amp_pi_plus", "amp", "default", 512, Phase.PROBE, Status.ERROR, Reason.ERROR, "KeyError: 'lr'", {},
        {"trial_dir": "trials/amp_pi_plus/default_e512_probe_1"}, 2,
    )  # fmt: skip
    row = case_outcome([_failed(1024, Reason.HOST_OOM, 1), error], Objective.MIN_AVG_UTIL).row
    assert row is not None and (row["num_envs"], row["status"], row["class"]) == (
        "1024",
        "oom_or_nccl",
        "broken configuration",
    )
    assert "KeyError: 'lr'" in row["action"] and "default_e512_probe_1" in row["action"]
    assert "stepping num_envs down will not help" in row["action"]
