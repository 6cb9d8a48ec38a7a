"""`python -m ladder.search --help`: ladder's own settings, one line each, and example commands."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from ladder.settings.config import MeasureConf, SweepConf, WorkloadConf

HIDDEN = {"case", "ladder", "profile", "workload", "measure", "preflight", "decide"}  # groups, listed as groups


def test_help_lists_every_setting_and_examples() -> None:
    done = subprocess.run([sys.executable, "-m", "ladder.search", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "powered by Hydra" not in done.stdout and "== Examples ==" in done.stdout
    assert "case=? lists them" in done.stdout  # as test_case_question_mark_lists_the_cases_as_help_says runs it
    examples = [ln for ln in lines if ln.strip().startswith("python -m ladder.search")]
    assert len(examples) == 3 and any("workload.cmd=" in e for e in examples)
    named = {ln.split()[0].split("=")[0].split(".")[0] for ln in lines if ln.startswith("  ") and ln.split()}
    top = {f.name for f in fields(SweepConf)} - HIDDEN
    assert top - named == set()
    for kind in (WorkloadConf, MeasureConf):
        assert {f.name for f in fields(kind)} - named == set(), kind.__name__
    for group in ("case=", "profile=", "ladder=", "measure=", "preflight.policy=", "decide."):
        assert any(ln.strip().startswith(group) for ln in lines), group


def _help(*overrides: str) -> dict[str, str]:
    """`--help`'s settings as shown: {"window_s": "8", "measure": "demo", ...} (the first `name=value` of a line)."""
    done = subprocess.run(
        [sys.executable, "-m", "ladder.search", *overrides, "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    firsts = [ln.split()[0] for ln in done.stdout.splitlines() if ln.startswith("  ") and ln.split()]
    return dict(first.split("=", 1) for first in firsts if "=" in first)


def test_help_shows_the_values_that_apply_to_the_command_as_typed() -> None:
    demo, standard, typed = _help(), _help("measure=standard"), _help("measure.window_s=33", "confirm_s=120")
    assert (demo["measure"], demo["window_s"], demo["trial_timeout_s"]) == ("demo", "8", "180")
    assert (standard["measure"], standard["window_s"], standard["trial_timeout_s"]) == ("standard", "60", "900")
    assert (typed["window_s"], typed["confirm_s"], typed["stable_tol"]) == ("33", "120", demo["stable_tol"])


def test_case_question_mark_lists_the_cases_as_help_says(tmp_path: Path) -> None:
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / "my_cartpole.yaml").write_text("name: my_cartpole\n")
    argv = [sys.executable, "-m", "ladder.search", "--config-dir", str(tmp_path), "case=?"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert {"amp_pi_plus", "deepmimic_humanoid_ppo", "my_cartpole"} <= set(done.stdout.split())
