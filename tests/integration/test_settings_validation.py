"""One configuration path: the composed config is validated once into the frozen `Settings`, states as enums.

Each row gives a command-line override and what `settings_from` must say: the bad key, and a fix naming a value
that works. The states the settings hold are enum members whose string form is what the records keep.
"""

from __future__ import annotations

import subprocess
import sys

from ladder.core.errors import ExitCode


def test_bad_decide_thresholds_exit_with_bad_settings_before_anything_runs(tmp_path) -> None:
    argv = [sys.executable, "-m", "ladder.search", "case=amp_pi_plus", "decide.low_util=80", f"output_root={tmp_path}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == ExitCode.BAD_SETTINGS
    assert "low_util <= compute_util" in done.stderr and "fix: e.g. decide.low_util=45" in done.stderr
    assert not list(tmp_path.glob("case_gpu_bench_*")), "no sweep was started"
