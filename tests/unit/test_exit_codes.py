"""`python -m ladder.search` exits with a code that says how the sweep ended (ladder.core.errors.ExitCode), and its
advice matches: real runs of the proxy demo under its emulated card, a missing program and a typo'd flag through
`workload.kind=command`, bad settings, and a multirun whose jobs end differently."""

from __future__ import annotations

import textwrap

import pytest

from ladder.core.errors import ExitCode
from ladder.core.outcome import WORST_FIRST, worst

TINY = ["device=cpu", "profile=[default]", "measure.window_s=2", "measure.warmup_iters=2", "measure.stable_tol=0.5"]
STEP_DOWN = "step num_envs down"
# argparse, as a trainer's own command line: `--num-envz` is a typo of `--num-envs`
TRAINER = textwrap.dedent(
    """
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-envs", type=int, default=1)
    parser.parse_args()
    """
)
# one trainer for two cases: amp_pi_plus allocates past a data-segment cap (a real allocation failure), add_pi_plus
# starts a program that is not there
TWO_CASES = textwrap.dedent(
    """
    import os, resource, sys
    case, num_envs = sys.argv[1], int(sys.argv[2])
    if case == "add_pi_plus":
        os.execvp("no_such_trainer_xyz", ["no_such_trainer_xyz", "--num-envs", str(num_envs)])
    resource.setrlimit(resource.RLIMIT_DATA, (512 * 2**20, 512 * 2**20))
    import torch
    print(torch.empty(num_envs * 2**20, 64).sum())
    """
)


# ladder.search run as `python -m`, with a bug put into the sweep: what a crash inside ladder exits with
CRASHING = textwrap.dedent(
    """
    import runpy, sys
    import ladder.sweep.loop
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug inside the sweep")
    ladder.sweep.loop.run = broken
    runpy.run_module("ladder.search", run_name="__main__", alter_sys=True)
    """
)


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
        ([0, 77], ExitCode.CRASH),  # a code ladder does not define counts as a crash
    ],
    ids=["none", "all-found", "one-no-fit", "broken-beats-no-fit", "bad-settings", "crash", "interrupted", "unknown"],
)
def test_worst_of_a_multiruns_codes(codes: list[int], expected: int) -> None:
    assert worst(codes) == expected


def test_every_exit_code_has_a_place_in_the_order() -> None:
    assert sorted(WORST_FIRST) == sorted(ExitCode)
