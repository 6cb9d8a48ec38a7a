"""The decisive evidence line of a broken configuration, on the real output of the CLI libraries trainers use.

Each test runs a small program built on argparse, tyro, click or Hydra with a typo'd flag (or a plain Python
exception) as a subprocess here, and classifies its real stderr and exit code: the verdict is `error` and its
evidence is the line that says what is wrong, never a box border, a blank line or a hint such as
`Set the environment variable HYDRA_FULL_ERROR=1 ...`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ladder.core.records import Reason, Status
from ladder.failures.rules import classify_text

PROGRAMS = {
    "argparse": (
        "import argparse\n"
        "p = argparse.ArgumentParser(prog='train.py')\n"
        "p.add_argument('--num-envs', type=int, default=64)\n"
        "p.parse_args()\n"
    ),
    "tyro": (
        "import dataclasses, tyro\n"
        "@dataclasses.dataclass\n"
        "class Args:\n"
        "    num_envs: int = 64\n"
        "    learning_rate: float = 3e-4\n"
        "tyro.cli(Args)\n"
    ),
    "click": (
        "import click\n"
        "@click.command()\n"
        "@click.option('--num-envs', type=int, default=64)\n"
        "def main(num_envs):\n"
        "    pass\n"
        "main()\n"
    ),
    "hydra": (
        "import hydra\n"
        "@hydra.main(version_base=None, config_path=None, config_name=None)\n"
        "def main(cfg):\n"
        "    print(cfg.env.num_envs)\n"
        "main()\n"
    ),
    "traceback": (
        "def make_env(name):\n"
        "    return {'Ant': 1, 'Humanoid': 2}[name]\n"
        "def main():\n"
        "    make_env('Humanoidd')\n"
        "print('step 0 reward 0.0', flush=True)\n"
        "main()\n"
    ),
    "mute-assert": (  # the reason printed, then an assertion with no message (MimicKit's engine check does this)
        "import sys\n"
        "engine = sys.argv[1]\n"
        "print('step 0 reward 0.0', flush=True)\n"
        "assert engine in ('newton', 'isaac_gym'), print(f'Unsupported engine: {engine}')\n"
    ),
}
BORDERS = "│┃╭╮╰╯─"


def run(tmp_path: Path, library: str, *args: str) -> tuple[str, int]:
    program = tmp_path / "train.py"
    program.write_text(PROGRAMS[library])
    done = subprocess.run(
        [sys.executable, str(program), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    return done.stdout + done.stderr, done.returncode


@pytest.mark.parametrize(
    ("library", "args", "decisive"),
    [
        ("argparse", ("--num-envz", "128"), "train.py: error: unrecognized arguments: --num-envz 128"),
        ("tyro", ("--num-envz", "128"), "Unrecognized options: --num-envz, 128 Perhaps you meant: --num-envs INT"),
        ("click", ("--num-envz", "128"), "Error: No such option '--num-envz'. Did you mean '--num-envs'?"),
        ("hydra", ("env.num_envz=128",), "Could not override 'env.num_envz'."),
        ("hydra", ("+env.num_envz=128",), "omegaconf.errors.ConfigAttributeError: Key 'num_envs' is not in struct"),
        ("traceback", (), "KeyError: 'Humanoidd'"),
        (
            "mute-assert",
            ("no_such_engine",),
            "AssertionError: None (printed before its traceback: Unsupported engine: no_such_engine)",
        ),
    ],
    ids=["argparse", "tyro", "click", "hydra-override", "hydra-missing-key", "python-traceback", "mute-assert"],
)
def test_a_broken_configuration_is_an_error_with_the_line_that_says_what_is_wrong(
    tmp_path: Path, library: str, args: tuple[str, ...], decisive: str
) -> None:
    output, code = run(tmp_path, library, *args)
    printed = decisive.split(" Perhaps")[0].split(" (printed before")[0]
    assert code != 0 and printed in output  # the real library printed it
    verdict = classify_text(output, code)
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
    assert verdict.evidence == decisive
    assert verdict.evidence.strip(BORDERS + " ") == verdict.evidence and "HYDRA_FULL_ERROR" not in verdict.evidence


def test_the_real_outputs_hold_the_decoration_the_evidence_skips(tmp_path: Path) -> None:
    """The traps are real: tyro draws a box whose last line is a border, Hydra ends with its hint line."""
    tyro_out, _ = run(tmp_path, "tyro", "--num-envz", "128")
    hydra_out, _ = run(tmp_path, "hydra", "env.num_envz=128")
    assert tyro_out.strip().splitlines()[-1].startswith("╰")
    assert hydra_out.strip().splitlines()[-1].startswith("Set the environment variable HYDRA_FULL_ERROR=1")


# brax's shape: its training module warns (a call spread over lines: Python prints the warning, then the call's first
# line, `warnings.warn(`), then an `assert` with no message rejects the rung
BRAX_LIKE = (
    "import warnings\n"
    "\n"
    "\n"
    "def train(num_envs, device_count=3):\n"
    "    warnings.warn(\n"
    "        'backend is deprecated, use the pipeline of its own'\n"
    "    )\n"
    "    assert num_envs % device_count == 0\n"
)


def test_a_bare_assertion_after_a_warning_names_the_line_that_failed(tmp_path: Path) -> None:
    module = tmp_path / "brax" / "training" / "agents" / "ppo" / "train.py"
    module.parent.mkdir(parents=True)
    module.write_text(BRAX_LIKE)
    (tmp_path / "run.py").write_text(
        "import sys\n"
        "from brax.training.agents.ppo import train\n"
        "print('step 0 reward 0.0', flush=True)\n"
        "train.train(int(sys.argv[1]))\n"
    )
    done = subprocess.run([sys.executable, "run.py", "64"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    output = done.stdout + done.stderr
    lines = [line.strip() for line in output.splitlines()]
    assert lines[lines.index("Traceback (most recent call last):") - 1] == "warnings.warn("  # the trap is real
    assert lines[-1] == "AssertionError"
    verdict = classify_text(output, done.returncode)
    assert (verdict.status, verdict.reason) == (Status.ERROR, Reason.ERROR)
    assert verdict.evidence == "AssertionError (raised at ppo/train.py:8: assert num_envs % device_count == 0)"
