"""Learning sanity (`ladder.failures.diverged`): each trainer family's own print of a loss gone NaN or infinite is
found, in the formats captured from the real trainers (tests/data/progress/, one value replaced as the trainer's
own formatting prints a NaN); no healthy capture and no real failure excerpt without one is taken for it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from ladder.failures.diverged import diverged_line
from tests.helpers import DATA

PROGRESS = DATA / "progress"


def _swap(path: Path, line_pattern: str, value: str) -> tuple[str, str]:
    """The capture with the value of the first line matching `line_pattern` replaced, and that line."""
    lines = path.read_text(errors="replace").splitlines()
    at = next(i for i, line in enumerate(lines) if re.search(line_pattern, line))
    lines[at] = re.sub(r"(?<=[\s|:=])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?=\s*\|?\s*$)", value, lines[at], count=1)
    return "\n".join(lines), lines[at].strip()


@pytest.mark.parametrize(
    ("capture", "line_pattern", "printed"),
    [
        ("mimickit_stdout.log", r"\| +Actor_Loss \|", f"{math.nan:8.3g}"),  # MimicKit's Logger.print_log
        ("sb3_ppo_stdout.log", r"\|    loss ", f"{math.nan:<9.3g}"),  # stable-baselines3's table
        ("sb3_ppo_stdout.log", r"approx_kl", "inf"),
        ("rsl_rl_5.5.1_stdout.log", r"Mean value loss:", f"{math.nan:.4f}"),  # rsl_rl's OnPolicyRunner
        ("rsl_rl_5.5.1_stdout.log", r"Mean entropy loss:", f"{-math.inf:.4f}"),
    ],
    ids=["mimickit-table", "sb3-loss", "sb3-kl-inf", "rsl_rl-value-loss", "rsl_rl-entropy-minus-inf"],
)
def test_a_loss_printed_as_nan_or_inf_is_found_in_each_trainers_format(
    capture: str, line_pattern: str, printed: str
) -> None:
    text, line = _swap(PROGRESS / capture, line_pattern, printed.strip())
    assert re.search(r"(?i)nan|inf", line)
    assert diverged_line(text) == line


def test_the_real_rsl_rl_nan_losses_excerpt_is_found() -> None:
    """github.com/leggedrobotics/rsl_rl#96, as pasted: NaN losses printed before PhysX's error."""
    rows = (json.loads(r) for r in (DATA / "failure_logs" / "heldout_d.jsonl").read_text().splitlines())
    text = next(r["text"] for r in rows if r["id"] == "rsl-rl-96-nan-losses-then-found-lost-pairs")
    assert diverged_line(text) == "Mean value_function loss: nan"


@pytest.mark.parametrize(
    "line",
    [
        '{"iter": 7, "samples": 7168, "loss": NaN}',  # a JSONL field, as Python's json writes it
        '{"iter": 7, "policy_loss": -Infinity}',
        "loss tensor(nan, grad_fn=<AddBackward0>)",  # a tensor printed as it is
        "global_step=2048, episodic_return=[inf]",  # CleanRL's episode line, its return infinite
        "Rank-0: policy_step=4096, reward_env_2=-inf",  # sheeprl's
        "train/value_loss=nan",
    ],
)
def test_other_shapes_of_a_diverged_print(line: str) -> None:
    assert diverged_line(f"step 1\n{line}\nstep 2") == line


@pytest.mark.parametrize(
    "line",
    [
        "|    ep_rew_mean          | nan           |",  # the mean of no finished episode yet
        "global_step=64, episodic_return=[nan]",
        "|          Test_Return |             nan |",
        "grad_norm: inf",  # a mixed-precision scaler skips the step by design
        "workload=inf",  # `kl` inside a word is no KL
        "loss: 0.0123 (nan-safe)",
        "Mean value loss: 204.8169",
    ],
)
def test_what_is_not_diverged_training(line: str) -> None:
    assert diverged_line(line) == ""


def test_no_healthy_capture_and_no_real_failure_excerpt_without_nan_losses_reads_as_diverged() -> None:
    for capture in sorted(PROGRESS.iterdir()):
        if capture.suffix != ".md":
            assert diverged_line(capture.read_text(errors="replace")) == "", capture.name
    for corpus in sorted((DATA / "failure_logs").glob("*.jsonl")) + sorted(DATA.glob("failure_logs*.jsonl")):
        for row in map(json.loads, corpus.read_text().splitlines()):
            found = diverged_line(row["text"])
            assert (found != "") == ("nan-losses" in row["id"]), (corpus.name, row["id"], found)
