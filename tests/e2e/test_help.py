"""`python -m ladder.search --help`: ladder's own settings, one line each, and example commands."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

from ladder.settings.config import MeasureConf, SweepConf, WorkloadConf

HIDDEN = {"case", "ladder", "profile", "workload", "measure", "preflight", "decide"}  # groups, listed as groups


def test_help_lists_every_setting_and_examples() -> None:
    done = subprocess.run([sys.executable, "-m", "ladder.search", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "powered by Hydra" not in done.stdout and "== Examples ==" in done.stdout
    examples = [ln for ln in lines if ln.strip().startswith("python -m ladder.search")]
    assert len(examples) == 3 and any("workload.cmd=" in e for e in examples)
    named = {ln.split()[0].split("=")[0].split(".")[0] for ln in lines if ln.startswith("  ") and ln.split()}
    top = {f.name for f in fields(SweepConf)} - HIDDEN
    assert top - named == set()
    for kind in (WorkloadConf, MeasureConf):
        assert {f.name for f in fields(kind)} - named == set(), kind.__name__
    for group in ("case=", "profile=", "ladder=", "measure=", "preflight.policy=", "decide."):
        assert any(ln.strip().startswith(group) for ln in lines), group
