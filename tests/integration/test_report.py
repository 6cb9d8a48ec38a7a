"""The report: the series behind each plot (data, not pixels), and the files `python -m ladder.report` writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ladder.storage import sweeps
from ladder.ui.report import build
from tests.helpers import REPO
from tests.unit.test_report import write_sweep

ROOT = REPO


# ---------------------------------------------------------------- files


@pytest.mark.parametrize("make", [False, True], ids=["no-folder", "empty-folder"])
def test_the_command_says_what_is_missing(tmp_path: Path, make: bool) -> None:
    target = tmp_path / "case_gpu_bench_x"
    if make:
        target.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "ladder.report", str(target)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    said = f"no trials in {target / 'trials.tsv'}" if make else f"no such folder: {target}"
    assert said in proc.stderr


def test_the_command_refuses_what_is_not_a_sweep_folder_and_writes_nothing(tmp_path: Path) -> None:
    """A folder whose trials.tsv is some other file (a README copied over it), and a trials.tsv given for its
    folder: refused, no report.md or plots written (a report of 244 'trials' with no case, plots/.png.png)."""
    target = tmp_path / "case_gpu_bench_x"
    target.mkdir()
    (target / "trials.tsv").write_text((ROOT / "README.md").read_text())
    for given, said in (
        (target, f"{target / 'trials.tsv'} is not a trials.tsv ladder wrote: it has no"),
        (target / "trials.tsv", f"{target / 'trials.tsv'} is a file: give the sweep folder that holds it ({target})"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "ladder.report", str(given)], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert sorted(p.name for p in target.iterdir()) == ["trials.tsv"]


def test_the_command_prints_the_report_path(tmp_path: Path) -> None:
    write_sweep(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "ladder.report", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "report.md")


def test_an_output_root_given_for_a_sweep_names_its_latest_sweep(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"case_gpu_bench_{name}").mkdir()
        write_sweep(tmp_path / f"case_gpu_bench_{name}")
    sweeps.note_latest(tmp_path, "a")
    with pytest.raises(FileNotFoundError, match="holds sweeps") as got:
        build.write_report(tmp_path)
    assert str(got.value).endswith(f"python -m ladder.report {tmp_path / 'case_gpu_bench_a'}")
