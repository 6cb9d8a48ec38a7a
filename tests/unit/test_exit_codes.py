"""`python -m ladder.search` exits with a code that says how the sweep ended (ladder.core.errors.ExitCode), and its
advice matches: real runs of the proxy demo under its emulated card, a missing program and a typo'd flag through
`workload.kind=command`, bad settings, and a multirun whose jobs end differently."""

from __future__ import annotations

import pytest

from ladder.core.errors import ExitCode
from ladder.core.outcome import WORST_FIRST, worst


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
