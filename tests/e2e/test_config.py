"""The composed config: what `python -m ladder.search` sees, and its errors."""

from __future__ import annotations

import subprocess
import sys

from ladder.settings.argv import known_cases
from ladder.settings.config import register

register()


def test_command_line_names_the_unknown_case() -> None:
    out = subprocess.run([sys.executable, "-m", "ladder.search", "case=nope"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == f"ladder: unknown case 'nope'; known: {', '.join(known_cases())}"
    assert "amp_pi_plus" in known_cases()
