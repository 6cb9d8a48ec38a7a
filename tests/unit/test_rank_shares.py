"""`ladder.runner.ranks.shares`: each rank's CPUs under `--pin`."""

from __future__ import annotations

import pytest

from ladder.runner.ranks import parse, shares

pytestmark = pytest.mark.unit


def test_the_cpus_are_cut_into_contiguous_runs_one_per_rank() -> None:
    assert shares({0, 1}, 2) == [{0}, {1}]
    assert shares({0, 1, 2, 3, 4, 5, 6, 7}, 2) == [{0, 1, 2, 3}, {4, 5, 6, 7}]
    assert shares({4, 5, 6, 7, 8}, 2) == [{4, 5, 6}, {7, 8}]  # the first one larger where they do not divide
    assert shares({2, 9, 5}, 3) == [{2}, {5}, {9}]  # in order, whatever the set's


def test_every_cpu_goes_to_exactly_one_rank() -> None:
    for n_cpus in range(1, 13):
        for nproc in range(1, n_cpus + 1):
            got = shares(set(range(n_cpus)), nproc)
            assert got is not None and len(got) == nproc
            assert sorted(c for share in got for c in share) == list(range(n_cpus))
            assert max(map(len, got)) - min(map(len, got)) <= 1


def test_fewer_cpus_than_ranks_pins_none() -> None:
    assert shares({0}, 2) is None
    assert shares({0, 1}, 4) is None


def test_pin_is_an_option_of_the_launcher() -> None:
    options, program = parse(["--nproc", "2", "--port", "1", "--log-dir", "d", "--pin", "--", "prog"])
    assert options.pin and program == ["prog"]
    options, _ = parse(["--nproc", "2", "--port", "1", "--log-dir", "d", "--", "prog"])
    assert not options.pin
